"""The one settings object, built once at start and passed in.

Every field is settable as ``BROKERGATE_<FIELD>`` (upper case) and, for the common ones, as a
``brokergate serve`` flag. ``model.Settings`` inherits the groups of this package, one module per
subject: ``deployment``, ``consumers``, ``security``, ``backends``, ``limits``, ``registry``,
``produce``.
"""

from ..core.ports import FlushPolicy
from .model import Settings

__all__ = ["FlushPolicy", "Settings"]
