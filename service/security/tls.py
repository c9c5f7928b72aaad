"""TLS for clients of the gateway: the server's context, and who a client certificate names.

``server_context`` is the context ``brokergate serve --tls-cert --tls-key`` listens with:
TLS 1.2 or newer, the certificate chain and key of the settings, and with ``--tls-client-ca``
client certificates verified against that CA (mutual TLS). A client certificate is *required*
unless ``mtls`` is one of several authentication methods, where a client without one may still
use another (Basic or a Bearer token); with ``--tls-client-ca`` and no ``mtls`` in ``AUTH``,
the certificate only opens the connection and names no one.

``PeerCertificate`` is what a verified client certificate says, read once per connection (not
per request): the subject's common name and the subject alternative names. Its ``principal``
is ``User:<name>`` with the name taken from where ``TLS_PRINCIPAL`` says: the subject CN
(the default), or the first DNS name, e-mail address or URI among the SANs.

Every problem with the files is a one-line ``ValueError`` naming the setting, raised before
anything listens.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

PrincipalSource = Literal["cn", "dns", "email", "uri"]
_SAN_TYPES: Final = {"dns": "DNS", "email": "email", "uri": "URI"}


def server_context(
    *,
    certfile: Path,
    keyfile: Path | None,
    password: str | None,
    client_ca: Path | None,
    client_cert_required: bool,
) -> ssl.SSLContext:
    """The context to serve with; ``ValueError`` naming the setting if a file cannot be used."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        # A callable, never None: with None OpenSSL would prompt on the terminal for the password.
        context.load_cert_chain(certfile, keyfile, password=lambda: password or "")
    except OSError as exc:
        named = repr(str(certfile)) + (f" and {str(keyfile)!r}" if keyfile else "")
        raise ValueError(
            f"tls_cert: cannot load the certificate and key from {named} ({_reason(exc)})"
        ) from None
    if client_ca is not None:
        try:
            context.load_verify_locations(cafile=client_ca)
        except OSError as exc:
            raise ValueError(
                f"tls_client_ca: cannot load CA certificates from {str(client_ca)!r} ({_reason(exc)})"
            ) from None
        context.verify_mode = ssl.CERT_REQUIRED if client_cert_required else ssl.CERT_OPTIONAL
    return context


@dataclass(frozen=True, slots=True)
class PeerCertificate:
    """A verified client certificate's names."""

    common_name: str | None
    alt_names: tuple[tuple[str, str], ...]  # (type, value): ("DNS", "a.example"), ("email", …), ("URI", …)
    not_after: float | None = None  # when it expires, seconds since the epoch

    @classmethod
    def of(cls, ssl_object: Any) -> PeerCertificate | None:
        """The names of the certificate the client presented and the context verified, if any.

        ``getpeercert()`` gives the decoded certificate only once verification succeeded, so an
        unverified certificate names no one."""
        if ssl_object is None:
            return None
        cert = ssl_object.getpeercert()
        if not cert:
            return None
        common_name = None
        for rdn in cert.get("subject", ()):
            for key, value in rdn:
                if key == "commonName":
                    common_name = value  # the last CN is the most specific, as Kafka reads it
        expires = cert.get("notAfter")
        not_after = ssl.cert_time_to_seconds(expires) if isinstance(expires, str) else None
        return cls(common_name, tuple(cert.get("subjectAltName", ())), not_after)

    def principal(self, source: PrincipalSource) -> str | None:
        """``User:<name>`` by ``source``, or None if the certificate has no such name."""
        if source == "cn":
            name = self.common_name
        else:
            name = next((v for t, v in self.alt_names if t == _SAN_TYPES[source]), None)
        return f"User:{name}" if name else None


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or getattr(exc, "reason", None) or exc)
