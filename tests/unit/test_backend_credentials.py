"""The gateway's own credentials to ZooKeeper and Redis, and the secret files they may come from.

No server needed: how settings become a digest identity and its znode ACL, redis-py's
options, and the one-line refusals of what cannot work (the servers are in
``tests/integration/{zookeeper,redis}/test_credentials.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trustme
from kazoo.security import ACL, Id, Permissions
from pydantic import SecretStr

from service.adapters.redis import RedisSessions
from service.adapters.redis.connection import RedisURL
from service.adapters.redis.quotas import RedisQuotas
from service.adapters.redis.security import RedisSecurity
from service.adapters.secrets import secret
from service.adapters.zookeeper.security import DigestCredentials
from service.server.backends import (
    BackendNotAvailable,
    build_coordinator,
    build_quota_store,
    build_sessions,
    digest_credentials,
    redis_security,
)
from service.settings import Settings


def test_a_secret_comes_from_the_setting_or_its_file(tmp_path: Path) -> None:
    assert secret(None, None, setting="redis_password") is None
    assert secret(SecretStr("s3cret"), None, setting="redis_password") == "s3cret"
    file = tmp_path / "password"
    file.write_text("from file\r\n")  # the line end an editor leaves is not part of it
    assert secret(None, file, setting="redis_password") == "from file"
    file.write_text("  spaced  ")
    assert secret(None, file, setting="redis_password") == "  spaced  "

    with pytest.raises(ValueError, match="set redis_password or redis_password_file, not both"):
        secret(SecretStr("a"), file, setting="redis_password")
    with pytest.raises(ValueError, match=r"redis_password_file: cannot read '.*none' \(No such file"):
        secret(None, tmp_path / "none", setting="redis_password")
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ValueError, match=r"redis_password_file: .* is empty"):
        secret(None, tmp_path / "empty", setting="redis_password")
    with pytest.raises(ValueError, match="redis_password is empty"):
        secret(SecretStr(""), None, setting="redis_password")


# --- ZooKeeper ------------------------------------------------------------------------


def test_digest_credentials_and_the_acl_of_the_znodes() -> None:
    credentials = DigestCredentials("gateway", "pw")
    assert credentials.auth_data == [("digest", "gateway:pw")]
    # digest ids are "user:base64(sha1(user:password))", as ZooKeeper computes them
    own = ACL(Permissions.ALL, Id("digest", "gateway:rvw8+l8fTOrZbl/TMzPO9uOzsJY="))
    world_read = ACL(Permissions.READ, Id("world", "anyone"))
    assert credentials.acl() == [own, world_read]
    assert DigestCredentials("gateway", "pw", world_readable=False).acl() == [own]
    assert "pw" not in repr(credentials)


@pytest.mark.parametrize(
    ("settings", "needle"),
    [
        ({"zookeeper_username": "gateway"}, "need both zookeeper_username and zookeeper_password"),
        ({"zookeeper_password": "pw"}, "need both zookeeper_username and zookeeper_password"),
        ({"zookeeper_username": "a:b", "zookeeper_password": "pw"}, "without ':'"),
        ({"zookeeper_username": "g", "zookeeper_password": "pw", "zookeeper_password_file": "f"}, "not both"),
    ],
)
def test_zookeeper_credentials_that_cannot_work_stop_the_start(settings: dict[str, str], needle: str) -> None:
    with pytest.raises(BackendNotAvailable, match=needle) as caught:
        build_coordinator(Settings(coordinator="zookeeper://127.0.0.1:2181/x", **settings))  # type: ignore[arg-type]
    assert "\n" not in str(caught.value) and "pw" not in str(caught.value)


def test_settings_give_the_coordinator_its_credentials(tmp_path: Path) -> None:
    (tmp_path / "zk").write_text("from-secret\n")
    settings = Settings(
        coordinator="zookeeper://127.0.0.1:2181/x",
        zookeeper_username="gateway",
        zookeeper_password_file=tmp_path / "zk",
        zookeeper_world_readable=False,
    )
    assert digest_credentials(settings) == DigestCredentials("gateway", "from-secret", world_readable=False)
    assert digest_credentials(Settings()) is None


# --- Redis ----------------------------------------------------------------------------


def test_rediss_urls_are_tls() -> None:
    url = RedisURL.parse("rediss://u:secret@cache.example:6380/2")
    assert url == RedisURL("cache.example", 6380, 2, "u", "secret", tls=True)
    assert str(url) == "rediss://cache.example:6380/2"
    assert "secret" not in repr(url)
    assert not RedisURL.parse("redis://h").tls


def _options(security: RedisSecurity, url: str = "redis://h/0") -> dict[str, object]:
    parsed = RedisURL.parse(url)
    return security.client_options(tls=parsed.tls, url_username=parsed.username, url_password=parsed.password)


def test_redis_credentials_from_the_settings_or_the_url() -> None:
    assert _options(RedisSecurity()) == {"username": None, "password": None}
    assert _options(RedisSecurity(password="pw")) == {"username": None, "password": "pw"}
    assert _options(RedisSecurity(username="alice", password="pw")) == {"username": "alice", "password": "pw"}
    assert _options(RedisSecurity(), "redis://alice:pw@h/0") == {"username": "alice", "password": "pw"}
    with pytest.raises(ValueError, match="carries credentials and so do redis_username/redis_password"):
        _options(RedisSecurity(password="pw"), "redis://:other@h/0")
    with pytest.raises(ValueError, match="redis_username needs redis_password"):
        _options(RedisSecurity(username="alice"))


def test_redis_tls_options(tmp_path: Path) -> None:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    client = ca.issue_cert("gateway")
    client.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "gateway.pem"))
    security = RedisSecurity(
        password="pw", ssl_cafile=tmp_path / "ca.pem", ssl_certfile=tmp_path / "gateway.pem"
    )
    assert _options(security, "rediss://h/0") == {
        "username": None,
        "password": "pw",
        "ssl": True,
        "ssl_cert_reqs": "required",
        "ssl_check_hostname": True,
        "ssl_ca_certs": str(tmp_path / "ca.pem"),
        "ssl_certfile": str(tmp_path / "gateway.pem"),
        "ssl_keyfile": None,
        "ssl_password": None,
    }
    with pytest.raises(
        ValueError,
        match="redis_ssl_cafile, redis_ssl_certfile set, but the sessions URL is redis://; use rediss://",
    ):
        _options(security, "redis://h/0")
    with pytest.raises(ValueError, match="redis_ssl_cafile: cannot load CA certificates"):
        _options(RedisSecurity(ssl_cafile=tmp_path / "gateway.key"), "rediss://h/0")


def test_settings_reach_both_redis_adapters_and_bad_ones_stop_the_start(tmp_path: Path) -> None:
    (tmp_path / "redis-password").write_text("pw\n")
    settings = Settings(
        sessions="rediss://cache.example:6380/0",
        redis_username="alice",
        redis_password_file=tmp_path / "redis-password",
        quota_client_requests_per_s=10,
    )
    sessions = build_sessions(settings)
    assert isinstance(sessions, RedisSessions) and sessions.url == "rediss://cache.example:6380/0"
    assert isinstance(build_quota_store(settings), RedisQuotas)
    assert redis_security(settings) == RedisSecurity(username="alice", password="pw")

    for bad, needle in [
        ({"redis_password_file": tmp_path / "none"}, "redis_password_file: cannot read"),
        ({"redis_password": "x"}, "not both"),
        ({"sessions": "redis://alice:pw@h/0"}, "give them in one place"),
        ({"sessions": "redis://h/0", "redis_ssl_cafile": tmp_path / "ca.pem"}, "use rediss://"),
    ]:
        broken = settings.model_copy(update=bad)
        for build in (build_sessions, build_quota_store):
            with pytest.raises(BackendNotAvailable, match=needle):
                build(broken)
