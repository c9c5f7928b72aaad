"""The README's commands and the walk-throughs of the docs run as written and show what they say.

Each test takes the blocks it runs with ``claim`` (see ``docs_blocks``); the first test here
fails when any page has a block that no test claims.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from deploy.local.process import free_port
from service.client import V2
from tests.e2e import docs_blocks
from tests.e2e.docs_blocks import (
    NOT_RUN,
    ROOT,
    RUN,
    at,
    blocks,
    claim,
    claims_in_tests,
    page_name,
    pages,
)
from tests.e2e.gateway_process import GatewayProcess, make_run, user_env


def unrun(paths: list[Path], claims: set[tuple[str, str, str]]) -> list[str]:
    """What is wrong with the blocks of the pages at ``paths``, given the tests' ``claims``: a
    block of a language the suite runs that no test claims, a block of a language it neither
    runs nor says why not (``NOT_RUN``), a claim of a section without such a block, a fence the
    block reader does not see, a ``json`` block that is no JSON."""
    found = [block for path in paths for block in blocks(path, None)]
    sections = {(b.page, b.heading, b.language): b for b in found if b.language in RUN}
    wrong = [
        f"no test runs {b.page}:{b.line} ({b.language} under {b.heading!r})"
        for key, b in sections.items()
        if key not in claims
    ]
    wrong += [f"a claim of a section with no such block: {c}" for c in sorted(claims - sections.keys())]
    wrong += [
        f"no test runs {b.page}:{b.line} ({b.language or 'no language'}), nor is it of a kind shown"
        f" ({', '.join(NOT_RUN)})"
        for b in found
        if b.language not in (*RUN, *NOT_RUN)
    ]
    wrong += [
        f"a fence the block reader does not see (indented, or ~~~): {page_name(path)}:{number}"
        for path in paths
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if re.match(r"^(\s+```|\s*~~~)", line)
    ]
    for b in found:
        if b.language == "json":
            for number, line in enumerate(b.text.splitlines(), start=b.line + 1):
                try:
                    json.loads(line)
                except ValueError as exc:
                    wrong.append(f"{b.page}:{number} is no JSON: {exc}")
    return wrong


def test_every_block_is_run_by_a_test():
    """A block of any page, in any language, is run by a test (in a section some test claims for
    its language) or is of a kind ``NOT_RUN`` says why it is not; every claim names a section
    that still has blocks (a claim left behind by an edit of the page fails too)."""
    wrong = unrun(pages(), claims_in_tests())
    assert not wrong, "\n".join(wrong)


def test_a_block_no_test_runs_is_found(tmp_path, monkeypatch):
    """The check above sees a block a page gained, in a language the suite runs or in none."""
    monkeypatch.setattr(docs_blocks, "ROOT", tmp_path)
    page = tmp_path / "docs" / "new.md"
    page.parent.mkdir()
    page.write_text(
        "# New\n\n```python\nprint(1)\n```\n\n```\nplain\n```\n\n```json\n{1}\n```\n\n"
        "- a list\n\n    ```sh\n    true\n    ```\n"
    )
    assert unrun([page], set()) == [
        "no test runs docs/new.md:3 (python under 'New')",
        "no test runs docs/new.md:7 (no language), nor is it of a kind shown (console, text, json)",
        "a fence the block reader does not see (indented, or ~~~): docs/new.md:17",
        "a fence the block reader does not see (indented, or ~~~): docs/new.md:19",
        "docs/new.md:12 is no JSON: Expecting property name enclosed in double quotes: line 1 column 2"
        " (char 1)",
    ]
    assert unrun([page], {("docs/new.md", "New", "python"), ("docs/new.md", "Old", "sh")})[:2] == [
        "a claim of a section with no such block: ('docs/new.md', 'Old', 'sh')",
        "no test runs docs/new.md:7 (no language), nor is it of a kind shown (console, text, json)",
    ]


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
    suite = ".venv/bin/pytest -q -n 2 --dist loadfile --durations=40"  # the whole suite, two processes
    assert dry.stdout.rstrip().endswith(suite), dry.stdout


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


# What runs the browser's block under node: its relative URLs are the page's, the gateway's origin
NODE_PAGE = """const Native = EventSource;
globalThis.EventSource = class extends Native {
  constructor(url, init) { super(new URL(url, process.env.PAGE_ORIGIN), init); }
};
"""


def follow(argv: list[str], until: str, meanwhile: Callable[[], object], then: Callable[[], object]) -> str:
    """The output of a program that reads a stream until it ends: ``meanwhile`` is called every
    half second until it prints a line holding ``until``, then ``then`` (what ends the stream);
    the program must then exit 0 by itself."""
    program = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    lines: queue.Queue[str] = queue.Queue()
    assert program.stdout is not None
    threading.Thread(target=lambda: [lines.put(line) for line in program.stdout or ()], daemon=True).start()
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 30
        while not any(until in line for line in seen):
            assert time.monotonic() < deadline and program.poll() is None, "".join(seen)
            meanwhile()
            try:
                while True:
                    seen.append(lines.get(timeout=0.5))
            except queue.Empty:
                pass
        then()
        assert program.wait(timeout=30) == 0, "".join(seen)
    finally:
        if program.poll() is None:
            os.killpg(program.pid, signal.SIGKILL)
            program.wait(10)
    time.sleep(0.1)  # the reading thread takes the last lines
    while not lines.empty():
        seen.append(lines.get())
    return "".join(seen)


def test_streams_in_a_browser_and_over_a_websocket(tmp_path):
    """The page's EventSource code (under node, the page's origin the gateway's) and its WebSocket
    consumer each print the order that arrives while they read ``bill-1`` of the walk-through,
    and end by themselves when the instance is deleted: the browser's closes its source on an
    ``end`` other than a shutdown, the WebSocket's leaves its loop on ``end``."""
    gw = GatewayProcess(tmp_path / "data").start()
    try:
        curl_walkthrough(gw.url)
        json_type = {"Content-Type": "application/vnd.kafka.json.v2+json"}
        instance = f"{gw.url}/consumers/billing/instances/bill-1"

        def order() -> None:
            body = {"records": [{"key": "alice", "value": {"item": "desk", "qty": 1}}]}
            assert httpx.post(f"{gw.url}/topics/orders", headers=json_type, json=body).is_success

        def delete() -> None:
            assert httpx.delete(instance, headers={"Content-Type": V2}).status_code == 204

        with claim("docs/streams.md", "Server-Sent Events", "js") as section:
            browser = NODE_PAGE + section.block(0)
        (tmp_path / "page.js").write_text(browser)
        node = [
            "env",
            f"PAGE_ORIGIN={gw.url}",
            "node",
            "--experimental-eventsource",
            str(tmp_path / "page.js"),
        ]
        out = follow(node, until='alice {"item":"desk","qty":1}', meanwhile=order, then=delete)
        assert "ReferenceError" not in out, out

        again = {"name": "bill-1", "format": "json", "auto.offset.reset": "latest"}
        assert httpx.post(f"{gw.url}/consumers/billing", headers={"Content-Type": V2}, json=again).is_success
        topics = {"topics": ["orders"]}
        assert httpx.post(f"{instance}/subscription", headers={"Content-Type": V2}, json=topics).is_success
        with claim("docs/streams.md", "WebSocket", "python") as section:
            consumer = at(section.block(0), gw.url)
        out = follow(
            [sys.executable, "-c", consumer],
            until="alice {'item': 'desk', 'qty': 1}",
            meanwhile=order,
            then=delete,
        )
        assert "Traceback" not in out, out
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


