"""Print the OpenAPI document the app serves, as YAML (``python -m service.openapi > openapi.yaml``)."""

from __future__ import annotations

import sys
from typing import Any

import yaml

from .app import create_app
from .settings import Settings


def document() -> dict[str, Any]:
    return create_app(Settings()).openapi()


def render() -> str:
    return yaml.safe_dump(document(), sort_keys=False, allow_unicode=True, width=100)


if __name__ == "__main__":
    sys.stdout.write(render())
