"""The client of an external schema registry, without a registry: what answers mean, the caches,
and the settings it is built from (the registry itself is in
``tests/integration/test_external_registry.py``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import ValidationError

from service.adapters.registry.cache import LruCache, SingleFlight
from service.adapters.registry.errors import answer
from service.errors import (
    BackendError,
    BackendUnavailable,
    IncompatibleSchema,
    InvalidSchemaError,
    OperationNotPermitted,
    SchemaNotFound,
    SchemaTooLarge,
    SubjectNotFound,
    VersionNotFound,
)
from service.server.backends import registry_client_options
from service.settings import Settings

URL = "https://registry:8081"


def test_a_successful_answer_is_its_json() -> None:
    assert answer(URL, "GET /schemas/ids/1", 200, b'{"schema": "\\"string\\""}') == {"schema": '"string"'}


@pytest.mark.parametrize(
    ("status", "code", "error"),
    [
        (404, 40401, SubjectNotFound),
        (404, 40402, VersionNotFound),
        (404, 40403, SchemaNotFound),
        (409, 409, IncompatibleSchema),
        (422, 42201, InvalidSchemaError),
        (413, 42201, SchemaTooLarge),
        (422, 42205, OperationNotPermitted),
    ],
)
def test_the_registrys_error_codes_are_its_errors(status: int, code: int, error: type[Exception]) -> None:
    body = b'{"error_code": %d, "message": "what the registry said"}' % code
    with pytest.raises(error, match="what the registry said") as raised:
        answer(URL, "GET /x", status, body)
    assert type(raised.value) is error


@pytest.mark.parametrize(
    ("status", "body", "words"),
    [
        (500, b'{"error_code": 50001, "message": "Error in the backend datastore"}', "HTTP 500: 50001"),
        (502, b"<html><body>Bad Gateway</body></html>", "HTTP 502"),
        (503, b"", "HTTP 503"),
        (401, b'{"error_code": 401, "message": "Unauthorized"}', "refused the gateway's credentials"),
        (403, b"Forbidden", "refused the gateway's credentials"),
        (404, b'{"error_code": 404, "message": "HTTP 404 Not Found"}', "the registry's base URL"),
        (404, b"<html>nginx</html>", "the registry's base URL"),
        (200, b"<html>a web page</html>", "the registry's base URL"),
    ],
)
def test_a_registry_that_fails_or_is_not_one_is_a_503(status: int, body: bytes, words: str) -> None:
    with pytest.raises(BackendUnavailable, match=words) as raised:
        answer(URL, "GET /schemas/ids/1", status, body)
    assert (raised.value.http_status, raised.value.retry_after) == (503, 1.0)
    assert URL in raised.value.message


def test_an_error_the_gateway_does_not_know_is_a_backend_error_in_the_registrys_words() -> None:
    with pytest.raises(BackendError, match="HTTP 400: 400, Unrecognized field"):
        answer(URL, "POST /subjects/s/versions", 400, b'{"error_code": 400, "message": "Unrecognized field"}')


def test_the_lru_cache_keeps_within_its_weight_and_entries() -> None:
    cache: LruCache[int, str] = LruCache(max_weight=10, max_entries=3)
    cache.put(1, "a", 4)
    cache.put(2, "b", 4)
    assert cache.get(1) == "a"  # 1 is now the most recently used
    cache.put(3, "c", 4)  # over the weight: the least recently used (2) goes
    assert (cache.get(1), cache.get(2), cache.get(3)) == ("a", None, "c")
    cache.put(4, "d", 11)  # heavier than the whole budget: not kept
    assert cache.get(4) is None and cache.weight == 8
    for key in (5, 6, 7):
        cache.put(key, "x", 1)
    assert len(cache) == 3 and cache.get(1) is None
    assert LruCache[int, str](max_weight=0, max_entries=10).get(1) is None


async def test_concurrent_calls_for_one_key_share_one_call() -> None:
    flights: SingleFlight[str, int] = SingleFlight()
    calls = 0
    release = asyncio.Event()

    async def call() -> int:
        nonlocal calls
        calls += 1
        await release.wait()
        return calls

    first = asyncio.create_task(flights.run("k", call))
    second = asyncio.create_task(flights.run("k", call))
    await asyncio.sleep(0)
    first.cancel()  # one caller going away does not cancel the call for the other
    release.set()
    assert await second == 1
    assert calls == 1
    assert await flights.run("k", call) == 2  # a later call is a new one


def test_the_client_settings_must_fit_together(tmp_path: Path) -> None:
    external = {"schema_registry": URL}
    for settings, words in [
        ({"schema_registry_username": "gw"}, "schema_registry is 'embedded'"),
        ({"schema_registry": "https://gw:pw@registry"}, "not in the URL"),
        ({"schema_registry": "http://registry", "schema_registry_ssl_cafile": "ca.pem"}, "use https://"),
        ({**external, "schema_registry_username": "gw"}, "needs schema_registry_password"),
        ({**external, "schema_registry_password": "pw"}, "needs schema_registry_username"),
        (
            {**external, "schema_registry_username": "gw", "schema_registry_password": "pw"}
            | {"schema_registry_password_file": tmp_path / "pw"},
            "not both",
        ),
        ({**external, "schema_registry_ssl_keyfile": "key.pem"}, "without schema_registry_ssl_certfile"),
        ({"schema_registry": "https://registry:0x1"}, "port"),
        ({"schema_registry": "https://registry/?a=b"}, "no query"),
    ]:
        with pytest.raises(ValidationError, match=words) as refused:
            Settings(**settings)  # type: ignore[arg-type]
        assert "pw@" not in refused.value.errors()[0]["msg"]  # what the command shows


def test_options_read_the_password_file_and_keep_secrets_out_of_the_repr(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("s3cret\n")
    settings = Settings(
        schema_registry=URL + "/",
        schema_registry_username="gw",
        schema_registry_password_file=tmp_path / "pw",
        schema_registry_request_timeout_ms=750,
    )
    options = registry_client_options(settings)
    assert (options.url, options.username, options.password, options.timeout_ms) == (URL, "gw", "s3cret", 750)
    assert options.tls is not None  # https: the system's CAs, the hostname checked
    assert "s3cret" not in repr(options)
    with pytest.raises(ValueError, match="schema_registry_ssl_cafile: cannot load CA certificates"):
        registry_client_options(Settings(schema_registry=URL, schema_registry_ssl_cafile=tmp_path / "no"))
