"""How clients sign in to the gateway and what they may do there.

Authentication: the methods (HTTP Basic against the users file, Bearer JWTs of an OpenID Connect
provider, client certificates over TLS), the password-guess budgets, the endpoints open to anyone
(docs, metrics), the web console, and the TLS the gateway serves. Authorization: the ACL bindings
switch, the super users, and the audit trail and process log that record the decisions.
``service.security`` and ``service.server`` build the authenticators, the authorizer, the TLS
context and the logs from them; how the TLS and authentication settings combine is checked by
``model.Settings``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator

from .group import SettingsGroup

AUTH_METHODS = frozenset({"basic", "jwt", "mtls"})


class AuthenticationSettings(SettingsGroup):
    """Authentication methods, password guesses, open endpoints, the console, HTTPS, and JWTs."""

    # authentication
    auth: str = Field(
        "",
        description="Authentication methods a client may use, comma-separated: basic, jwt, mtls "
        "(empty: off, every request is anonymous).",
    )
    users_file: Path | None = Field(
        None, description="HTTP Basic credentials file (brokergate users); default: <data_dir>/users."
    )
    docs_open: bool = Field(True, description="With auth on: /docs and /openapi.json need no credentials.")
    metrics_open: bool = Field(False, description="With auth on: /metrics answers without credentials.")
    password_guesses_per_address: int = Field(
        20,
        ge=1,
        description="HTTP Basic: wrong passwords one client address may send in a burst before it is "
        "answered 429 (42901) until its budget refills.",
    )
    password_guesses_per_user: int = Field(
        10,
        ge=1,
        description="HTTP Basic: wrong passwords for one user name (known or not) in a burst, from "
        "addresses the user has not signed in from, before they are answered 429.",
    )
    password_guess_refill_s: float = Field(
        6.0,
        gt=0,
        le=3600,
        description="Each guess budget gets one wrong password back per this many seconds.",
    )

    # the web console at /ui: a client of the public API, so it grants nothing the API does not
    ui: bool = Field(
        True, description="Serve the web console at /ui (with auth on, it needs credentials too)."
    )
    ui_read_only: bool = Field(
        False,
        description="The console hides creating and deleting topics and producing; the API itself is "
        "governed by the ACLs.",
    )

    # TLS between clients and the gateway
    tls_cert: Path | None = Field(
        None, description="Certificate chain (PEM) to serve HTTPS with; may hold its key."
    )
    tls_key: Path | None = Field(None, description="The key (PEM) of tls_cert, if apart.")
    tls_key_password: SecretStr | None = Field(None, description="The password of an encrypted tls_key.")
    tls_client_ca: Path | None = Field(
        None,
        description="CA certificates (PEM) client certificates are verified against (mutual TLS); "
        "required of every client unless auth offers mtls beside another method.",
    )
    tls_principal: Literal["cn", "dns", "email", "uri"] = Field(
        "cn",
        description="With auth=mtls: the certificate's name that is the principal: the subject's CN, "
        "or the first DNS name, e-mail address or URI among its subject alternative names.",
    )

    # Bearer JWTs of an OpenID Connect provider (auth=jwt)
    jwt_issuer: str | None = Field(None, description="The provider's issuer URL; tokens must carry it (iss).")
    jwt_audience: str | None = Field(None, description="The audience (aud) tokens must be meant for.")
    jwt_jwks_url: str | None = Field(
        None,
        description="Where the signing keys are; default: the jwks_uri of "
        "<issuer>/.well-known/openid-configuration.",
    )
    jwt_algorithms: str = Field(
        "RS256,ES256", description="Signature algorithms accepted, comma-separated (asymmetric only)."
    )
    jwt_leeway_s: float = Field(30, ge=0, le=600, description="Clock skew allowed on exp and nbf.")
    jwt_principal_claim: str = Field("sub", min_length=1, description="The claim naming the principal.")
    jwt_cafile: Path | None = Field(
        None, description="CA certificates (PEM) to verify the provider's HTTPS with (default: the system's)."
    )

    @field_validator("auth")
    @classmethod
    def _auth_methods(cls, v: str) -> str:
        unknown = set(cls.split(v)) - AUTH_METHODS
        if unknown:
            raise ValueError(f"unknown auth method(s) {sorted(unknown)}; known: {sorted(AUTH_METHODS)}")
        return v

    @field_validator("jwt_algorithms")
    @classmethod
    def _jwt_algorithms(cls, v: str) -> str:
        from ..security.tokens import ASYMMETRIC

        algorithms = cls.split(v)
        if not algorithms or not set(algorithms) <= ASYMMETRIC:
            raise ValueError(f"jwt_algorithms must be some of {sorted(ASYMMETRIC)}")
        return v

    @field_validator("jwt_issuer", "jwt_jwks_url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("https://", "http://")):
            raise ValueError("must be an http(s):// URL")
        return v

    @property
    def client_cert_required(self) -> bool:
        """Whether the TLS handshake demands a client certificate: always, unless a client may
        authenticate another way."""
        methods = self.auth_methods
        return not ("mtls" in methods and len(methods) > 1)

    @property
    def auth_methods(self) -> frozenset[str]:
        return frozenset(self.split(self.auth))


class AuthorizationSettings(SettingsGroup):
    """ACLs on or off, the super users, where the audit trail goes, and how much the process log takes."""

    # authorization
    authorize: bool = Field(
        False,
        description="Decide every request by the ACL bindings, Kafka's model: denied unless a binding "
        "allows it (brokergate acls; /v3/clusters/{id}/acls).",
    )
    super_users: str = Field(
        "",
        description="Principals allowed everything, whatever the bindings, e.g. User:admin "
        "(separated by ';' as Kafka's super.users, or ',').",
    )
    audit_log: Path | None = Field(
        None,
        description="File the audit trail is appended to, one JSON line per security decision; "
        "default: the process's log (logger brokergate.audit).",
    )
    log_lines_per_s: int = Field(
        100,
        ge=1,
        description="Most lines the process log takes a second (the audit trail apart); the rest are "
        "counted and the count logged (log.suppressed) once the second is over.",
    )
    log_traceback_bytes: int = Field(
        8 * 1024,
        ge=512,
        description="Longest traceback the process log takes (its start and end kept); one error site's "
        "traceback is written once a minute, its repeats in one line.",
    )

    @property
    def super_user_names(self) -> frozenset[str]:
        return frozenset(self.split(self.super_users.replace(";", ",")))
