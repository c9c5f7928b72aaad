"""How the gateway reaches an external schema registry: its URL, credentials, TLS and bounds.

``RegistryClientOptions`` holds the ``schema_registry_*`` client settings (see
``service.settings``, which checks how they combine). ``from_settings`` reads the password file
a setting may name and loads the TLS files (``service.adapters.tls``), the only I/O here, so a
file that cannot be used stops the start with a one-line ``ValueError`` naming the setting,
before anything connects. Secrets stay out of the repr.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from ..secrets import secret
from ..tls import client_context

if TYPE_CHECKING:
    from service.settings import Settings

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

    @classmethod
    def from_settings(cls, settings: Settings) -> RegistryClientOptions:
        """The settings' values; reads ``schema_registry_password_file`` and the TLS files
        (``ValueError`` naming the setting if one cannot be used)."""
        url = settings.schema_registry.rstrip("/")
        tls = None
        if url.startswith("https://"):
            tls = client_context(
                cafile=settings.schema_registry_ssl_cafile,
                certfile=settings.schema_registry_ssl_certfile,
                keyfile=settings.schema_registry_ssl_keyfile,
                password=secret(
                    settings.schema_registry_ssl_password, None, setting="schema_registry_ssl_password"
                ),
                setting="schema_registry_ssl",
            )
        return cls(
            url=url,
            username=settings.schema_registry_username,
            password=secret(
                settings.schema_registry_password,
                settings.schema_registry_password_file,
                setting="schema_registry_password",
            ),
            tls=tls,
            timeout_ms=settings.schema_registry_request_timeout_ms,
            max_schema_bytes=settings.schema_registry_max_schema_bytes,
            cache_chars=settings.schema_registry_cache_bytes,
        )
