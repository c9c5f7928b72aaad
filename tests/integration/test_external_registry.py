"""An external schema registry: the gateway's ``HttpSchemaRegistry`` against a real one, over HTTP(S).

The external registry is a second brokergate gateway: its embedded registry, served on a free
loopback port by uvicorn in this process (``start_gateway``), or as a ``brokergate serve``
process (``GatewayProcess``) where a test stops or freezes it. Nothing is mocked: every answer
comes over a real connection, TLS handshakes and HTTP Basic sign-ins included.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme

from deploy.local.process import free_port
from service.adapters.registry import HttpSchemaRegistry
from service.core.schemas.model import Schema, SchemaReference, SchemaType
from service.errors import (
    BackendUnavailable,
    IncompatibleSchema,
    InvalidSchemaError,
    InvalidSubject,
    SchemaNotFound,
    SubjectNotFound,
    VersionNotFound,
)
from service.security.users import add_user
from service.server.app import create_app
from service.server.backends import registry_client_options
from service.settings import Settings
from tests.conftest import RunningGateway, start_gateway
from tests.e2e.gateway_process import GatewayProcess
from tests.helpers import serve_until_exit

SR = "/schema-registry"
V1 = "application/vnd.schemaregistry.v1+json"


def record(name: str, *fields: dict[str, Any], namespace: str | None = None) -> str:
    """An Avro record's schema as a registry stores and answers it (Avro's compact print)."""
    out: dict[str, Any] = {"type": "record", "name": name}
    if namespace:
        out["namespace"] = namespace
    out["fields"] = list(fields)
    return json.dumps(out, separators=(",", ":"))


def field(name: str, kind: Any = "string", **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, **extra}


def avro(text: str, *references: SchemaReference) -> Schema:
    return Schema(SchemaType.AVRO, text, references)


V_A = avro(record("Order", field("id")))
V_AB = avro(record("Order", field("id"), field("qty", "int", default=0)))  # adds a field with a default
V_C = avro(record("Order", field("id"), field("note")))  # adds one without: not BACKWARD of V_A
CUSTOMER = avro(record("Customer", field("name"), namespace="shop"))
ORDER = avro(
    record("Order", field("buyer", "shop.Customer"), namespace="shop"),
    SchemaReference("shop.Customer", "customer", 1),
)
MONEY = Schema(SchemaType.PROTOBUF, 'syntax = "proto3";\npackage shop;\nmessage Money { int64 cents = 1; }\n')
PRICE = Schema(
    SchemaType.PROTOBUF,
    'syntax = "proto3";\npackage shop;\nimport "money.proto";\nmessage Price { shop.Money amount = 1; }\n',
    (SchemaReference("money.proto", "money", 1),),
)


@asynccontextmanager
async def resolver(url: str, **settings: Any) -> AsyncIterator[HttpSchemaRegistry]:
    """The gateway's client of the registry at ``url``, built from settings as the gateway builds it."""
    options = registry_client_options(Settings(schema_registry=url, **settings))
    client = HttpSchemaRegistry(options)
    await client.start()
    try:
        yield client
    finally:
        await client.stop()


@pytest.fixture
async def registry() -> AsyncIterator[list[RunningGateway]]:
    """Gateways a test starts (the first is usually its registry); stopped after it."""
    started: list[RunningGateway] = []
    yield started
    for gw in reversed(started):
        await gw.client.aclose()
        await gw.stop()


@pytest.fixture
async def external(tmp_path: Path, registry: list[RunningGateway]) -> RunningGateway:
    """A plain registry: a gateway with its embedded registry, over HTTP."""
    gw = await start_gateway(tmp_path / "registry")
    registry.append(gw)
    return gw


@pytest.fixture
def tls_files(tmp_path: Path) -> dict[str, Path]:
    """A CA, the registry's certificate for 127.0.0.1, and a client certificate of another CA."""
    server_ca, client_ca = trustme.CA(), trustme.CA()
    paths = {name: tmp_path / f"{name}.pem" for name in ("ca", "cert", "client_ca", "client")}
    server_ca.cert_pem.write_to_path(str(paths["ca"]))
    server_ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(paths["cert"]))
    client_ca.cert_pem.write_to_path(str(paths["client_ca"]))
    client = client_ca.issue_cert("gateway@example.com", common_name="gateway")
    client.private_key_and_cert_chain_pem.write_to_path(str(paths["client"]))
    return paths


async def requests_served(gw: RunningGateway, method: str, route: str) -> float:
    """How many requests of ``route`` the registry gateway answered, by its own metrics."""
    text = (await gw.client.get("/metrics")).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("brokergate_http_requests_total{") and f'route="{route}"' in line:
            if f'method="{method}"' in line:
                total += float(line.rsplit(" ", 1)[1])
    return total


