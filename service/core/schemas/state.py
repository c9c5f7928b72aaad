"""The registry's state: what the records of its topic add up to, and the records a change needs.

``RegistryState.apply`` takes the records of the topic in order (``records`` says what each
means) and keeps what a registry answers from: the versions of each subject and whether each is
soft-deleted, the schema of each id and which versions use it, the compatibility levels and
modes, and which schemas reference which versions. Every replica that applies the same records
holds the same state, which is how replicas agree.

A schema id names one schema for good: a SCHEMA record that gives a known id another schema is
ignored, as Confluent's registry ignores it (it can only come from two writers racing outside
the lock). An id is forgotten once no version uses it (hard deletes), and the highest id ever
seen is remembered, so a new id is ``max_id + 1``.

The ``plan_*`` methods decide the changes that need nothing but the state (deletes, configs,
modes): they check them as Confluent's registry does, raising its errors, and return the records
to append. Registration, which parses schemas, is decided by the registry with the queries here.
Nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from service.errors import (
    InvalidSubject,
    OperationNotPermitted,
    ReferenceExists,
    SubjectNotFound,
    SubjectNotSoftDeleted,
    SubjectSoftDeleted,
    VersionNotFound,
    VersionNotSoftDeleted,
    VersionSoftDeleted,
)

from .. import rules
from . import records as rec
from .model import Compatibility, Schema

Record = tuple[bytes, bytes | None]  # a key and its value (None: a tombstone)

LATEST: Final = -1


class Mode(StrEnum):
    """Confluent's registry modes; brokergate sets READWRITE and READONLY, and honours the others
    it reads (every one but READWRITE refuses writes, as there is no import here)."""

    READWRITE = "READWRITE"
    READONLY = "READONLY"
    READONLY_OVERRIDE = "READONLY_OVERRIDE"
    IMPORT = "IMPORT"
    FORWARD = "FORWARD"


SETTABLE_MODES: Final = frozenset({Mode.READWRITE, Mode.READONLY})


@dataclass(frozen=True, slots=True)
class Version:
    subject: str
    version: int
    schema_id: int
    deleted: bool


@dataclass(slots=True)
class _Stored:
    """A schema id: its schema and the versions that use it."""

    schema: Schema
    size: int  # bytes of its text, for the limits
    users: set[tuple[str, int]] = field(default_factory=set)


class RegistryState:
    """Subjects, versions, schemas by id, configs and modes, as of the last record applied."""

    def __init__(self) -> None:
        self._subjects: dict[str, dict[int, Version]] = {}
        self._schemas: dict[int, _Stored] = {}
        self._by_schema: dict[Schema, int] = {}
        self._referrers: dict[tuple[str, int], set[int]] = {}
        self._configs: dict[str | None, Compatibility] = {}
        self._modes: dict[str | None, Mode] = {}
        self.max_id = 0
        self.total_bytes = 0  # the texts of every schema id

    # --- records in ---------------------------------------------------------------------

    def apply(self, key: bytes | None, value: bytes | None) -> str | None:
        """Apply one record of the topic; why it was ignored, or None when it was applied (or
        is one that carries nothing for brokergate)."""
        try:
            event = rec.decode(key, value)
        except rec.MalformedRecord as exc:
            return f"not a registry record: {exc}"
        match event:
            case rec.SchemaPut():
                return self._put(event)
            case rec.SchemaTombstone(subject, version):
                self._drop(subject, version)
            case rec.DeleteSubject(subject, version):
                for old in list(self._subjects.get(subject, {}).values()):
                    if old.version <= version and not old.deleted:
                        self._subjects[subject][old.version] = Version(
                            subject, old.version, old.schema_id, True
                        )
            case rec.ClearSubject(subject):
                for number in list(self._subjects.get(subject, {})):
                    self._drop(subject, number)
            case rec.ConfigPut(subject, level):
                if level is None:
                    self._configs.pop(subject, None)
                elif level not in Compatibility.__members__:
                    return f"unknown compatibility level {level!r}"
                else:
                    self._configs[subject] = Compatibility(level)
            case rec.ConfigTombstone(subject):
                self._configs.pop(subject, None)
            case rec.ModePut(subject, mode):
                if mode not in Mode.__members__:
                    return f"unknown mode {mode!r}"
                self._modes[subject] = Mode(mode)
            case rec.ModeTombstone(subject):
                self._modes.pop(subject, None)
            case rec.Skipped(why):
                return why
        return None

    def _put(self, put: rec.SchemaPut) -> str | None:
        stored = self._schemas.get(put.schema_id)
        if stored is not None and stored.schema != put.schema:
            return f"schema id {put.schema_id} already names another schema"
        self._drop(put.subject, put.version)
        stored = self._schemas.get(put.schema_id)  # dropped if that version was its last use
        if stored is None:
            stored = _Stored(put.schema, len(put.schema.text.encode("utf-8", "surrogatepass")))
            self._schemas[put.schema_id] = stored
            self._by_schema.setdefault(put.schema, put.schema_id)
            self.total_bytes += stored.size
            for ref in put.schema.references:
                self._referrers.setdefault((ref.subject, ref.version), set()).add(put.schema_id)
        stored.users.add((put.subject, put.version))
        self._subjects.setdefault(put.subject, {})[put.version] = Version(
            put.subject, put.version, put.schema_id, put.deleted
        )
        self.max_id = max(self.max_id, put.schema_id)
        return None

    def _drop(self, subject: str, version: int) -> None:
        versions = self._subjects.get(subject)
        old = versions.pop(version, None) if versions is not None else None
        if old is None:
            return
        if not versions:
            del self._subjects[subject]
        stored = self._schemas[old.schema_id]
        stored.users.discard((subject, version))
        if stored.users:
            return
        del self._schemas[old.schema_id]  # no version uses the id any more: it is forgotten
        if self._by_schema.get(stored.schema) == old.schema_id:
            del self._by_schema[stored.schema]
        self.total_bytes -= stored.size
        for ref in stored.schema.references:
            referrers = self._referrers.get((ref.subject, ref.version))
            if referrers is not None:
                referrers.discard(old.schema_id)
                if not referrers:
                    del self._referrers[(ref.subject, ref.version)]

    # --- queries ------------------------------------------------------------------------

    def subjects(self, *, deleted: bool = False, deleted_only: bool = False, prefix: str = "") -> list[str]:
        """Subject names in order: those with a live version; with ``deleted`` also those whose
        versions are all soft-deleted; with ``deleted_only`` only those."""
        out = []
        for subject, versions in self._subjects.items():
            if not subject.startswith(prefix):
                continue
            live = any(not v.deleted for v in versions.values())
            if (deleted_only and not live) or (not deleted_only and (live or deleted)):
                out.append(subject)
        return sorted(out)

    def has_subject(self, subject: str, *, deleted: bool = False) -> bool:
        versions = self._subjects.get(subject, {})
        return any(deleted or not v.deleted for v in versions.values())

    def versions(self, subject: str, *, deleted: bool = False, deleted_only: bool = False) -> list[Version]:
        """The versions of ``subject`` in order: live ones, with ``deleted`` soft-deleted ones
        too, with ``deleted_only`` only those."""
        versions = self._subjects.get(subject, {})
        return [
            versions[n]
            for n in sorted(versions)
            if (versions[n].deleted if deleted_only else deleted or not versions[n].deleted)
        ]

    def version(self, subject: str, version: int, *, deleted: bool = False) -> Version | None:
        """Version ``version`` of ``subject`` (``LATEST``: the highest live one), if it is live
        or ``deleted`` allows a soft-deleted one."""
        versions = self._subjects.get(subject, {})
        if version == LATEST:
            live = [n for n, v in versions.items() if not v.deleted]
            return versions[max(live)] if live else None
        found = versions.get(version)
        return found if found is not None and (deleted or not found.deleted) else None

    def next_version(self, subject: str) -> int:
        """The version a new registration under ``subject`` gets: one above any it holds."""
        versions = self._subjects.get(subject)
        return max(versions) + 1 if versions else 1

    def schema(self, schema_id: int) -> Schema | None:
        stored = self._schemas.get(schema_id)
        return stored.schema if stored is not None else None

    def schema_ids(self) -> list[int]:
        return list(self._schemas)

    def id_of(self, schema: Schema) -> int | None:
        """The id of exactly this schema (type, text and references), if it has one."""
        return self._by_schema.get(schema)

    def uses(self, schema_id: int, *, deleted: bool = False) -> list[Version]:
        """The versions that are schema ``schema_id``, by subject and version."""
        stored = self._schemas.get(schema_id)
        if stored is None:
            return []
        found = [self._subjects[s][v] for s, v in stored.users]
        return sorted((v for v in found if deleted or not v.deleted), key=lambda v: (v.subject, v.version))

    def referenced_by(self, subject: str, version: int, *, deleted: bool = False) -> list[int]:
        """Ids of the schemas that reference ``version`` of ``subject``, in order; without
        ``deleted``, only those with a live version."""
        ids = self._referrers.get((subject, version), set())
        return sorted(i for i in ids if deleted or self.uses(i))

    def _referring_subjects(self, subject: str, version: int, *, deleted: bool) -> set[str]:
        ids = self._referrers.get((subject, version), set())
        return {v.subject for i in ids for v in self.uses(i, deleted=deleted)}

    def compatibility(self, subject: str | None) -> Compatibility | None:
        """The level configured for ``subject`` (None: the global one), if one is."""
        return self._configs.get(subject)

    def compatibility_in_scope(self, subject: str, default: Compatibility) -> Compatibility:
        return self._configs.get(subject) or self._configs.get(None) or default

    def mode(self, subject: str | None) -> Mode | None:
        """The mode set for ``subject`` (None: the global one), if one is."""
        return self._modes.get(subject)

    def mode_in_scope(self, subject: str | None) -> Mode:
        """The mode that rules ``subject``: a global READONLY_OVERRIDE, else its own, else the global."""
        top = self._modes.get(None, Mode.READWRITE)
        if top is Mode.READONLY_OVERRIDE or subject is None:
            return top
        return self._modes.get(subject, top)

    @property
    def schema_count(self) -> int:
        return len(self._schemas)

    @property
    def subject_count(self) -> int:
        return len(self._subjects)

    def version_count(self, subject: str) -> int:
        return len(self._subjects.get(subject, {}))

    # --- changes: checked, then written as records --------------------------------------

    def check_writable(self, subject: str | None) -> None:
        """Check that the mode ruling ``subject`` allows writes, else ``OperationNotPermitted`` (42205)."""
        mode = self.mode_in_scope(subject)
        if mode is not Mode.READWRITE:
            # Confluent's words: the subject in its context ('.', the default, the only one here)
            kind = "in read-only" if mode in (Mode.READONLY, Mode.READONLY_OVERRIDE) else "not in read-write"
            where = f"Subject {subject} in context ." if subject is not None else "The registry"
            raise OperationNotPermitted(f"{where} is {kind} mode")

    def plan_delete_subject(self, subject: str, *, permanent: bool) -> tuple[list[Record], list[int]]:
        """The records deleting ``subject``, and the versions they delete."""
        if not self.has_subject(subject, deleted=True):
            raise SubjectNotFound(f"Subject '{subject}' not found.")
        if not permanent and not self.has_subject(subject):
            raise SubjectSoftDeleted(
                f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently"
            )
        self.check_writable(subject)
        versions = self.versions(subject, deleted=permanent)
        for v in versions:
            others = self._referring_subjects(subject, v.version, deleted=permanent) - {subject}
            if others:
                raise ReferenceExists(
                    f"One or more references exist to the schema {_schema_key(subject, v.version)}."
                )
            if permanent and not v.deleted:
                raise SubjectNotSoftDeleted(
                    f"Subject '{subject}' was not deleted first before being permanently deleted"
                )
        numbers = [v.version for v in versions]
        if not permanent:
            return [
                (rec.delete_subject_key(subject), rec.delete_subject_value(subject, numbers[-1]))
            ], numbers
        # descending, so that a version is gone before those it references within the subject
        out: list[Record] = [(rec.schema_key(subject, n), None) for n in reversed(numbers)]
        return out + self._forget_settings(subject), numbers

    def plan_delete_version(self, subject: str, version: int, *, permanent: bool) -> tuple[list[Record], int]:
        """The records deleting ``version`` (or ``LATEST``) of ``subject``, and its number."""
        found = self.version(subject, version, deleted=True)
        if found is not None and found.deleted and not permanent:
            raise VersionSoftDeleted(
                f"Subject '{subject}' Version {found.version} was soft deleted."
                "Set permanent=true to delete permanently"
            )
        if found is None:
            if not self.has_subject(subject, deleted=True):
                raise SubjectNotFound(f"Subject '{subject}' not found.")
            raise VersionNotFound(f"Version {version} not found.")
        self.check_writable(subject)
        if self.referenced_by(subject, found.version, deleted=permanent):
            raise ReferenceExists(
                f"One or more references exist to the schema {_schema_key(subject, found.version)}."
            )
        if permanent and not found.deleted:
            raise VersionNotSoftDeleted(
                f"Subject '{subject}' Version {found.version} was not deleted first before being "
                "permanently deleted"
            )
        key = rec.schema_key(subject, found.version)
        if not permanent:
            schema = self._schemas[found.schema_id].schema
            return [(key, rec.schema_value(subject, found.version, found.schema_id, schema, deleted=True))], (
                found.version
            )
        out: list[Record] = [(key, None)]
        if self.version_count(subject) == 1:  # its last version: the subject's settings go with it
            out += self._forget_settings(subject)
        return out, found.version

    def _forget_settings(self, subject: str) -> list[Record]:
        out: list[Record] = []
        if subject in self._modes:
            out.append((rec.mode_key(subject), None))
        if subject in self._configs:
            out.append((rec.config_key(subject), None))
        return out

    def plan_set_config(self, subject: str | None, level: Compatibility) -> list[Record]:
        self.check_writable(subject)
        return [(rec.config_key(subject), rec.config_value(subject, level.value))]

    def plan_delete_config(self, subject: str | None) -> tuple[list[Record], Compatibility | None]:
        """The records removing the level of ``subject`` (or the global one), and that level."""
        level = self._configs.get(subject)
        if subject is not None and level is None:
            raise SubjectNotFound(f"Subject '{subject}' not found.")
        self.check_writable(subject)
        return ([(rec.config_key(subject), None)] if level is not None else []), level

    def plan_set_mode(self, subject: str | None, mode: Mode) -> list[Record]:
        return [(rec.mode_key(subject), rec.mode_value(subject, mode.value))]

    def plan_delete_mode(self, subject: str) -> tuple[list[Record], Mode]:
        mode = self._modes.get(subject)
        if mode is None:
            raise SubjectNotFound(f"Subject '{subject}' not found.")
        return [(rec.mode_key(subject), None)], mode

    def plan_register(self, subject: str, version: int, schema_id: int, schema: Schema) -> list[Record]:
        return [
            (
                rec.schema_key(subject, version),
                rec.schema_value(subject, version, schema_id, schema, deleted=False),
            )
        ]


def _schema_key(subject: str, version: int) -> str:
    """A version's key as Confluent's messages print it (its SchemaKey's ``toString``)."""
    return f"{{magic=1,keytype=SCHEMA,subject={subject},version={version}}}"


def check_subject(subject: str) -> None:
    """``rules.check_subject``, refusing in Confluent's words (42208)."""
    try:
        rules.check_subject(subject)
    except InvalidSubject:
        raise InvalidSubject(f"The specified subject '{subject[:300]}' is not a valid.") from None
