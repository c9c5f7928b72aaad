"""Print the OpenAPI document the app serves, as YAML.

``python -m service.server.openapi > openapi.yaml`` (``make openapi``) writes the repository's copy.
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

from service.server.app import create_app
from service.settings import Settings


def document() -> dict[str, Any]:
    return create_app(Settings()).openapi()


def render() -> str:
    return yaml.safe_dump(document(), sort_keys=False, allow_unicode=True, width=100)


if __name__ == "__main__":
    sys.stdout.write(render())
