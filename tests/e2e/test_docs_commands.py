"""The README's commands and the walk-throughs of the docs run as written and show what they say.

Each test takes the sh blocks it runs with ``claim`` (see ``docs_blocks``); the first test here
fails when any page has a block that no test claims.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx

from deploy.local.process import free_port
from tests.e2e.docs_blocks import ROOT, at, claim, claims_in_tests, every_block
from tests.e2e.gateway_process import GatewayProcess, make_run, user_env


def test_every_sh_block_is_run_by_a_test():
    """A block of any page is in a section some test claims, and every claim names a section
    that still has blocks (a claim left behind by an edit of the page fails too)."""
    sections = {(block.page, block.heading): block for block in every_block()}
    claims = claims_in_tests()
    unclaimed = [
        f"{b.page}:{b.line} (under {b.heading!r})" for key, b in sections.items() if key not in claims
    ]
    assert not unclaimed, f"sh blocks no test runs: {unclaimed}"
    stale = sorted(claims - sections.keys())
    assert not stale, f"claims of sections with no sh block: {stale}"


def run(script: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_make_run_serves_and_make_test_runs_lint_and_the_suite(tmp_path):
    """``make run`` serves the gateway until stopped; ``make test`` is this suite (run here as a
    dry run, since the suite cannot run itself: it lints, then runs every test)."""
    with claim("README.md", "Two commands") as section:
        commands = [line.split("#")[0].strip() for line in section.block(0).splitlines()]
    assert commands == ["make run", "make test"]
    port = free_port()
    with make_run(ROOT, port) as serve:
        assert httpx.get(f"http://127.0.0.1:{port}/topics", timeout=5).status_code == 200
        os.killpg(serve.pid, signal.SIGTERM)
        _, errors = serve.communicate(timeout=30)
    assert serve.returncode in (0, -signal.SIGTERM, 2), errors  # make reports a stopped child as 2
    # the README's "this machine only": authentication is off, so loopback, said in one line
    said = [line for line in errors.decode().splitlines() if "authentication is off" in line]
    assert len(said) == 1 and "listening on 127.0.0.1 only" in said[0], errors
    dry = subprocess.run(
        [
            "make",
            "-n",
            "--no-print-directory",
            "-o",
            ".venv/.installed-test",
            "-o",
            "system-packages",
            "test",
        ],
        cwd=ROOT,
        env=user_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    lint = ["bin/ruff check .", "bin/ruff format --check .", "bin/mypy", "-m tests.import_graph"]
    assert all(step in dry.stdout for step in lint), dry.stdout
    assert dry.stdout.rstrip().endswith(".venv/bin/pytest -q"), dry.stdout  # then the whole suite


def curl_walkthrough(url: str) -> str:
    """The README's walk-through with curl, against ``url``; its output."""
    with claim("README.md", "A walk-through with curl") as section:
        return run(section.script(url))


def test_readme_walkthrough(tmp_path):
    gw = GatewayProcess(tmp_path / "data").start()
    try:
        out = curl_walkthrough(gw.url)
        assert '"topic_name":"orders"' in out and '"partitions_count":3' in out
        # keyed records land where Kafka's partitioner puts them, the two keyless ones on two partitions
        produced = re.search(r'"offsets":\[(.*?)\]\}', out)
        assert produced is not None
        partitions = [int(p) for p in re.findall(r'"partition":(\d+)', produced.group(1))]
        assert partitions[:2] == [0, 2] and partitions[2] != partitions[3]
        assert '{"partitions":[{"topic":"orders","partition":0},{"topic":"orders","partition":1}]}' in out
        assert '{"partitions":[{"topic":"orders","partition":2}]}' in out
        assert re.search(
            r'\{"offsets":\[\{"topic":"orders","partition":0,"offset":[12],"metadata":""\}\]\}', out
        )
        # the second group saw all four records, headers included
        assert '"headers":[{"name":"trace","value":"dC0x"}]' in out
        assert '"consumer_group_id":"shipping"' in out
        # ship-2 never polled: its partition's lag is everything on it
        assert re.search(r'"partition_id":2,"current_offset":-1,"log_end_offset":(\d),"lag":\1', out)
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n{gw.output()}") from None
    finally:
        gw.stop()


