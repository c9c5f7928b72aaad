"""How the gateway reaches an external schema registry: its URL, credentials, TLS and bounds.

``RegistryClientOptions`` holds the ``schema_registry_*`` client settings (see
``service.settings``, which checks how they combine). The composition root
(``service.server.backends.registry_client_options``) reads the password file a setting may name
and loads the TLS files (``service.adapters.tls``), so a file that cannot be used stops the start
with a one-line ``ValueError`` naming the setting, before anything connects. Secrets stay out of
the repr.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import Final

__all__ = ["RegistryClientOptions"]

# An answer holds one schema text, JSON-escaped (quotes and backslashes double), and its references.
_ANSWER_BYTES_PER_SCHEMA_BYTE: Final = 4
_ANSWER_OVERHEAD_BYTES: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class RegistryClientOptions:
    """What ``HttpSchemaRegistry`` connects with; defaults match ``service.settings.Settings``.

    ``url`` is the registry's base URL (``https://registry:8081``, or a path under which it is
    served), without credentials. ``tls`` is the context an ``https://`` registry is verified with
    (None: the system's CAs). ``timeout_ms`` bounds each exchange with the registry.
    ``max_schema_bytes`` is the largest schema text sent or accepted; ``cache_chars`` the budget
    of each of the client's caches, counted in schema-text characters.
    """

    url: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: ssl.SSLContext | None = field(default=None, repr=False, compare=False)
    timeout_ms: int = 5_000
    max_schema_bytes: int = 1024 * 1024
    cache_chars: int = 64 * 1024 * 1024

    @property
    def max_answer_bytes(self) -> int:
        """The most bytes of one answer read from the registry."""
        return self.max_schema_bytes * _ANSWER_BYTES_PER_SCHEMA_BYTE + _ANSWER_OVERHEAD_BYTES
