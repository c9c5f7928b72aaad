"""``ClusterSecurity``: the certificates and credentials of a local cluster run with security on.

A secure cluster serves HTTPS on every hop and lets no one in unauthenticated: each replica
runs ``brokergate serve --tls-cert --tls-key`` with ``AUTH=basic``, ``AUTHORIZE=true``,
``SUPER_USERS=User:admin`` and an ``AUDIT_LOG`` of its own (settings in the environment, so
that a cluster's ``-e`` options can change them, e.g. ``AUTH=basic,jwt``), the balancer
terminates the clients' TLS and opens TLS again to the replicas (verifying them), and the
replicas sign in to ZooKeeper with a digest identity read from a file, as a deployment reads a
mounted Secret.

What it needs is made once per cluster directory, in ``DIR/security``, and kept for the next
``up`` there, so a client configured once keeps working:

- ``ca.pem``: a test CA (trustme), the one certificate clients trust;
- ``server.pem`` / ``server.key``: the certificate for 127.0.0.1 and localhost that every
  replica and the balancer serve, as one Secret mounted in every pod would be;
- ``users``: the HTTP Basic credentials file every replica reads (again within a second when
  it changes), holding the super user ``admin``, whose password is in ``admin.password``;
- ``zookeeper.password``: the replicas' ZooKeeper digest password.

Private files are written with mode 0600.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Self

from service.security.users import add_user, read_users

__all__ = ["SUPER_USER", "ClusterSecurity", "TlsFiles"]

SUPER_USER: Final = "admin"
ZOOKEEPER_USER: Final = "brokergate"
# The name the balancer checks the replicas' certificate for: nginx checks DNS names only.
SERVER_NAME: Final = "localhost"


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """A server certificate (PEM) with its key, and the CA certificate that signed it."""

    cert: Path
    key: Path
    ca: Path


class ClusterSecurity:
    """The files of a secure cluster under ``directory``; ``create()`` makes what is missing."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.tls = TlsFiles(
            cert=self.directory / "server.pem",
            key=self.directory / "server.key",
            ca=self.directory / "ca.pem",
        )
        self.users_file = self.directory / "users"
        self.password_file = self.directory / f"{SUPER_USER}.password"
        self.zookeeper_password_file = self.directory / "zookeeper.password"

    def create(self) -> Self:
        """Issue the certificates and write the credentials, unless an earlier run did."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if not all(path.exists() for path in (self.tls.cert, self.tls.key, self.tls.ca)):
            self._issue_certificates()
        if not self.password_file.exists() or SUPER_USER not in read_users(self.users_file):
            password = secrets.token_urlsafe(18)
            add_user(self.users_file, SUPER_USER, password)
            _write_private(self.password_file, password + "\n")
        if not self.zookeeper_password_file.exists():
            _write_private(self.zookeeper_password_file, secrets.token_hex(24) + "\n")
        return self

    def _issue_certificates(self) -> None:
        try:
            import trustme
        except ImportError:
            raise RuntimeError(
                "a secure cluster needs trustme for its test CA: pip install -e '.[test]'"
            ) from None
        ca = trustme.CA()
        server = ca.issue_cert("127.0.0.1", SERVER_NAME)
        _write_private(self.tls.key, server.private_key_pem.bytes().decode())
        self.tls.cert.write_bytes(b"".join(pem.bytes() for pem in server.cert_chain_pems))
        self.tls.ca.write_bytes(ca.cert_pem.bytes())

    @property
    def admin(self) -> tuple[str, str]:
        """The super user's name and password: HTTP Basic credentials allowed everything."""
        return SUPER_USER, self.password_file.read_text().strip()

    def add_user(self, name: str, password: str) -> None:
        """Add a user (or set its password); every replica knows it within a second."""
        add_user(self.users_file, name, password)

    def replica_env(self, audit_log: Path) -> dict[str, str]:
        """The settings of a replica: who may sign in, ACLs, its audit trail, and its own
        credentials to its backends (ZooKeeper, here), from files."""
        return {
            "BROKERGATE_AUTH": "basic",
            "BROKERGATE_USERS_FILE": str(self.users_file),
            "BROKERGATE_AUTHORIZE": "true",
            "BROKERGATE_SUPER_USERS": f"User:{SUPER_USER}",
            "BROKERGATE_AUDIT_LOG": str(audit_log),
            "BROKERGATE_ZOOKEEPER_USERNAME": ZOOKEEPER_USER,
            "BROKERGATE_ZOOKEEPER_PASSWORD_FILE": str(self.zookeeper_password_file),
        }

    def state(self) -> dict[str, str]:
        """What ``cluster.json`` says about signing in."""
        return {
            "ca": str(self.tls.ca),
            "users_file": str(self.users_file),
            "super_user": f"User:{SUPER_USER}",
            "password_file": str(self.password_file),
        }


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, readable by its owner only from the first byte on."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