# --- what producing and consuming ask of a registry ------------------------------------------


async def test_register_lookup_and_read_back_through_a_real_registry(external: RunningGateway) -> None:
    async with resolver(external.url + SR) as sr:
        assert await sr.lookup("orders-value", V_A) is None  # no such subject yet
        assert await sr.register("orders-value", V_A) == (1, 1)
        assert await sr.register("orders-value", V_A) == (1, 1)  # registered already: the same
        assert await sr.lookup("orders-value", V_AB) is None  # the subject, but not this schema
        assert await sr.register("orders-value", V_AB) == (2, 2)
        assert await sr.lookup("orders-value", V_AB) == 2
        # the registry holds them: its own API says so
        assert (await external.client.get(f"{SR}/subjects/orders-value/versions")).json() == [1, 2]

        parsed = await sr.schema_by_id(1)
        assert parsed.schema == V_A
        codec = parsed.codec()
        assert codec.decode(codec.encode({"id": "o-1"})) == {"id": "o-1"}
        schema_id, version, latest = await sr.version("orders-value", "latest")
        assert (schema_id, version, latest.schema) == (2, 2, V_AB)
        assert (await sr.version("orders-value", 1))[:2] == (1, 1)

        # other formats, and a subject that is no plain path segment
        document = Schema(SchemaType.JSON, '{"type":"object","properties":{"n":{"type":"integer"}}}')
        subject = "odd subject?#%&+ü-value"
        assert await sr.register(subject, document) == (3, 1)
        assert subject in (await external.client.get(f"{SR}/subjects")).json()
        assert (await sr.version(subject, 1))[2].schema == document


async def test_references_are_fetched_from_the_registry_and_resolved(external: RunningGateway) -> None:
    async with resolver(external.url + SR) as sr:
        await sr.register("customer", CUSTOMER)
        order_id, _ = await sr.register("order-value", ORDER)
        await sr.register("money", MONEY)
        price_id, _ = await sr.register("price-value", PRICE)
    async with resolver(external.url + SR) as sr:  # a new client: nothing known yet
        order = await sr.schema_by_id(order_id)
        assert order.schema.references == ORDER.references
        value = {"buyer": {"name": "Ann"}}
        assert order.codec().decode(order.codec().encode(value)) == value
        price = await sr.schema_by_id(price_id)
        # the .proto as the registry answers it: Confluent's canonical print, not the text sent
        assert 'import "money.proto";' in price.schema.text and "shop.Money amount = 1;" in price.schema.text
        assert price.codec().decode(price.codec().encode({"amount": {"cents": "250"}})) == {
            "amount": {"cents": "250"}
        }


async def test_the_registrys_errors_are_the_registry_errors(external: RunningGateway) -> None:
    async with resolver(external.url + SR) as sr:
        with pytest.raises(SchemaNotFound):
            await sr.schema_by_id(4242)
        with pytest.raises(SubjectNotFound):
            await sr.version("nobody-value", "latest")
        await sr.register("orders-value", V_A)
        with pytest.raises(VersionNotFound):
            await sr.version("orders-value", 7)
        with pytest.raises(IncompatibleSchema, match="incompatible") as incompatible:
            await sr.register("orders-value", V_C)
        assert (incompatible.value.http_status, incompatible.value.error_code) == (409, 409)
        with pytest.raises(InvalidSchemaError) as invalid:
            await sr.register("orders-value", avro('{"type": "no-such-type"}'))
        assert invalid.value.error_code == 42201
        with pytest.raises(InvalidSubject):  # refused before the registry is asked
            await sr.register("__GLOBAL", V_A)
    # a URL that is not the registry's (its gateway's root): said so, as a 503
    async with resolver(external.url) as sr:
        with pytest.raises(BackendUnavailable, match="is schema_registry the registry's base URL"):
            await sr.schema_by_id(1)


# --- signing in, TLS ---------------------------------------------------------------------------


async def test_basic_credentials_over_tls_with_a_ca_file(
    tmp_path: Path, tls_files: dict[str, Path], registry: list[RunningGateway]
) -> None:
    users = tmp_path / "users"
    add_user(users, "gateway", "s3cret")
    gw = await start_gateway(
        tmp_path / "registry",
        tls_cert=tls_files["cert"],
        auth="basic",
        users_file=users,
        verify=ssl.create_default_context(cafile=str(tls_files["ca"])),
    )
    registry.append(gw)
    url = gw.url + SR
    assert url.startswith("https://")
    password_file = tmp_path / "registry-password"
    password_file.write_text("s3cret\n")
    signed_in = {"schema_registry_username": "gateway", "schema_registry_ssl_cafile": tls_files["ca"]}
    async with resolver(url, schema_registry_password_file=password_file, **signed_in) as sr:
        assert await sr.register("orders-value", V_A) == (1, 1)
        assert (await sr.schema_by_id(1)).schema == V_A

    async with resolver(url, schema_registry_password="wrong", **signed_in) as sr:
        with pytest.raises(BackendUnavailable, match="refused the gateway's credentials") as refused:
            await sr.schema_by_id(1)
        assert refused.value.http_status == 503
        assert "wrong" not in refused.value.message

    # the system's CAs do not know the test CA
    async with resolver(url, schema_registry_username="gateway", schema_registry_password="s3cret") as sr:
        with pytest.raises(BackendUnavailable, match="failed the TLS handshake"):
            await sr.schema_by_id(1)


