"""The compressed-bodies walk-through of docs/api.md runs as written, with the machine's curl,
against a gateway process: a gzip-coded produce is stored, a read comes back coded, and what
the comments say is what it printed."""

from __future__ import annotations

import subprocess

from tests.e2e.docs_blocks import claim, run_sh, said
from tests.e2e.gateway_process import GatewayProcess


def test_the_compressed_bodies_walk_through_runs_with_curl(tmp_path):
    gw = GatewayProcess(tmp_path / "data", env={"BROKERGATE_COMPRESSION": "true"}).start()
    try:
        with claim("docs/api.md", "Compressed bodies") as section:
            [script] = section.texts()
            lines = run_sh(script, gw.url, tmp_path).splitlines()
        expected = said(script)
        curl_codes = subprocess.run(["curl", "-V"], capture_output=True, text=True).stdout
        if "zstd" not in curl_codes:  # a curl built without zstd asks for gzip, and gets it
            expected[1] = "content-encoding: gzip"
        assert [line.strip() for line in lines] == expected, lines
        assert (tmp_path / "records.json").stat().st_size > 10 * (tmp_path / "records.json.gz").stat().st_size
    except AssertionError as failed:
        raise AssertionError(f"{failed}\n{gw.output()}") from None
    finally:
        gw.stop()
