"""What authenticated a stream's client, and the error a stream ends with once it no longer would.

A stream outlives the request that opened it, so the credential of that request is kept
(``Credential``, made by the authentication middleware: Basic, a token, a certificate) and asked
before everything the stream does (``streams.Stream.decide``); the answer ``CredentialLapsed``
is what a request with it would get, 401 with 40101.
"""

from __future__ import annotations

from typing import Protocol

from service.errors import ErrorCode, GatewayError

__all__ = ["Credential", "CredentialLapsed"]


class Credential(Protocol):
    """What authenticated a stream's client, asked before every poll, commit, seek and produce
    whether it still would (a user still in the users file with the same password, a token not
    expired whose key the provider still lists, a certificate not expired)."""

    @property
    def principal(self) -> str: ...

    async def still_valid(self) -> bool: ...


class CredentialLapsed(GatewayError):
    """The credential a stream was opened with no longer holds: the stream ends (401, 40101)."""

    http_status = 401
    error_code = ErrorCode.UNAUTHORIZED
    default_message = (
        "The credentials this stream was opened with are no longer valid (the user was removed or its "
        "password changed, the token expired or its key was withdrawn, the certificate expired); "
        "reconnect with valid ones to go on from the stream's last position."
    )
