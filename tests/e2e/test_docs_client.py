"""The Python blocks of docs/client.md run as written, in page order, as one session.

Each block runs in the namespace the blocks before it left (``client``, ``consumer``...), its
``localhost:8082`` pointed at a gateway process of the test's; what the blocks print is checked
against what their comments say it is.
"""

from __future__ import annotations

import contextlib
import io
import re
from typing import Any

import httpx

from tests.e2e.docs_blocks import at, claim
from tests.e2e.gateway_process import GatewayProcess

PAGE = "docs/client.md"


def test_the_pages_examples_run_in_order(tmp_path):
    gw = GatewayProcess(tmp_path / "data").start()
    scope: dict[str, Any] = {}
    printed = io.StringIO()
    try:
        for part in (
            claim("docs/client.md", "Connecting and topics", "python"),
            claim("docs/client.md", "Producing", "python"),
            claim("docs/client.md", "A group consumer: poll, commit, seek", "python"),
            claim("docs/client.md", "Streams", "python"),
            claim("docs/client.md", "Share groups", "python"),
            claim("docs/client.md", "Errors", "python"),
        ):
            with part as section:
                for index, text in enumerate(section.texts()):
                    code = compile(at(text, gw.url), f"{PAGE}: {section.heading} [{index}]", "exec")
                    with contextlib.redirect_stdout(printed):
                        exec(code, scope)
        out = printed.getvalue()
        lines = out.splitlines()
        assert "'deliveries'" in lines[0] and lines[1] == "2", out
        alice = [o.partition for o in scope["produced"][::2]]
        assert alice[0] == alice[1], out  # one key, one partition
        assert re.search(r"^\d+ 0$", out, re.M) and "\n1\n" in out  # the Avro schema's id, offset 0; v1
        records = scope["records"]
        assert sorted(r.value.get("parcel") for r in records if isinstance(r.value, dict)) == [
            "p-1",
            "p-2",
            "p-3",
            "p-4",
        ]
        assert "[('deliveries', 0), ('deliveries', 1)]" in out
        assert [r.offset for r in scope["again"]][:1] == [1]  # the seek
        assert len(scope["held"]) == 2 and all(r.delivery_count == 1 for r in scope["held"])
        assert scope["refused_count"] == 0 and scope["refused"] == [] and scope["more"]
        assert "'available': 2, 'acquired': 0" in out, out  # two accepted, two released
        assert "404 40401 Topic 'no-such-topic' not found." in out, out
        assert "422 42207" in out and "0 cannot reach the gateway at http://127.0.0.1:9" in out
        assert "deliveries" not in httpx.get(f"{gw.url}/topics").json()  # deleted at the end
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n{printed.getvalue()}\n{gw.output()}") from None
    finally:
        gw.stop()
