"""The commands of docs/cli.md run as written, one after the other, against one gateway.

A command that waits for records forever (``consume`` without ``--max-messages`` or
``--timeout-ms``) is stopped with Ctrl-C, as the page says a user stops it, once it has shown
what there is; it must then exit with 130 having said how many records it processed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.e2e.docs_blocks import claim, shell_env
from tests.e2e.gateway_process import GatewayProcess

JSON = {"Content-Type": "application/vnd.kafka.json.v2+json"}
RECORD = {"records": [{"key": "k3", "value": "!"}]}
ORDER_V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}
ORDER = {**ORDER_V1, "fields": [*ORDER_V1["fields"], {"name": "qty", "type": "int", "default": 1}]}
ORDER_V3 = {**ORDER, "fields": [*ORDER["fields"], {"name": "note", "type": "string", "default": ""}]}


def commands(block: str) -> list[str]:
    """The block's commands, continuation lines joined; comment lines left out."""
    joined = block.replace("\\\n", " ")
    return [line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def prepare(url: str, cwd: Path) -> None:
    """What the page's commands assume: the schema files and records they name, a first version
    of ``orders-value`` (the page reads version 2), and a topic of jobs for the share group."""
    (cwd / "order.avsc").write_text(json.dumps(ORDER))
    (cwd / "order-v3.avsc").write_text(json.dumps(ORDER_V3))
    (cwd / "orders.jsonl").write_text('{"id": "o-1", "qty": 2}\n{"id": "o-2", "qty": 1}\n')
    registered = httpx.post(
        f"{url}/schema-registry/subjects/orders-value/versions", json={"schema": json.dumps(ORDER_V1)}
    )
    assert registered.status_code == 200, registered.text
    jobs = httpx.post(
        f"{url}/topics/jobs",
        headers={"Content-Type": "application/vnd.kafka.json.v2+json"},
        json={"records": [{"value": {"job": 1}}, {"value": {"job": 2}}]},
    )
    assert jobs.status_code == 200, jobs.text


def run(
    command: str,
    cwd: Path,
    env: dict[str, str],
    meanwhile: Callable[[], object] | None = None,
    patience: float = 3.0,
) -> tuple[int, str, str]:
    """Run one command, calling ``meanwhile`` once it is under way; one still running after
    ``patience`` seconds gets Ctrl-C (SIGINT)."""
    process = subprocess.Popen(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        if meanwhile is not None:
            time.sleep(patience / 2)
            meanwhile()
        out, err = process.communicate(timeout=patience)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=30)
    return process.returncode, out, err


def test_command_line_tools(tmp_path):
    gw = GatewayProcess(tmp_path / "data").start()
    try:
        prepare(gw.url, tmp_path)
        env = shell_env(BROKERGATE_URL=gw.url)
        with claim("docs/cli.md", "Command-line tools") as section:
            lines = commands(section.block(0))
        outputs: dict[str, str] = {}
        for command in lines:
            started = time.monotonic()
            # a group member commits what it reads: a record arrives while it waits
            arrives = (
                (lambda: httpx.post(f"{gw.url}/topics/test4", headers=JSON, json=RECORD))
                if "--group" in command
                else None
            )
            status, out, err = run(command, tmp_path, env, arrives)
            if status == 130:  # stopped by Ctrl-C: only what waits for records does
                assert " consume " in command, (command, err)
                assert "Processed a total of" in err, (command, err)
            else:
                assert status == 0, (command, status, out, err)
                assert time.monotonic() - started < 30
            outputs[command] = out
        shown = "\n".join(outputs.values())
        assert "test4" in shown
        assert "k1\thello" in shown and "k2\tworld" in shown  # consume --print-key shows the keys
        assert "compatible" in shown
        assert '"id": "o-1"' in shown or '"id":"o-1"' in shown  # the avro records, decoded
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n{gw.output()}") from None
    finally:
        gw.stop()
