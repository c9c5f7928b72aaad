"""The produce fast path answers exactly as the FastAPI routes behind it.

The same requests go to two gateways on the embedded log, one as built and one
with the fast path turned off, and every answer (status, body, the headers a
client reads) and the metrics label must match.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import APIRouter, Depends, Query, Request

from service.api import fastpath, topics
from service.api.topics import serve_produce
from service.server.app import create_app
from service.settings import Settings
from tests.conftest import RunningGateway, start_gateway
from tests.helpers import BINARY, JSON, STRING, V2, b64

HEADERS_READ = ("content-type", "retry-after", "idempotency-replayed")

# (path, content type, body, extra headers): successes and every kind of refusal.
REQUESTS: list[tuple[str, str, bytes, dict[str, str]]] = [
    ("/topics/t", BINARY, b'{"records":[{"value":"%s","partition":0}]}' % b64("a").encode(), {}),
    ("/topics/t", BINARY, b'{"records":[{"key":"%s","value":null}]}' % b64("k").encode(), {}),
    ("/topics/t", JSON, b'{"records":[{"value":{"x":[1,2]},"partition":1}]}', {}),
    ("/topics/t", STRING, b'{"records":[{"key":"k","value":"v","headers":[{"name":"h","value":null}]}]}', {}),
    (
        "/topics/t/partitions/2",
        BINARY,
        b'{"records":[{"value":"%s","timestamp":1700000000000}]}' % b64("p").encode(),
        {},
    ),
    ("/topics/t", BINARY, b'{"records":[{"value":"eA==","partition":2}]}', {"Idempotency-Key": "k1"}),
    ("/topics/t", BINARY, b'{"records":[{"value":"eA==","partition":2}]}', {"Idempotency-Key": "k1"}),
    ("/topics/t", BINARY, b'{"records":[{"value":"!!"}]}', {}),  # not base64
    ("/topics/t", BINARY, b'{"records": [', {}),  # not JSON
    ("/topics/t", BINARY, b'{"records":[]}', {}),
    ("/topics/t", "text/plain", b'{"records":[{"value":null,"partition":0}]}', {}),
    ("/topics/t", V2, b'{"records":[{"value":null,"partition":0}]}', {}),
    ("/topics/t/partitions/9", BINARY, b'{"records":[{"value":null}]}', {}),
    ("/topics/t", BINARY, b'{"records":[{"value":null,"partition":7}]}', {}),
    ("/topics/missing.topic/partitions/0", BINARY, b'{"records":[{"value":null}]}', {}),
    ("/topics/..", BINARY, b'{"records":[{"value":null}]}', {}),
    ("/topics/" + "x" * 250, BINARY, b'{"records":[{"value":null}]}', {}),
    ("/topics/t/partitions/12345678901", BINARY, b'{"records":[{"value":null}]}', {}),
    ("/topics/t/partitions/-1", BINARY, b'{"records":[{"value":null}]}', {}),
    ("/topics/t", BINARY, b'{"records":[{"value":null}]}', {"Accept": "application/octet-stream"}),
    ("/topics/t", BINARY, b'{"records":"eA=="}', {}),
    ("/topics/t", BINARY, b'{"records":[{"value":12}]}', {}),
    # what curl -d sends, and JSON values sent as plain JSON (binary): each answer says what to send
    ("/topics/t", "application/x-www-form-urlencoded", b'{"records":[{"value":{"a":1}}]}', {}),
    ("/topics/t", "application/json", b'{"records":[{"value":{"a":1}}]}', {}),
    ("/topics/t", "application/json", b'{"records":[{"value":"hello"}]}', {}),
    ("/topics/t", BINARY, b'{"records":[{"value":"eA==","partition":"1"}]}', {}),
]


@pytest.fixture
async def both(tmp_path: Path) -> AsyncIterator[tuple[RunningGateway, ...]]:
    fast = await start_gateway(tmp_path / "fast", auto_create_topics_enable=False)
    slow = await start_gateway(tmp_path / "slow", auto_create_topics_enable=False, produce_fast_path=False)
    try:
        for gw in (fast, slow):
            cluster = (await gw.client.get("/v3/clusters")).json()["data"][0]["cluster_id"]
            r = await gw.client.post(
                f"/v3/clusters/{cluster}/topics", json={"topic_name": "t", "partitions_count": 3}
            )
            assert r.status_code == 201
        yield fast, slow
    finally:
        for gw in (fast, slow):
            await gw.client.aclose()
            await gw.stop()


async def test_fast_path_and_routes_answer_alike(
    both: tuple[RunningGateway, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, slow = both
    served = Counter[str]()

    async def counted(request: Any, *args: Any) -> Any:
        served[request.base_url.port] += 1
        return await serve_produce(request, *args)

    monkeypatch.setattr(fastpath, "serve_produce", counted)
    for path, content_type, body, headers in REQUESTS:
        answers = []
        for gw in (fast, slow):
            r = await gw.client.post(path, content=body, headers={"Content-Type": content_type, **headers})
            answers.append((r.status_code, r.content, {h: r.headers.get(h) for h in HEADERS_READ}))
        assert answers[0] == answers[1], path
        assert answers[0][0] < 500, (path, answers[0])
    # The comparison means something only if the fast path served one side, and only that side.
    assert served[fast.settings.port] >= len(REQUESTS) - 4 and served[slow.settings.port] == 0


async def test_fast_path_requests_are_counted_under_the_route_template(
    both: tuple[RunningGateway, ...],
) -> None:
    fast, _ = both
    await fast.client.post("/topics/t/partitions/1", json={"records": [{"value": None}]})
    metrics = (await fast.client.get("/metrics")).text
    assert 'route="/topics/{topic}/partitions/{partition}"' in metrics
    assert "/topics/t/partitions/1" not in metrics


async def test_other_methods_on_produce_paths_are_left_to_the_routes(
    both: tuple[RunningGateway, ...],
) -> None:
    fast, _ = both
    assert (await fast.client.get("/topics/t")).json()["name"] == "t"
    r = await fast.client.put("/topics/t", json={})
    assert r.status_code == 405 and r.json()["error_code"] == 405


def test_the_fast_path_is_in_the_served_app() -> None:
    app = create_app(Settings())
    assert any(m.cls is fastpath.ProduceFastPath for m in app.user_middleware)


def test_the_setting_turns_the_fast_path_off() -> None:
    app = create_app(Settings(produce_fast_path=False))
    assert not any(m.cls is fastpath.ProduceFastPath for m in app.user_middleware)


async def _authenticate() -> None:
    """What an authentication dependency looks like to the fast path: something it does not run."""


async def _extra_query(verbose: bool = Query(False)) -> bool:
    return verbose


def _produce_routes(dependencies: list[Any]) -> list[Any]:
    """The produce routes as a router with ``dependencies`` declares them."""
    router = APIRouter(dependencies=dependencies)
    for endpoint in fastpath.FAST_PATH_ENDPOINTS:
        shipped = next(r for r in topics.router.routes if getattr(r, "endpoint", None) is endpoint)
        router.add_api_route(shipped.path, endpoint, methods=["POST"])
    return router.routes


@pytest.mark.parametrize("dependency", [_authenticate, _extra_query])
def test_a_produce_route_with_an_input_the_fast_path_does_not_supply_cannot_start(dependency: Any) -> None:
    with pytest.raises(fastpath.FastPathMismatch, match=dependency.__name__):
        fastpath.fast_routes(_produce_routes([Depends(dependency)]))
    assert len(fastpath.fast_routes(_produce_routes([]))) == 2  # as shipped: it starts


def test_a_produce_route_without_its_idempotency_key_header_cannot_start() -> None:
    async def produce(topic: str, request: Request, gw: Any) -> None:
        """A produce endpoint that forgot the header."""

    router = APIRouter()
    router.add_api_route("/topics/{topic}", produce, methods=["POST"])
    route = router.routes[0]
    with pytest.raises(fastpath.FastPathMismatch, match="Idempotency-Key"):
        fastpath._header_of(route)  # type: ignore[arg-type]