async def test_a_client_certificate_for_a_registry_with_mutual_tls(
    tmp_path: Path, tls_files: dict[str, Path], registry: list[RunningGateway]
) -> None:
    gw = await start_gateway(
        tmp_path / "registry",
        tls_cert=tls_files["cert"],
        tls_client_ca=tls_files["client_ca"],
        auth="mtls",
        verify=ssl.create_default_context(cafile=str(tls_files["ca"])),
    )
    registry.append(gw)
    url = gw.url + SR
    with_ca = {"schema_registry_ssl_cafile": tls_files["ca"]}
    async with resolver(url, schema_registry_ssl_certfile=tls_files["client"], **with_ca) as sr:
        assert await sr.register("orders-value", V_A) == (1, 1)
    async with resolver(url, **with_ca) as sr:  # no certificate: no connection
        with pytest.raises(BackendUnavailable):
            await sr.schema_by_id(1)


def test_registry_files_that_cannot_be_used_stop_the_start_in_one_line(tmp_path: Path) -> None:
    url = f"https://127.0.0.1:{free_port()}{SR}"
    for extra, message in [
        (
            {"BROKERGATE_SCHEMA_REGISTRY_SSL_CAFILE": str(tmp_path / "missing-ca.pem")},
            "schema_registry_ssl_cafile: cannot load CA certificates",
        ),
        (
            {
                "BROKERGATE_SCHEMA_REGISTRY_USERNAME": "gateway",
                "BROKERGATE_SCHEMA_REGISTRY_PASSWORD_FILE": str(tmp_path / "missing-password"),
            },
            "schema_registry_password_file: cannot read",
        ),
    ]:
        result = serve_until_exit(tmp_path, {"BROKERGATE_SCHEMA_REGISTRY": url, **extra})
        assert result.returncode != 0
        assert f"brokergate: cannot start: {message}" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


# --- a registry that is away -------------------------------------------------------------------


async def test_a_registry_that_is_down_or_silent_is_a_503_within_the_timeout(tmp_path: Path) -> None:
    async with resolver(f"http://127.0.0.1:{free_port()}{SR}") as sr:
        with pytest.raises(BackendUnavailable, match="Cannot reach the schema registry") as down:
            await sr.schema_by_id(1)
        assert (down.value.http_status, down.value.retry_after) == (503, 1.0)

    silent = GatewayProcess(tmp_path / "registry").start()
    try:
        silent.pause()  # it holds its port, and answers nothing
        async with resolver(silent.url + SR, schema_registry_request_timeout_ms=300) as sr:
            started = time.monotonic()
            with pytest.raises(BackendUnavailable, match="did not answer within 300 ms"):
                await sr.schema_by_id(1)
            assert time.monotonic() - started < 3  # the setting's 300 ms, not the default 5 s
    finally:
        silent.resume()
        silent.stop()


async def test_known_schemas_are_answered_while_the_registry_is_gone(tmp_path: Path) -> None:
    process = GatewayProcess(tmp_path / "registry").start()
    try:
        async with resolver(process.url + SR) as sr:
            schema_id, version = await sr.register("orders-value", V_A)
            assert await sr.lookup("orders-value", V_A) == schema_id
            parsed = await sr.schema_by_id(schema_id)
            process.stop()
            assert await sr.schema_by_id(schema_id) is parsed
            assert await sr.register("orders-value", V_A) == (schema_id, version)
            assert await sr.lookup("orders-value", V_A) == schema_id
            with pytest.raises(BackendUnavailable):  # not known yet: the registry must be asked
                await sr.schema_by_id(schema_id + 1)
            with pytest.raises(BackendUnavailable):  # "latest" is asked each time
                await sr.version("orders-value", "latest")
    finally:
        process.stop()


async def test_concurrent_requests_for_a_new_schema_ask_the_registry_once(external: RunningGateway) -> None:
    async with resolver(external.url + SR) as writer:
        schema_id, _ = await writer.register("orders-value", V_A)
    route = f"{SR}/schemas/ids/{{id}}"
    before = await requests_served(external, "GET", route)
    async with resolver(external.url + SR) as sr:
        parsed = await asyncio.gather(*(sr.schema_by_id(schema_id) for _ in range(20)))
        assert all(p is parsed[0] for p in parsed)
        await sr.schema_by_id(schema_id)
    assert await requests_served(external, "GET", route) == before + 1


