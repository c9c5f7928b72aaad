"""TLS client contexts for the gateway's connections to its backends (Kafka brokers, Redis).

``client_context`` builds the one ``ssl.SSLContext`` an adapter connects with: the server's
certificate is checked against the configured CA file (else the system's CAs) and its hostname
is checked, always; a client certificate is presented when one is configured (mutual TLS).
Every problem with the files is a one-line ``ValueError`` naming the setting at fault, raised
when the adapter is built, so a typo in a path stops the start instead of surfacing as a failed
handshake much later. An encrypted key never makes OpenSSL prompt on the terminal: without a
password it fails like a wrong one. ``failure_reason`` words a failed handshake for messages.
"""

from __future__ import annotations

import ssl
from pathlib import Path

__all__ = ["client_context", "failure_reason"]


def client_context(
    *,
    cafile: Path | None,
    certfile: Path | None,
    keyfile: Path | None,
    password: str | None,
    setting: str,
) -> ssl.SSLContext:
    """A context that verifies the server and, with ``certfile``, presents a client certificate.

    ``setting`` is the prefix of the settings the files come from (``kafka_ssl``), for messages:
    ``<setting>_cafile``, ``_certfile``, ``_keyfile`` and ``_password``. ``keyfile`` may be left
    out when ``certfile`` holds the key too.
    """
    if keyfile is not None and certfile is None:
        raise ValueError(
            f"{setting}_keyfile is set without {setting}_certfile, the certificate it belongs to"
        )
    if password is not None and keyfile is None and certfile is None:
        raise ValueError(f"{setting}_password is set without a key ({setting}_certfile, {setting}_keyfile)")
    try:
        # CERT_REQUIRED and check_hostname are the defaults of a SERVER_AUTH context
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=cafile)
    except OSError as exc:  # FileNotFoundError, ssl.SSLError (no certificate in it)
        raise ValueError(
            f"{setting}_cafile: cannot load CA certificates from {str(cafile)!r} ({_reason(exc)})"
        ) from None
    if certfile is not None:
        try:
            # A callable, never None: with None OpenSSL would ask for an encrypted key's password
            # on the terminal, which a server has not got.
            context.load_cert_chain(certfile, keyfile, password=lambda: password or "")
        except OSError as exc:  # FileNotFoundError, PermissionError, ssl.SSLError
            named = f"{str(certfile)!r}" + (f" and {str(keyfile)!r}" if keyfile else "")
            raise ValueError(
                f"{setting}_certfile: cannot load the client certificate and key from {named} "
                f"({_reason(exc)})"
            ) from None
    return context


def failure_reason(exc: ssl.SSLError) -> str:
    """What went wrong in a TLS handshake, in OpenSSL's words: the certificate check's own
    message (``unable to get local issuer certificate``), else its reason code spelt out
    (``tlsv13 alert certificate required``)."""
    message, reason = getattr(exc, "verify_message", None), getattr(exc, "reason", None)
    if message:
        return str(message)
    return str(reason).replace("_", " ").lower() if reason else type(exc).__name__


def _reason(exc: OSError) -> str:
    if isinstance(exc, ssl.SSLError):
        if getattr(exc, "reason", None) is None:  # OpenSSL's "PEM lib": it found no PEM it could decode
            return "not PEM, or an encrypted key the configured password does not open"
        return str(exc.reason).replace("_", " ").lower()
    return exc.strerror or type(exc).__name__
