"""``Settings``: every group of settings in one pydantic-settings class, built once at start and
passed in.

Every field is settable as ``BROKERGATE_<FIELD>`` (upper case) and, for the common ones, as a
``brokergate serve`` flag. The fields and the validators of each subject are in their module of
this package; here are the env prefix, what is checked across subjects, and what needs fields of
two of them. Nothing reads the environment at import time.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from pydantic import model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .backends import BackendCredentialSettings, KafkaSettings, RedisSettings, ZooKeeperSettings
from .consumers import ConsumerSettings, ShareGroupSettings, StreamSettings
from .deployment import EVERY_INTERFACE, LOOPBACK, DeploymentSettings, StorageSettings
from .limits import LimitSettings, QuotaSettings
from .produce import ProduceSettings
from .push import PushSettings
from .registry import REGISTRY_CLIENT_SETTINGS, RegistrySettings
from .security import AuthenticationSettings, AuthorizationSettings


# The gateway's configuration: the fields of every group, from ``BROKERGATE_*`` or keywords. (No
# docstring: pydantic would make it the description of the settings' JSON schema, which has none.)
# pydantic collects the fields of the bases in reverse order (the last base's first), so the
# groups are listed from the last subject to the first: model_fields, and so the order of the
# errors of a bad configuration (the CLI reports the first), reads from DeploymentSettings down
# to KafkaSettings.
class Settings(
    KafkaSettings,
    ZooKeeperSettings,
    QuotaSettings,
    RedisSettings,
    ProduceSettings,
    RegistrySettings,
    LimitSettings,
    PushSettings,
    AuthorizationSettings,
    BackendCredentialSettings,
    AuthenticationSettings,
    ShareGroupSettings,
    StreamSettings,
    ConsumerSettings,
    StorageSettings,
    DeploymentSettings,
    BaseSettings,
):
    model_config = SettingsConfigDict(env_prefix="BROKERGATE_", extra="ignore")

    # Both checks are here, in this order, so that a configuration failing both reports the
    # registry's first, as it always has.
    @model_validator(mode="after")
    def _registry_client(self) -> Settings:
        """The external registry's client settings fit the URL and one another."""
        given = [name for name in REGISTRY_CLIENT_SETTINGS if getattr(self, name) is not None]
        if self.schema_registry == "embedded":
            if given:
                raise ValueError(
                    f"{', '.join(given)} set, but schema_registry is 'embedded'; they are for an external "
                    "registry's URL"
                )
            return self
        url = urlsplit(self.schema_registry)
        if "@" in url.netloc:  # the URL is shown in messages and logs: the password must not be in it
            raise ValueError(
                "schema_registry: give the credentials in schema_registry_username and "
                "schema_registry_password (or _file), not in the URL"
            )
        try:
            _ = url.port  # parsing it is the check
        except ValueError:
            raise ValueError(f"schema_registry {self.schema_registry!r}: the port is not 1-65535") from None
        if not url.hostname or url.query or url.fragment:
            raise ValueError(
                f"schema_registry {self.schema_registry!r} is not http(s)://host[:port][/path] "
                "(no query, no fragment)"
            )
        tls = [name for name in given if name.startswith("schema_registry_ssl_")]
        if tls and url.scheme != "https":
            raise ValueError(f"{', '.join(tls)} set, but schema_registry is http://; use https://")
        password = self.schema_registry_password is not None or self.schema_registry_password_file is not None
        if self.schema_registry_password is not None and self.schema_registry_password_file is not None:
            raise ValueError("set schema_registry_password or schema_registry_password_file, not both")
        if self.schema_registry_username is not None and not password:
            raise ValueError("schema_registry_username needs schema_registry_password (or _file)")
        if password and self.schema_registry_username is None:
            raise ValueError("schema_registry_password needs schema_registry_username, the user it is of")
        if self.schema_registry_ssl_keyfile is not None and self.schema_registry_ssl_certfile is None:
            raise ValueError(
                "schema_registry_ssl_keyfile is set without schema_registry_ssl_certfile, the certificate "
                "it belongs to"
            )
        if self.schema_registry_ssl_password is not None and self.schema_registry_ssl_certfile is None:
            raise ValueError("schema_registry_ssl_password is set without schema_registry_ssl_certfile")
        return self

    @model_validator(mode="after")
    def _security_combinations(self) -> Settings:
        methods = self.auth_methods
        if self.tls_key is not None and self.tls_cert is None:
            raise ValueError("tls_key is set without tls_cert, the certificate it belongs to")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise ValueError("tls_client_ca needs tls_cert: client certificates are checked only over HTTPS")
        if "mtls" in methods and self.tls_client_ca is None:
            raise ValueError("auth=mtls needs tls_client_ca, the CA that signs the client certificates")
        if "jwt" in methods and self.jwt_issuer is None:
            raise ValueError("auth=jwt needs jwt_issuer (and jwt_jwks_url unless the issuer publishes it)")
        return self

    @property
    def bind_host(self) -> str:
        """The address the gateway listens on: ``host`` when given; else every interface with
        authentication on, and loopback only with it off, as Redis's protected mode keeps a server
        without a password to its own machine: what nobody signs in to, nobody else reaches unless
        the operator says so."""
        if self.host is not None:
            return self.host
        return EVERY_INTERFACE if self.auth_methods else LOOPBACK

    @property
    def users_path(self) -> Path:
        return self.users_file or self.data_dir / "users"
