"""The command-line tools send coded request bodies when told to (``--compress``,
``BROKERGATE_COMPRESS``), against a real gateway process, whose metrics count them."""

from __future__ import annotations

import httpx

from tests.e2e.gateway_process import GatewayProcess
from tests.e2e.tool_process import bg


def coded_requests(gw: GatewayProcess, coding: str) -> float:
    for line in httpx.get(f"{gw.url}/metrics").text.splitlines():
        if line.startswith(f'brokergate_http_coded_bodies_total{{coding="{coding}",direction="request"}}'):
            return float(line.split()[-1])
    return 0.0


def test_the_tools_send_coded_bodies_when_told_to(tmp_path):
    gw = GatewayProcess(tmp_path / "data").start()
    try:
        lines = "".join(f"event {i}\n" for i in range(500))
        made = bg(gw, "--compress", "zstd", "topics", "create", "--topic", "coded", "--partitions", "1")
        assert made.returncode == 0, made.stderr
        assert coded_requests(gw, "zstd") == 1  # the topic's creation: a control body
        sent = bg(gw, "produce", "--topic", "coded", stdin=lines, env={"BROKERGATE_COMPRESS": "gzip"})
        assert sent.returncode == 0, sent.stderr
        assert coded_requests(gw, "gzip") >= 1
        got = bg(
            gw,
            "consume",
            "--topic",
            "coded",
            "--from-beginning",
            "--max-messages",
            "500",
            "--compress",
            "zstd",
        )
        assert got.returncode == 0, got.stderr
        assert got.stdout.splitlines()[:2] == ["event 0", "event 1"] and len(got.stdout.splitlines()) == 500
        wrong = bg(gw, "topics", "list", env={"BROKERGATE_COMPRESS": "br"})
        assert wrong.returncode == 2 and "BROKERGATE_COMPRESS is gzip or zstd, not 'br'" in wrong.stderr
        refused = bg(gw, "--compress", "br", "topics", "list")
        assert refused.returncode == 2 and "invalid choice: 'br'" in refused.stderr
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n{gw.output()}") from None
    finally:
        gw.stop()
