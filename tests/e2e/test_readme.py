"""The README's curl walk-through runs as written and shows what it says."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from service.settings import Settings
from tests.e2e.gateway_process import GatewayProcess

README = Path(__file__).resolve().parents[2] / "README.md"


def walkthrough() -> str:
    text = README.read_text()
    start = text.index("## A walk-through with curl")
    section = text[start : text.index("\n## ", start + 1)]
    return "\n".join(re.findall(r"```sh\n(.*?)```", section, re.S))


def test_readme_walkthrough(tmp_path):
    gw = GatewayProcess(tmp_path / "data").start()
    try:
        script = "set -euo pipefail\n" + walkthrough().replace("localhost:8082", f"127.0.0.1:{gw.port}")
        result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr + gw.output()
        out = result.stdout
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
    finally:
        gw.stop()


def test_every_setting_is_in_the_configuration_table():
    table = README.read_text()
    missing = [name for name in Settings.model_fields if f"`{name.upper()}`" not in table]
    assert not missing, f"settings the README does not document: {missing}"


def security_walkthrough() -> list[str]:
    text = README.read_text()
    start = text.index("### A walk-through: two teams, one gateway")
    section = text[start : text.index("\n### ", start + 1)]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def test_readme_security_walkthrough(tmp_path):
    """Users added, the gateway served as the README says, ACLs granted with the CLI, then one
    team produces and consumes while the other is refused and an anonymous client is not served."""
    setup, *rest = security_walkthrough()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    commands = setup.strip().splitlines()
    serve = next(line for line in commands if line.startswith("brokergate serve"))
    users = "set -euo pipefail\n" + "\n".join(line for line in commands if line != serve)
    subprocess.run(["bash", "-c", users], cwd=tmp_path, env=env, check=True, capture_output=True, timeout=60)
    gw = GatewayProcess(tmp_path / "data", *shlex.split(serve)[2:]).start()
    try:
        script = "set -euo pipefail\n" + "\n".join(rest).replace("localhost:8082", f"127.0.0.1:{gw.port}")
        env["BROKERGATE_URL"] = gw.url
        result = subprocess.run(
            ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stderr + gw.output()
        out = result.stdout
        for line in re.findall(r"^# ((?:GROUP|TOPIC) .*)$", rest[0], re.M):  # the table, as shown
            assert line.strip() in out, out
        assert re.search(r'"offsets":\[\{"partition":1,"offset":0,', out)  # alice produced
        assert '"key":"inv-1","value":{"amount":120}' in out  # and consumed in her team's group
        # curl prints no newline: bob's refusal, bob's empty listing and the anonymous 401 follow
        denied = "\"Not authorized: User:bob may not WRITE topic 'payments.invoices'.\"}"
        unauthenticated = (
            '{"error_code":40101,"message":"Authentication is required: send HTTP Basic credentials."}'
        )
        assert denied + "[]" + unauthenticated in out
    finally:
        gw.stop()


def schemas_walkthrough() -> str:
    text = README.read_text()
    start = text.index("### A walk-through: Avro orders")
    section = text[start : text.index("\n### ", start + 1)]
    return "\n".join(re.findall(r"```sh\n(.*?)```", section, re.S))


def test_readme_schemas_walkthrough(tmp_path):
    """Avro produced with the schema inline and by id, a bad value refused, the subject read from
    the registry, and the records read back as JSON by an avro consumer."""
    gw = GatewayProcess(tmp_path / "data").start()
    try:
        script = "set -euo pipefail\n" + schemas_walkthrough().replace(
            "localhost:8082", f"127.0.0.1:{gw.port}"
        )
        result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr + gw.output()
        out = result.stdout
        assert '{"key_schema_id":null,"value_schema_id":1,"offsets":[{"partition":0,"offset":0,' in out
        assert '{"error_code":42203,"message":"records[0].value: ' in out
        assert '{"subject":"payments-value","version":1,"id":1,"schema":"{\\"type\\":\\"record\\"' in out
        assert '"key":null,"value":{"id":"p-1","amount":12.5},"partition":0,"offset":0,' in out
        assert '"value":{"id":"p-2","amount":99.0},"partition":0,"offset":1,' in out
    finally:
        gw.stop()


def share_groups_walkthrough() -> str:
    text = README.read_text()
    start = text.index("### A walk-through: a job queue")
    section = text[start : text.index("\n## ", start + 1)]
    return "\n".join(re.findall(r"```sh\n(.*?)```", section, re.S))


def test_readme_share_groups_walkthrough(tmp_path):
    """Two workers of a share group split three jobs, one is released and comes back to the other
    with its second delivery, and the group ends with nothing in flight."""
    gw = GatewayProcess(tmp_path / "data").start()
    try:
        cluster = walkthrough().splitlines()[0]  # the CLUSTER=… line of the first walk-through
        assert cluster.startswith("CLUSTER=")
        script = "set -euo pipefail\n" + f"{cluster}\n{share_groups_walkthrough()}".replace(
            "localhost:8082", f"127.0.0.1:{gw.port}"
        )
        result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr + gw.output()
        out = result.stdout
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
    finally:
        gw.stop()
