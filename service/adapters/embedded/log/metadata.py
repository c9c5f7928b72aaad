"""The embedded log's data directory: layout, topic metadata, crash-safe create and delete.

Layout (everything the log owns; other embedded adapters may share ``data_dir``)::

    data_dir/cluster.json                 {"cluster_id": ...}, written once
    data_dir/topics.lock                  flock()ed while an EmbeddedLog has the dir open
    data_dir/topics.clean                 exists only between a clean stop and the next start
    data_dir/topics/<topic>/topic.json    TopicMeta, replaced atomically
    data_dir/topics/<topic>/<partition>/  segments (see ``segment``)
    data_dir/topics.staging/<uuid hex>    a topic being created, renamed into topics/ when complete
    data_dir/topics.trash/<uuid hex>      a deleted topic, removed right after the rename

A topic appears in ``topics/`` by one rename and leaves by one rename, so a
crash never leaves half a topic; leftovers in staging and trash are removed at
start. (Random names there, not topic names: a 249-character topic name plus a
suffix would exceed the file system's 255-byte limit.)

Everything here is synchronous; ``EmbeddedLog`` calls it from worker threads.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from service.adapters.format_versions import CLUSTER_FORMAT, TOPIC_FORMAT, check_version
from service.core.rules import check_topic
from service.errors import BackendError, InvalidTopic

from ..fileio import atomic_write, ensure_dir, fsync_dir, lock_dir

log = logging.getLogger(__name__)

TOPIC_META = "topic.json"
META_FORMAT = TOPIC_FORMAT


@dataclass(frozen=True, slots=True)
class TopicMeta:
    """What ``topic.json`` holds: the partition count and the configs the topic overrides."""

    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    created_ms: int = 0

    def to_json(self) -> bytes:
        doc = {
            "format": META_FORMAT,
            "name": self.name,
            "partitions": self.partitions,
            "replication_factor": 1,
            "configs": self.configs,
            "created_ms": self.created_ms,
        }
        return json.dumps(doc, indent=2, sort_keys=True).encode() + b"\n"

    @classmethod
    def from_json(cls, raw: bytes, where: str = TOPIC_META) -> TopicMeta:
        doc: dict[str, Any] = json.loads(raw)
        check_version(where, doc.get("format"), META_FORMAT)
        if doc.get("format") != META_FORMAT:
            raise ValueError(f"unknown topic.json format {doc.get('format')!r}")
        partitions = doc["partitions"]
        configs = doc.get("configs", {})
        if not isinstance(partitions, int) or partitions < 1 or not isinstance(configs, dict):
            raise ValueError("malformed topic.json")
        return cls(
            check_topic(doc["name"]),
            partitions,
            {str(k): str(v) for k, v in configs.items()},
            int(doc.get("created_ms", 0)),
        )


def read_topic_meta(topic_dir: Path) -> TopicMeta:
    path = topic_dir / TOPIC_META
    return TopicMeta.from_json(path.read_bytes(), str(path))


Start = Literal["new", "clean", "unclean"]
# What the log says when it has opened the directory, by how the directory was found.
STARTS: Final[dict[Start, str]] = {
    "new": "a new data dir",
    "clean": "stopped cleanly last time",
    "unclean": "not stopped cleanly last time: recovered (each partition's last segment scanned, a torn "
    "write cut off)",
}


class DataDir:
    """Paths and whole-topic file operations under one data directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.topics = root / "topics"
        self.staging = root / "topics.staging"
        self.trash = root / "topics.trash"
        self._lock_path = root / "topics.lock"
        self._clean_path = root / "topics.clean"
        self._lock_fd: int | None = None

    def topic_dir(self, topic: str) -> Path:
        return self.topics / check_topic(topic)

    def partition_dir(self, topic: str, partition: int) -> Path:
        return self.topic_dir(topic) / str(int(partition))

    # --- lifecycle -------------------------------------------------------------------

    def open(self) -> Start:
        """Lock the directory, clear crash leftovers; say whether it is new (no log was ever opened
        in it), or whether the last stop was clean."""
        new = not self.topics.exists()
        for d in (self.root, self.topics, self.staging, self.trash):
            ensure_dir(d)
        try:
            self._lock_fd = lock_dir(self.root, self._lock_path.name, "the log")
        except BlockingIOError as exc:
            raise BackendError(f"The data dir {self.root} is in use by another brokergate process.") from exc
        for leftover in (*self.staging.iterdir(), *self.trash.iterdir()):
            shutil.rmtree(leftover, ignore_errors=True)
        clean = self._clean_path.exists()
        if clean:
            # From here on a crash must count as unclean, so the removal has to be durable.
            self._clean_path.unlink()
            fsync_dir(self.root)
        return "new" if new else "clean" if clean else "unclean"

    def close(self, *, clean: bool) -> None:
        if clean:
            atomic_write(self._clean_path, b"")
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = None

    def cluster_id(self) -> str:
        """The id stored in ``cluster.json``, created (22 url-safe chars, like Kafka's) on first use."""
        path = self.root / "cluster.json"
        try:
            doc = json.loads(path.read_bytes())
            check_version(str(path), doc.get("format", CLUSTER_FORMAT), CLUSTER_FORMAT)
            return str(doc["cluster_id"])
        except FileNotFoundError:
            pass
        self.root.mkdir(parents=True, exist_ok=True)
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        atomic_write(path, json.dumps({"format": CLUSTER_FORMAT, "cluster_id": cid}).encode() + b"\n")
        return cid

    # --- topics ----------------------------------------------------------------------

    def load_topics(self) -> list[TopicMeta]:
        found: list[TopicMeta] = []
        for entry in sorted(self.topics.iterdir()):
            try:
                meta = read_topic_meta(entry)
                if meta.name != entry.name:
                    raise ValueError(f"topic.json names {meta.name!r}")
            except (OSError, ValueError, KeyError, TypeError, InvalidTopic) as exc:
                log.warning("ignoring %s: not a readable topic (%s)", entry, exc)
                continue
            found.append(meta)
        return found

    def create_topic(self, meta: TopicMeta) -> None:
        """Build the topic in staging, then move it into place with one rename."""
        final = self.topic_dir(meta.name)
        if final.exists():
            raise FileExistsError(final)
        staged = self.staging / uuid.uuid4().hex
        staged.mkdir()
        for p in range(meta.partitions):
            (staged / str(p)).mkdir()
        atomic_write(staged / TOPIC_META, meta.to_json())  # also fsyncs the staged dir
        os.rename(staged, final)
        fsync_dir(self.topics)
        fsync_dir(self.staging)

    def grow_topic(self, old: TopicMeta, new: TopicMeta) -> None:
        """Add partition directories, then switch ``topic.json`` to the new count."""
        topic_dir = self.topic_dir(new.name)
        for p in range(old.partitions, new.partitions):
            pdir = topic_dir / str(p)
            shutil.rmtree(pdir, ignore_errors=True)  # left by a crash before topic.json was replaced
            pdir.mkdir()
        fsync_dir(topic_dir)
        atomic_write(topic_dir / TOPIC_META, new.to_json())

    def delete_topic(self, topic: str) -> None:
        """Move the topic to the trash (the durable step), then remove its files."""
        source = self.topic_dir(topic)
        tomb = self.trash / uuid.uuid4().hex
        os.rename(source, tomb)
        fsync_dir(self.topics)
        fsync_dir(self.trash)
        shutil.rmtree(tomb, ignore_errors=True)