def read_stream(script: str, until: str, produce: str | None = None, timeout: float = 30) -> str:
    """What the endless ``curl -N`` of ``script`` printed up to ``until``; ``produce`` is sent
    once the stream is open, as the order that arrives while it is."""
    stream = subprocess.Popen(
        ["bash", "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True, bufsize=1
    )
    seen: list[str] = []
    try:
        assert stream.stdout is not None
        deadline = time.monotonic() + timeout
        for line in stream.stdout:
            seen.append(line)
            if produce is not None and line.startswith("id:"):  # the stream is open: an order arrives
                run(produce)
                produce = None
            if until in line or time.monotonic() > deadline:
                break
    finally:
        os.killpg(stream.pid, signal.SIGTERM)
        stream.wait(timeout=10)
    return "".join(seen)


def test_streams_server_sent_events(tmp_path):
    """``bill-1`` of the walk-through, streamed while an order arrives; then partition 0 from
    offset 0, as one event of what is there."""
    gw = GatewayProcess(tmp_path / "data").start()
    try:
        curl_walkthrough(gw.url)
        order = at(
            "curl -s -X POST localhost:8082/topics/orders"
            " -H 'Content-Type: application/vnd.kafka.json.v2+json'"
            ' -d \'{"records": [{"key": "alice", "value": {"item": "desk", "qty": 1}}]}\'',
            gw.url,
        )
        with claim("docs/streams.md", "Server-Sent Events") as section:
            instance, partition = (at(text, gw.url) for text in section.texts())
        out = read_stream(instance, until="data:", produce=order)
        assert re.search(r"^id: orders:0:\d+,orders:1:\d+,orders:2:\d+$", out, re.M), out
        assert "event: records" in out and '"value":{"item":"desk"' in out
        out = read_stream(partition, until="data:")
        assert "event: records" in out and re.search(r"^id: \d+$", out, re.M), out
        assert '"key":"alice","value":{"item":"book","qty":1},"partition":0,"offset":0,' in out
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n{gw.output()}") from None
    finally:
        gw.stop()


def test_schemas_walkthrough(tmp_path):
    """Avro produced with the schema inline and by id, a bad value refused, the subject read from
    the registry, and the records read back as JSON by an avro consumer."""
    gw = GatewayProcess(tmp_path / "data").start()
    try:
        with claim("docs/schemas.md", "A walk-through: Avro orders") as section:
            out = run(section.script(gw.url))
        assert '{"key_schema_id":null,"value_schema_id":1,"offsets":[{"partition":0,"offset":0,' in out
        assert '{"error_code":400,"message":"Bad Request: records[0].value: ' in out
        assert '{"subject":"payments-value","version":1,"id":1,"schema":"{\\"type\\":\\"record\\"' in out
        assert '"key":null,"value":{"id":"p-1","amount":12.5},"partition":0,"offset":0,' in out
        assert '"value":{"id":"p-2","amount":99.0},"partition":0,"offset":1,' in out
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n{gw.output()}") from None
    finally:
        gw.stop()


def test_share_groups_walkthrough(tmp_path):
    """Two workers of a share group split three jobs, one is released and comes back to the other
    with its second delivery, and the group ends with nothing in flight."""
    gw = GatewayProcess(tmp_path / "data").start()
    try:
        cluster = httpx.get(f"{gw.url}/v3/clusters").json()["data"][0]["cluster_id"]
        with claim("docs/share-groups.md", "A walk-through: a job queue") as section:
            out = run(section.script(gw.url), env={**os.environ, "CLUSTER": cluster})
        assert '"value":{"job":1},"partition":0,"offset":0,' in out and '"value":{"job":3},' in out
        assert re.search(
            r'"value":\{"job":2\},"partition":0,"offset":1,"timestamp":\d+,"headers":\[\],"delivery_count":2\}\]',
            out,
        )
        assert out.count('{"refused":[]}') == 2
        assert (
            '"start_offset":3,"end_offset":3,"available":0,"acquired":0,"archiving":0,"lag":0}],"lag":0}'
            in out
        )
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n{gw.output()}") from None
    finally:
        gw.stop()
