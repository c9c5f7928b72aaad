"""The base of every group of settings: what their validators and properties share.

Each module of this package holds the fields of one subject in a ``SettingsGroup`` subclass,
with the validators of those fields; ``model.Settings`` inherits every group and is the only
one that is ever built.
"""

from __future__ import annotations

from pydantic import BaseModel


class SettingsGroup(BaseModel):
    """One subject's settings, a base of ``Settings``: never built alone, it holds no config of its own
    (``Settings`` has the env prefix) and validates nothing across subjects."""

    @staticmethod
    def split(value: str) -> list[str]:
        """The items of a comma-separated setting."""
        return [item.strip() for item in value.split(",") if item.strip()]