# --- the gateway with an external registry -----------------------------------------------------


async def test_a_gateway_with_an_external_registry_sends_registry_clients_there(
    tmp_path: Path, external: RunningGateway, registry: list[RunningGateway]
) -> None:
    gw = await start_gateway(tmp_path / "gateway", schema_registry=external.url + SR)
    registry.append(gw)
    for method, path, body in [
        ("GET", "/", None),
        ("GET", "/schemas/types", None),
        ("GET", "/subjects", None),
        ("POST", "/subjects/orders-value/versions", {"schema": V_A.text}),
        ("GET", "/schemas/ids/1", None),
        ("PUT", "/config", {"compatibility": "NONE"}),
    ]:
        r = await gw.client.request(method, SR + path, json=body)
        assert (r.status_code, r.json()["error_code"]) == (404, 404), r.text
        assert "uses an external schema registry" in r.json()["message"]
        assert r.headers["content-type"] == V1
    assert (await external.client.get(f"{SR}/subjects")).json() == []  # nothing was forwarded
    assert (await gw.client.get("/topics")).status_code == 200  # the rest of the gateway works


async def test_the_lifespan_starts_and_stops_the_client_of_the_external_registry(
    tmp_path: Path, external: RunningGateway
) -> None:
    app = create_app(Settings(data_dir=tmp_path / "gateway", schema_registry=external.url + SR))
    async with app.router.lifespan_context(app):
        gateway = app.state.gateway
        assert gateway.registry is None
        assert isinstance(gateway.schemas, HttpSchemaRegistry)
        assert await gateway.schemas.register("orders-value", V_A) == (1, 1)
        schemas = gateway.schemas
    with pytest.raises(BackendUnavailable, match="not running"):
        await schemas.schema_by_id(2)


def test_a_gateway_starts_while_its_external_registry_is_down(tmp_path: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}{SR}"
    gw = GatewayProcess(
        tmp_path / "gateway",
        env={"BROKERGATE_SCHEMA_REGISTRY": down, "BROKERGATE_SCHEMA_REGISTRY_REQUEST_TIMEOUT_MS": "500"},
    ).start()  # returns once /readyz answers 200
    try:
        assert httpx.get(f"{gw.url}/topics").status_code == 200
        r = httpx.get(f"{gw.url}{SR}/subjects")
        assert (r.status_code, r.json()["error_code"]) == (404, 404)
        deadline = time.monotonic() + 10
        while "Cannot reach the schema registry" not in gw.output() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert f"Cannot reach the schema registry at {down}" in gw.output()  # said in the log
    finally:
        gw.stop()


async def test_records_are_produced_and_consumed_with_the_external_registrys_schemas(
    tmp_path: Path, external: RunningGateway, registry: list[RunningGateway]
) -> None:
    """An inline schema is registered in the external registry; ids are the external registry's;
    a consumer decodes with what it fetches from there."""
    gw = await start_gateway(tmp_path / "gateway", schema_registry=external.url + SR)
    registry.append(gw)
    avro_type = "application/vnd.kafka.avro.v2+json"
    # an id the external registry handed out before: not 1, so a mix-up with a local id would show
    await external.client.post(f"{SR}/subjects/other-value/versions", json={"schema": '"string"'})
    body = {"value_schema": V_A.text, "records": [{"value": {"id": "o-1"}}]}
    r = await gw.client.post("/topics/orders", json=body, headers={"Content-Type": avro_type})
    assert r.status_code == 200, r.text
    schema_id = r.json()["value_schema_id"]
    latest = (await external.client.get(f"{SR}/subjects/orders-value/versions/latest")).json()
    assert latest["id"] == schema_id == 2
    r = await gw.client.post(
        "/consumers/readers",
        json={"format": "avro", "auto.offset.reset": "earliest"},
        headers={"Content-Type": "application/vnd.kafka.v2+json"},
    )
    base = r.json()["base_uri"]
    r = await gw.client.post(
        f"{base}/subscription",
        json={"topics": ["orders"]},
        headers={"Content-Type": "application/vnd.kafka.v2+json"},
    )
    assert r.status_code == 204, r.text
    values: list[Any] = []
    for _ in range(20):
        r = await gw.client.get(f"{base}/records", params={"timeout": 500}, headers={"Accept": avro_type})
        assert r.status_code == 200, r.text
        values += [record["value"] for record in r.json()]
        if values:
            break
    assert values == [{"id": "o-1"}]
