"""A real ``brokergate serve`` whose data dir's filesystem fails under it: turned read-only, as
ext4 does after a disk error, or full.

The data dir is on a small ext4 image of the test's own, loop-mounted with ``errors=remount-ro``;
ext4's ``trigger_fs_error`` makes the kernel turn it read-only as a disk error would. What a
retry cannot cure is answered without ``Retry-After`` and says a restart is needed; no answer
names a path of the server's disk.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.e2e.gateway_process import GatewayProcess
from tests.helpers import STRING, V2, cluster_id, consumer, create_topic, poll_until, produce, subscribe


@dataclass(frozen=True)
class Ext4:
    """A mounted ext4 image: ``root`` is its mount point, ``fail()`` makes the kernel turn it
    read-only as after a disk error."""

    root: Path
    device: str

    def fail(self) -> None:
        Path(f"/sys/fs/ext4/{self.device}/trigger_fs_error").write_text("1")


@pytest.fixture
def ext4(tmp_path: Path) -> Iterator[Ext4]:
    if os.geteuid() != 0:
        pytest.skip("mounting a filesystem image needs root")
    image, root = tmp_path / "disk.img", tmp_path / "mnt"
    root.mkdir()
    with image.open("wb") as f:
        f.truncate(32 * 1024 * 1024)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)], check=True, capture_output=True)
    subprocess.run(["mount", "-o", "loop,errors=remount-ro", str(image), str(root)], check=True)
    try:
        source = subprocess.run(
            ["findmnt", "-n", "-o", "SOURCE", str(root)], check=True, capture_output=True, text=True
        ).stdout.strip()
        yield Ext4(root, Path(source).name)
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)  # the loop device goes with it


@pytest.fixture
def on_ext4(ext4: Ext4) -> Iterator[tuple[GatewayProcess, Ext4]]:
    gw = GatewayProcess(ext4.root / "data").start()
    try:
        yield gw, ext4
    finally:
        gw.stop()


def refused(r: httpx.Response, root: Path) -> str:
    """The message of a 503 that does not ask to be retried and names no path of the server."""
    assert r.status_code == 503, r.text
    assert "retry-after" not in r.headers, r.headers
    message: str = r.json()["message"]
    assert str(root) not in message and "/" not in message, message
    return message


async def test_a_read_only_data_dir_stops_the_partition_until_a_restart_and_says_so(on_ext4):
    gw, disk = on_ext4
    async with httpx.AsyncClient(base_url=gw.url, timeout=30) as client:
        await create_topic(client, "q")
        await produce(client, "q", [{"value": "before"}], partition=0)
        base = await consumer(client, "readers")
        await subscribe(client, base, "q")
        assert len(await poll_until(client, base, 1)) == 1
        disk.fail()
        for _ in range(2):  # the failed write, then every later one: the same answer
            body = {"records": [{"value": "after"}]}
            r = await client.post("/topics/q/partitions/0", json=body, headers={"Content-Type": STRING})
            message = refused(r, disk.root)
            assert message.startswith("Partition q-0 stopped taking writes after a write that could not"), (
                message
            )
            assert "Read-only file system" in message and "restart the gateway" in message, message
        # Nor can a commit be stored; once its journal is broken, the answer says a restart is needed.
        messages = []
        for _ in range(2):
            r = await client.post(f"{base}/offsets", headers={"Content-Type": V2})
            messages.append(refused(r, disk.root))
        assert "Read-only file system" in messages[0] and "restart the gateway" in messages[1], messages
        # A new topic cannot be made on it either: said, not to be retried, without a path.
        cid = await cluster_id(client)
        r = await client.post(f"/v3/clusters/{cid}/topics", json={"topic_name": "r", "partitions_count": 1})
        assert "Read-only file system" in refused(r, disk.root)
        # What was written before is still served.
        r = await client.get(
            "/topics/q/partitions/0/records", params={"offset": 0}, headers={"Accept": STRING}
        )
        assert r.status_code == 200 and [x["value"] for x in r.json()["records"]] == ["before"], r.text
        # Still ready (reads and the other partitions are served), naming the stopped partition alone.
        stopped = await ready_stopping(client)
        assert list(stopped) == ["q-0"] and "Read-only file system" in stopped["q-0"], stopped


async def ready_stopping(client: httpx.AsyncClient) -> dict[str, str]:
    """The partitions ``/readyz`` says stopped taking writes, once it checked it still answers 200
    and reports nothing else the log cannot serve."""
    r = await client.get("/readyz", params={"backend": "log"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"status", "stopped_partitions", "stopped_partitions_count"}, body
    assert body["status"] == "ready" and body["stopped_partitions_count"] == len(body["stopped_partitions"])
    return dict(body["stopped_partitions"])


async def test_a_segment_roll_on_a_read_only_data_dir_stops_the_partition_as_a_write_does(on_ext4):
    gw, disk = on_ext4
    async with httpx.AsyncClient(base_url=gw.url, timeout=30) as client:
        await create_topic(client, "q")
        await create_topic(client, "s", segment_ms="1")  # its next append rolls a new segment
        await produce(client, "s", [{"value": "before"}], partition=0)
        r = await client.get("/readyz")
        assert r.status_code == 200 and r.json() == {"status": "ready"}, r.text
        disk.fail()
        for _ in range(2):  # the failed roll, then every later write: the same answer
            body = {"records": [{"value": "after"}]}
            r = await client.post("/topics/s/partitions/0", json=body, headers={"Content-Type": STRING})
            message = refused(r, disk.root)
            assert message.startswith("Partition s-0 stopped taking writes after a segment roll that"), (
                message
            )
            assert "Read-only file system" in message and "restart the gateway" in message, message
        stopped = await ready_stopping(client)
        assert list(stopped) == ["s-0"], stopped


async def test_a_full_data_dir_is_a_retry_and_names_no_path(on_ext4):
    gw, disk = on_ext4
    filler = disk.root / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError, match="No space left"):  # every block of the disk taken
            for size in (1 << 20, 4096, 1):
                try:
                    while True:
                        os.write(fd, b"\0" * size)
                except OSError:
                    os.fsync(fd)  # the blocks held back for the writes are taken now
            os.write(fd, b"\0")
    finally:
        os.close(fd)
    async with httpx.AsyncClient(base_url=gw.url, timeout=30) as client:
        cid = await cluster_id(client)
        r = await client.post(f"/v3/clusters/{cid}/topics", json={"topic_name": "r", "partitions_count": 1})
        assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
        message = r.json()["message"]
        assert "No space left on device" in message and str(disk.root) not in message, message
        filler.unlink()
        await create_topic(client, "r")  # the retry, once there is room, succeeds