def test_push_walkthrough(tmp_path):
    """A subscription made as the page says delivers the order to a real endpoint, signed with the
    secret its creation answered; describing it shows it delivered; it rotates, pauses and goes."""
    import http.server

    from standardwebhooks.webhooks import Webhook

    got: queue.Queue[tuple[dict[str, str], bytes]] = queue.Queue()

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            got.put(({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    gw = GatewayProcess(
        tmp_path / "data", env={"BROKERGATE_PUSH_ALLOWED_DESTINATIONS": "http://127.0.0.1"}
    ).start()
    try:
        cluster = httpx.get(f"{gw.url}/v3/clusters").json()["data"][0]["cluster_id"]
        hook = f"http://127.0.0.1:{server.server_address[1]}/hooks/orders"
        env = {**os.environ, "CLUSTER": cluster, "HOOK": hook}
        with claim("docs/push.md", "A walk-through: orders to a webhook") as section:
            first, then = section.texts()
            out = run("set -euo pipefail\n" + at(first, gw.url), env=env)
            headers, body = got.get(timeout=20)
            out += run("set -euo pipefail\n" + at(then, gw.url), env=env)
        secret = re.search(r'"secret":"(whsec_[^"]+)"', out)
        assert secret is not None, out
        Webhook(secret.group(1)).verify(body, headers)
        delivered = json.loads(body)
        assert delivered["subscription"] == "orders-to-hook"
        assert delivered["records"][0]["value"] == {"order": 1} and delivered["records"][0]["key"] == "o-1"
        assert '"delivering":true,"delivered":1,' in out  # the backlog: 0 once the settlement is stored
        assert '"paused":true' in out
        gone = httpx.get(f"{gw.url}/v3/clusters/{cluster}/push-subscriptions/orders-to-hook")
        assert gone.status_code == 404
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n{gw.output()}") from None
    finally:
        gw.stop()
        server.shutdown()
