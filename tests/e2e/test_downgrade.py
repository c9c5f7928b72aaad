"""Going back a release: what this release stores, read by the release before it and by a later one.

Each stored form of the data dir is written by this release's gateway over HTTP. A release that
finds one of a newer format than it reads refuses to start, in one line, saying so; the release
before this one (checked out from the repository's history and run with the same virtualenv)
reads the data dir whole, except share states this release wrote, which it refuses at start
rather than answering a share group with 500s (docs/upgrading.md).
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import crc32c
import httpx
import pytest

from deploy.local.process import free_port
from service.adapters.format_versions import USERS_FORMAT
from service.security.users import add_user
from tests.e2e.gateway_process import GatewayProcess
from tests.helpers import JSON, V2

# The release before the version marks (last week's): it reads share states only as a row per record.
PREVIOUS = "9327361"
ROOT = Path(__file__).resolve().parents[2]
TOPIC = "jobs"
JSON_ACCEPT = {"Accept": "application/vnd.kafka.json.v2+json"}


def _write_data_dir(
    data: Path, *, share_group: bool, crash: bool = False, env: dict[str, str] | None = None
) -> None:
    """Records, a group's committed offsets, an ACL and (with ``share_group``) a share group's
    delivery state, written through this release's gateway (``env`` added to its settings);
    stopped cleanly or (``crash``) killed."""
    gateway = GatewayProcess(data, env=env).start()
    try:
        with httpx.Client(base_url=gateway.url, timeout=20) as client:
            cluster = client.get("/v3/clusters").json()["data"][0]["cluster_id"]
            topic = {"topic_name": TOPIC, "partitions_count": 1, "configs": []}
            assert client.post(f"/v3/clusters/{cluster}/topics", json=topic).status_code == 201
            records = [{"key": f"k{i}", "value": {"job": i}} for i in range(5)]
            r = client.post(f"/topics/{TOPIC}", json={"records": records}, headers={"Content-Type": JSON})
            assert r.status_code == 200, r.text
            base = client.post(
                "/consumers/g", json={"name": "c", "format": "json"}, headers={"Content-Type": V2}
            ).json()["base_uri"]
            tps = {"partitions": [{"topic": TOPIC, "partition": 0}]}
            r = client.post(f"{base}/assignments", json=tps, headers={"Content-Type": V2})
            assert r.status_code == 204, r.text
            offsets = [{"topic": TOPIC, "partition": 0, "offset": 3}]
            r = client.post(f"{base}/offsets", json={"offsets": offsets}, headers={"Content-Type": V2})
            assert r.status_code == 200, r.text
            acl = {
                "resource_type": "TOPIC",
                "resource_name": TOPIC,
                "pattern_type": "LITERAL",
                "principal": "User:alice",
                "host": "*",
                "operation": "READ",
                "permission": "ALLOW",
            }
            r = client.post(f"/v3/clusters/{cluster}/acls", json=acl)
            assert r.status_code == 201, r.text
            if share_group:
                _touch_share_group(client)
    finally:
        if crash:
            gateway.kill()
        else:
            gateway.stop()


def _touch_share_group(client: httpx.Client) -> None:
    base = "/share-groups/workers/consumers"
    body = {"name": "w1", "format": "json", "share.auto.offset.reset": "earliest"}
    assert client.post(base, json=body, headers={"Content-Type": V2}).status_code == 200
    r = client.post(f"{base}/w1/subscription", json={"topics": [TOPIC]}, headers={"Content-Type": V2})
    assert r.status_code == 204, r.text
    got: list[object] = []
    for _ in range(20):
        got = client.get(f"{base}/w1/records", params={"max_records": 3}, headers=JSON_ACCEPT).json()
        if got:
            break
    assert got
    acks = {"acknowledgements": [{"topic": TOPIC, "partition": 0, "offsets": [0], "type": "accept"}]}
    r = client.post(f"{base}/w1/acknowledgements", json=acks, headers={"Content-Type": V2})
    assert r.status_code == 200, r.text


def _start_until_exit(
    data: Path, source: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``brokergate serve`` of the release at ``source`` on ``data`` (``env`` added to its
    settings), for starts that must fail."""
    return subprocess.run(
        [sys.executable, "-m", "service", "serve", "--host", "127.0.0.1", "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=source,
        env={**os.environ, "PYTHONPATH": str(source), "BROKERGATE_DATA_DIR": str(data), **(env or {})},
    )


def _refusal(result: subprocess.CompletedProcess[str]) -> str:
    """The one line a refused start gives."""
    assert result.returncode != 0, result.stderr[-2000:]
    lines = [line for line in result.stderr.splitlines() if "cannot start" in line]
    assert len(lines) == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    return lines[0]


# --- a later release's files: refused at start, in one line --------------------------------------


def _bump_journal(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[4] += 1  # the version after the four letters
    path.write_bytes(bytes(raw))


def _bump_json(path: Path, field: str) -> None:
    doc = json.loads(path.read_text())
    doc[field] = doc.get(field, 1) + 1
    path.write_text(json.dumps(doc))


def _bump_batch(path: Path) -> None:
    """The first batch's magic one higher, its CRC made good again: a newer release's batch."""
    raw = bytearray(path.read_bytes())
    head = struct.Struct(">qiI")
    _base, length, _crc = head.unpack_from(raw, 0)
    raw[head.size] += 1  # magic, the first byte the CRC covers
    struct.pack_into(">I", raw, 12, crc32c.crc32c(bytes(raw[head.size : 12 + length])))
    path.write_bytes(bytes(raw))


NEWER = {
    "offsets journal": (
        "coordinator/offsets-*.journal",
        _bump_journal,
        "format 2; this release reads up to 1",
    ),
    "offsets snapshot": (
        "coordinator/offsets.snapshot",
        _bump_journal,
        "format 2; this release reads up to 1",
    ),
    "share states journal": (
        "coordinator/shares-*.journal",
        _bump_journal,
        "format 3; this release reads up to 2",
    ),
    "share states snapshot": (
        "coordinator/shares.snapshot",
        _bump_journal,
        "format 3; this release reads up to 2",
    ),
    "ACLs": (
        "coordinator/acls.json",
        lambda p: _bump_json(p, "version"),
        "format 2; this release reads up to 1",
    ),
    "topic.json": (
        f"topics/{TOPIC}/topic.json",
        lambda p: _bump_json(p, "format"),
        "format 2; this release reads up to 1",
    ),
    "cluster.json": (
        "cluster.json",
        lambda p: _bump_json(p, "format"),
        "format 2; this release reads up to 1",
    ),
    "record batch": (f"topics/{TOPIC}/0/*.log", _bump_batch, "format 2; this release reads up to 1"),
}


@pytest.mark.parametrize("form", list(NEWER))
def test_a_stored_form_of_a_newer_format_refuses_the_start_in_one_line(tmp_path: Path, form: str) -> None:
    data = tmp_path / "data"
    pattern, bump, says = NEWER[form]
    # Killed, so that the journals hold the writes (a clean stop folds them into the snapshots).
    _write_data_dir(data, share_group=True, crash="journal" in form)
    paths = sorted(data.glob(pattern))
    assert paths, sorted(str(p.relative_to(data)) for p in data.rglob("*"))
    bump(paths[-1])
    before = {
        p: p.read_bytes() for p in data.rglob("*") if p.is_file() and p.suffix not in (".lock", ".clean")
    }
    line = _refusal(_start_until_exit(data))
    assert f"was written by a newer release ({says})" in line
    # Nothing was cut, rewritten or deleted as damage.
    assert {p: p.read_bytes() for p in before if p.exists()} == before


# --- the release before this one -----------------------------------------------------------------


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The previous release's source, from the repository's own history."""
    found = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{PREVIOUS}^{{commit}}"], capture_output=True
    )
    if found.returncode != 0:
        pytest.skip(f"the repository holds no commit {PREVIOUS} (a shallow clone?): nothing to go back to")
    source = tmp_path_factory.mktemp("previous")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", PREVIOUS], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
    yield source


def _previous_gateway(data: Path, source: Path, env: dict[str, str] | None = None) -> GatewayProcess:
    gateway = GatewayProcess(data, env={"PYTHONPATH": str(source), **(env or {})})
    gateway.cwd = source
    return gateway.start()


def test_the_previous_release_reads_what_this_one_wrote(tmp_path: Path, previous_release: Path) -> None:
    data = tmp_path / "data"
    _write_data_dir(data, share_group=False)
    gateway = _previous_gateway(data, previous_release)
    try:
        with httpx.Client(base_url=gateway.url, timeout=20) as client:
            r = client.get(f"/topics/{TOPIC}/partitions/0/records", params={"offset": 0}, headers=JSON_ACCEPT)
            assert r.status_code == 200, r.text
            assert [rec["value"] for rec in r.json()["records"]] == [{"job": i} for i in range(5)]
            base = client.post(
                "/consumers/g", json={"name": "c2", "format": "json"}, headers={"Content-Type": V2}
            ).json()["base_uri"]
            wanted = {"partitions": [{"topic": TOPIC, "partition": 0}]}
            r = client.request("GET", f"{base}/offsets", json=wanted, headers={"Content-Type": V2})
            assert r.status_code == 200, r.text
            assert [o["offset"] for o in r.json()["offsets"]] == [4]  # the one after the record committed
            cluster = client.get("/v3/clusters").json()["data"][0]["cluster_id"]
            acls = client.get(f"/v3/clusters/{cluster}/acls").json()["data"]
            assert [(a["principal"], a["operation"]) for a in acls] == [("User:alice", "READ")]
    finally:
        gateway.stop()
    # ... and this release reads it again.
    gateway = GatewayProcess(data).start()
    try:
        r = httpx.get(f"{gateway.url}/topics/{TOPIC}/partitions/0/records?offset=0", headers=JSON_ACCEPT)
        assert len(r.json()["records"]) == 5
    finally:
        gateway.stop()


@pytest.mark.parametrize("crash", [False, True], ids=["stopped", "killed"])
def test_the_previous_release_refuses_share_states_of_this_one_at_start(
    tmp_path: Path, previous_release: Path, crash: bool
) -> None:
    """Format 2 share states: the previous release stops at start (it cannot tell a newer file
    from a foreign one) instead of answering every request on the share group 500."""
    data = tmp_path / "data"
    _write_data_dir(data, share_group=True, crash=crash)
    line = _refusal(_start_until_exit(data, previous_release))
    assert "share states" in line and "coordinator/shares" in line
    assert "damaged" not in line


def _bump_batch_at(path: Path, index: int) -> int:
    """The ``index``-th batch of a segment made a newer release's (as ``_bump_batch``); its base offset."""
    raw = bytearray(path.read_bytes())
    head = struct.Struct(">qiI")
    pos = 0
    for _ in range(index):
        pos += 12 + head.unpack_from(raw, pos)[1]
    base, length, _crc = head.unpack_from(raw, pos)
    raw[pos + head.size] += 1
    struct.pack_into(">I", raw, pos + 12, crc32c.crc32c(bytes(raw[pos + head.size : pos + 12 + length])))
    path.write_bytes(bytes(raw))
    return int(base)


def test_a_newer_batch_inside_a_closed_segment_answers_503_for_the_read(tmp_path: Path) -> None:
    """The start checks a closed segment's first batch and those from its last indexed batch on;
    one in between is met by a read, which answers 503 saying so, and never ends the partition
    there (skipping to the next segment) nor cuts it as damage."""
    data = tmp_path / "data"
    gateway = GatewayProcess(data).start()
    try:
        with httpx.Client(base_url=gateway.url, timeout=20) as client:
            cluster = client.get("/v3/clusters").json()["data"][0]["cluster_id"]
            configs = [{"name": "segment.ms", "value": "1000"}]
            topic = {"topic_name": TOPIC, "partitions_count": 1, "configs": configs}
            assert client.post(f"/v3/clusters/{cluster}/topics", json=topic).status_code == 201
            # Three batches in the first segment, large enough that the offset index points past
            # the second: the start checks a closed segment from its last indexed batch on.
            for i in range(3):
                body = {"records": [{"value": {"job": i, "pad": "x" * 3000}}]}
                assert (
                    client.post(f"/topics/{TOPIC}", json=body, headers={"Content-Type": JSON}).status_code
                    == 200
                )
            time.sleep(1.2)
            body = {"records": [{"value": {"job": 3}}]}  # rolls: the first segment is closed
            assert (
                client.post(f"/topics/{TOPIC}", json=body, headers={"Content-Type": JSON}).status_code == 200
            )
    finally:
        gateway.stop()
    segments = sorted(data.glob(f"topics/{TOPIC}/0/*.log"))
    assert len(segments) == 2
    assert _bump_batch_at(segments[0], 1) == 1
    before = {p: p.read_bytes() for p in data.rglob("*.log")}
    gateway = GatewayProcess(data).start()
    try:
        with httpx.Client(base_url=gateway.url, timeout=20) as client:
            url = f"/topics/{TOPIC}/partitions/0/records"
            r = client.get(url, params={"offset": 0}, headers=JSON_ACCEPT)
            # What comes before the newer batch may be answered; the read reaching it is refused.
            if r.status_code == 200:
                assert [rec["offset"] for rec in r.json()["records"]] == [0]
                r = client.get(url, params={"offset": 1}, headers=JSON_ACCEPT)
            assert r.status_code == 503, r.text
            assert (
                "was written by a newer release (format 2; this release reads up to 1)" in r.json()["message"]
            )
            assert client.get(url, params={"offset": 3}, headers=JSON_ACCEPT).status_code == 200
    finally:
        gateway.stop()
    assert {p: p.read_bytes() for p in data.rglob("*.log")} == before


# --- the users file --------------------------------------------------------------------------


def test_the_users_file_carries_its_format_which_the_previous_release_reads_past(
    tmp_path: Path, previous_release: Path
) -> None:
    """This release writes the users file with its format in its first line; the previous release,
    which has no number for it, takes that line for the comment it is and reads every user; a
    format above this release's refuses the start in one line and leaves the file as it was."""
    users = tmp_path / "data" / "users"
    add_user(users, "alice", "correct horse battery staple")
    add_user(users, "bob", "another long password")
    first = users.read_text().splitlines()[0]
    assert first == f"# brokergate users file, format {USERS_FORMAT}"

    read = "import sys; from pathlib import Path; from service.security.users import read_users; "
    read += "print(sorted(read_users(Path(sys.argv[1]))))"
    previous = subprocess.run(
        [sys.executable, "-c", read, str(users)],
        capture_output=True,
        text=True,
        cwd=previous_release,
        env={**os.environ, "PYTHONPATH": str(previous_release)},
        timeout=60,
    )
    assert previous.returncode == 0, previous.stderr[-2000:]
    assert previous.stdout.strip() == "['alice', 'bob']"

    newer = users.read_text().replace(first, f"# brokergate users file, format {USERS_FORMAT + 1}", 1)
    users.write_text(newer)
    result = _start_until_exit(tmp_path / "data", env={"BROKERGATE_AUTH": "basic"})
    says = f"format {USERS_FORMAT + 1}; this release reads up to {USERS_FORMAT}"
    # refused as any setting that cannot be used is, before anything starts: one line, its status 2
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.strip().splitlines() == [
        f"brokergate: error: users file {users} was written by a newer release ({says})"
    ]
    assert users.read_text() == newer
