"""How the Redis adapters sign in: an ACL user or the password, and TLS for ``rediss://``.

``RedisSecurity`` holds the gateway's own ``redis_*`` credential settings; credentials may
instead be in the sessions URL (``redis://user:password@host``), but not in both places, so
which one counts is never a guess. TLS is on exactly when the URL is ``rediss://``: the
server's certificate is checked against ``redis_ssl_cafile`` (else the system's CAs) and so is
its hostname; ``redis_ssl_certfile``/``redis_ssl_keyfile`` present a client certificate to a
Redis with ``tls-auth-clients``.

redis-py builds its TLS context per connection from the file paths, so new connections pick up
a renewed certificate; ``client_options`` loads the files once beforehand all the same, so a
bad path or an undecryptable key stops the start in one line rather than failing every
connection later. Used by ``RedisConnection``, so by the sessions and the quota store alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..tls import client_context

__all__ = ["RedisSecurity"]


@dataclass(frozen=True, slots=True)
class RedisSecurity:
    """The gateway's credentials to Redis beyond the URL; secrets stay out of the repr."""

    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    ssl_key_password: str | None = field(default=None, repr=False)

    def client_options(
        self, *, tls: bool, url_username: str | None, url_password: str | None
    ) -> dict[str, Any]:
        """The keyword arguments of ``redis.asyncio.Redis`` for these credentials and a URL with
        ``url_username``/``url_password`` (``tls``: it is ``rediss://``).

        ``ValueError`` in one line when they do not fit together or a TLS file cannot be loaded.
        """
        if (self.username or self.password) and (url_username or url_password):
            raise ValueError(
                "the sessions URL carries credentials and so do redis_username/redis_password; "
                "give them in one place"
            )
        if self.username and not self.password:
            raise ValueError("redis_username needs redis_password (or redis_password_file)")
        options: dict[str, Any] = {
            "username": url_username or self.username,
            "password": url_password or self.password,
        }
        files = {
            "redis_ssl_cafile": self.ssl_cafile,
            "redis_ssl_certfile": self.ssl_certfile,
            "redis_ssl_keyfile": self.ssl_keyfile,
            "redis_ssl_password": self.ssl_key_password,
        }
        if not tls:
            given = [name for name, value in files.items() if value is not None]
            if given:
                raise ValueError(f"{', '.join(given)} set, but the sessions URL is redis://; use rediss://")
            return options
        client_context(
            cafile=self.ssl_cafile,
            certfile=self.ssl_certfile,
            keyfile=self.ssl_keyfile,
            password=self.ssl_key_password,
            setting="redis_ssl",
        )
        options.update(
            ssl=True,
            ssl_cert_reqs="required",
            ssl_check_hostname=True,
            ssl_ca_certs=_path(self.ssl_cafile),
            ssl_certfile=_path(self.ssl_certfile),
            ssl_keyfile=_path(self.ssl_keyfile),
            ssl_password=self.ssl_key_password,
        )
        return options


def _path(path: Path | None) -> str | None:
    return None if path is None else str(path)
