"""docs/deployment.md's "Try it on one machine" runs as written: ``deploy/cluster.py up`` starts
Tansu, ZooKeeper, Redis, three replicas and nginx, a request through the balancer names the
replica that answered, and Ctrl-C stops everything."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from deploy.local.cluster import STATE_FILE
from deploy.local.process import free_port
from tests.e2e.docs_blocks import ROOT, claim, shell_env


def test_try_it_on_one_machine(tmp_path):
    with claim("docs/deployment.md", "Try it on one machine") as section:
        up, use = (line.split("  #")[0].strip() for line in section.block(0).strip().splitlines())
    port = free_port()
    workdir = tmp_path / "cluster"
    # the page's command, in a directory of the test's and on a free port rather than 8082
    command = f"{up} --dir {workdir} --port {port}"
    proc = subprocess.Popen(
        ["bash", "-c", command],
        cwd=ROOT,
        env=shell_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        state = workdir / STATE_FILE
        deadline = time.monotonic() + 120
        while not (state.exists() and json.loads(state.read_text()).get("url")):
            assert proc.poll() is None and time.monotonic() < deadline, (
                proc.stdout.read().decode() if proc.stdout else ""
            )
            time.sleep(0.3)
        seen = set()
        for _ in range(6):  # round-robin: the answers come from more than one replica
            shown = subprocess.run(
                ["bash", "-c", "set -o pipefail\n" + use.replace("localhost:8082", f"127.0.0.1:{port}")],
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert shown.returncode == 0, shown.stderr
            assert shown.stdout.lower().startswith("x-brokergate-replica:"), shown.stdout
            seen.add(shown.stdout.strip())
        assert len(seen) > 1, seen
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C stops everything
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out.decode()
