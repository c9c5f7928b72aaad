"""``brokergate push``, as a user runs it: against a gateway process that may reach loopback, with
a real receiver, the tools as separate processes without a terminal."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from standardwebhooks.webhooks import Webhook

from tests.e2e.gateway_process import GatewayProcess
from tests.e2e.tool_process import bg, ok, refused, rows
from tests.push_receiver import Receiver


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    env = {"BROKERGATE_PUSH_ALLOWED_DESTINATIONS": "http://127.0.0.1", "BROKERGATE_PUSH_REFRESH_MS": "200"}
    gw = GatewayProcess(tmp_path_factory.mktemp("push") / "data", env=env).start()
    yield gw
    gw.stop()


async def run(gw: GatewayProcess, *args: str, stdin: str = "", env: dict[str, str] | None = None) -> str:
    return ok(await asyncio.to_thread(bg, gw, *args, stdin=stdin, env=env))


async def test_create_deliver_describe_pause_update_delete(
    gateway: GatewayProcess, receiver: Receiver
) -> None:
    await run(gateway, "topics", "create", "--topic", "cli-orders", "--partitions", "1")
    out = await run(
        gateway, "push", "create", "to-hook", "--endpoint", receiver.url, "--topic", "cli-orders",
        "--format", "string", "--start", "earliest", "--max-attempts", "3",
    )  # fmt: skip
    secret = next(line.split()[-1] for line in out.splitlines() if line.startswith("secret (shown once)"))
    assert secret.startswith("whsec_") and ["name", "to-hook"] in rows(out)
    await run(gateway, "produce", "--topic", "cli-orders", stdin="hello\nworld\n")
    await receiver.wait_for(2)
    for got in receiver.received:
        Webhook(secret).verify(got.body, got.headers)
    assert [r["value"] for r in receiver.records()] == ["hello", "world"]

    listed = json.loads(await run(gateway, "push", "list", "--output", "json"))
    assert [s["name"] for s in listed] == ["to-hook"]
    described = json.loads(await run(gateway, "push", "describe", "to-hook", "--output", "json"))
    assert described["status"]["delivered"] == 2 and "secret" not in described

    await run(gateway, "push", "pause", "to-hook")
    updated = json.loads(
        await run(gateway, "push", "update", "to-hook", "--max-in-flight", "2", "--output", "json")
    )
    assert updated["max_in_flight"] == 2 and updated["paused"] is True
    assert updated["retry"]["max_attempts"] == 3 and updated["topics"] == ["cli-orders"]  # kept
    rotated = await run(gateway, "push", "rotate-secret", "to-hook")
    assert "secret (shown once)" in rotated and secret not in rotated
    await run(gateway, "push", "delete", "to-hook")
    assert json.loads(await run(gateway, "push", "list", "--output", "json")) == []


@pytest.mark.parametrize(
    ("args", "status", "needle"),
    [
        (("push", "create", "x", "--topic", "t"), 2, "needs --endpoint"),
        (("push", "create", "x", "--endpoint", "http://127.0.0.1/h"), 2, "needs --topic or --pattern"),
        (("push", "describe"), 2, "needs a NAME"),
        (("push", "list", "x"), 2, "takes no NAME"),
        (("push", "pause", "x", "--endpoint", "http://127.0.0.1/h"), 2, "goes with push create or update"),
        (("push", "describe", "missing"), 1, "not found"),
        (("push", "create", "x", "--endpoint", "http://10.0.0.1/h", "--topic", "t"), 1, "allowed"),
        (("push", "create", "x", "--endpoint", "http://127.0.0.1/h", "--topic", "t", "--auth", "bearer"), 2,
         "needs its token"),
    ],
)  # fmt: skip
async def test_what_a_careless_user_is_told(
    gateway: GatewayProcess, args: tuple[str, ...], status: int, needle: str
) -> None:
    refused(await asyncio.to_thread(bg, gateway, *args), status, needle)


async def test_a_bearer_token_comes_from_the_environment(gateway: GatewayProcess, receiver: Receiver) -> None:
    await run(gateway, "topics", "create", "--topic", "cli-bearer", "--partitions", "1")
    await run(
        gateway, "push", "create", "bearer", "--endpoint", receiver.url, "--topic", "cli-bearer",
        "--auth", "bearer", "--start", "earliest", env={"BROKERGATE_PUSH_TOKEN": "tok-123"},
    )  # fmt: skip
    await run(gateway, "produce", "--topic", "cli-bearer", stdin="x\n")
    await receiver.wait_for(1)
    assert receiver.received[0].headers["authorization"] == "Bearer tok-123"
    await run(gateway, "push", "delete", "bearer")
