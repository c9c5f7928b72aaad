"""The registry's state machine: Confluent's records in, subjects, versions, ids and settings out.

Records are written with ``records`` (brokergate's writer) or by hand, as Confluent's registry and
Karapace write them; every replica applying the same records holds the same state.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from service.core.schemas import records as rec
from service.core.schemas.model import Compatibility, Schema, SchemaReference, SchemaType
from service.core.schemas.state import LATEST, Mode, Record, RegistryState, Version
from service.errors import (
    OperationNotPermitted,
    ReferenceExists,
    SubjectNotFound,
    SubjectNotSoftDeleted,
    SubjectSoftDeleted,
    VersionNotFound,
    VersionNotSoftDeleted,
    VersionSoftDeleted,
)

A = Schema(SchemaType.AVRO, '{"type":"string"}')
B = Schema(SchemaType.AVRO, '{"type":"int"}')
P = Schema(SchemaType.PROTOBUF, 'syntax = "proto3"; message M { string a = 1; }')


def put(subject: str, version: int, schema_id: int, schema: Schema = A, *, deleted: bool = False) -> Record:
    return rec.schema_key(subject, version), rec.schema_value(
        subject, version, schema_id, schema, deleted=deleted
    )


def raw(key: dict[str, Any], value: dict[str, Any] | None) -> Record:
    """A record as another registry wrote it (its own JSON spelling)."""
    return json.dumps(key).encode(), None if value is None else json.dumps(value).encode()


def state_of(*records: Record) -> RegistryState:
    state = RegistryState()
    for key, value in records:
        assert state.apply(key, value) is None
    return state


# --- the record format -------------------------------------------------------------------


def test_keys_are_written_byte_for_byte_as_confluent_writes_them() -> None:
    assert (
        rec.schema_key("orders-value", 3)
        == b'{"keytype":"SCHEMA","subject":"orders-value","version":3,"magic":1}'
    )
    assert rec.config_key(None) == b'{"keytype":"CONFIG","magic":0}'
    assert rec.config_key("s") == b'{"keytype":"CONFIG","subject":"s","magic":0}'
    assert rec.mode_key("s") == b'{"keytype":"MODE","subject":"s","magic":0}'
    assert rec.delete_subject_key("s") == b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}'


def test_values_leave_out_the_avro_type_and_empty_references() -> None:
    assert json.loads(rec.schema_value("s", 1, 7, A, deleted=False)) == {
        "subject": "s",
        "version": 1,
        "id": 7,
        "schema": '{"type":"string"}',
        "deleted": False,
    }
    ref = Schema(SchemaType.PROTOBUF, "import 'a.proto';", (SchemaReference("a.proto", "a", 2),))
    assert json.loads(rec.schema_value("s", 2, 8, ref, deleted=True)) == {
        "subject": "s",
        "version": 2,
        "id": 8,
        "schemaType": "PROTOBUF",
        "references": [{"name": "a.proto", "subject": "a", "version": 2}],
        "schema": "import 'a.proto';",
        "deleted": True,
    }
    assert json.loads(rec.config_value(None, "FULL")) == {"compatibilityLevel": "FULL"}
    assert json.loads(rec.mode_value("s", "READONLY")) == {"subject": "s", "mode": "READONLY"}


def test_records_of_confluent_and_karapace_are_read() -> None:
    state = state_of(
        raw({"keytype": "NOOP", "magic": 0}, {}),
        raw(
            {"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1},
            {"subject": "s", "version": 1, "id": 5, "schema": '"string"', "deleted": False},
        ),
        # Confluent 8 spells AVRO out and may carry fields brokergate has no use for
        raw(
            {"keytype": "SCHEMA", "subject": "s", "version": 2, "magic": 1},
            {
                "subject": "s",
                "version": 2,
                "id": 6,
                "schemaType": "AVRO",
                "schema": '"int"',
                "md5": "x",
                "ts": 1,
            },
        ),
        # Karapace's global config key carries "subject": null
        raw({"keytype": "CONFIG", "subject": None, "magic": 0}, {"compatibilityLevel": "FULL"}),
        raw({"keytype": "CONFIG", "subject": "s", "magic": 0}, {"compatibilityLevel": "none"}),
        raw({"keytype": "MODE", "magic": 0}, {"mode": "READONLY"}),
    )
    assert [v.schema_id for v in state.versions("s")] == [5, 6]
    assert state.schema(6) == Schema(SchemaType.AVRO, '"int"')
    assert state.compatibility(None) is Compatibility.FULL
    assert state.compatibility("s") is Compatibility.NONE
    assert state.mode(None) is Mode.READONLY
    assert state.max_id == 6


@pytest.mark.parametrize(
    "record",
    [
        (b"not json", b"{}"),
        (None, b"{}"),
        (b"[1]", None),
        raw({"keytype": "SCHEMA", "subject": "s", "version": 0, "magic": 1}, None),
        raw({"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1}, {"id": "7", "schema": "x"}),
        raw({"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1}, {"id": 7}),
        raw(
            {"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1},
            {"id": 7, "schema": "x", "schemaType": "XML"},
        ),
        raw({"keytype": "SCHEMA", "subject": 3, "version": 1, "magic": 1}, {"id": 7, "schema": "x"}),
        raw({"keytype": "CONFIG", "magic": 0}, {"compatibilityLevel": "SOMETIMES"}),
        raw({"keytype": "MODE", "magic": 0}, {"mode": "SLEEPY"}),
        raw({"keytype": "WHATEVER", "magic": 0}, {}),
    ],
)
def test_what_is_not_a_registry_record_is_ignored_and_said(record: Record) -> None:
    state = state_of(put("s", 1, 1))
    assert state.apply(*record) is not None
    assert [v.schema_id for v in state.versions("s")] == [1]
    assert state.compatibility(None) is None and state.mode(None) is None


# --- subjects, versions, ids ---------------------------------------------------------------


def test_versions_and_ids() -> None:
    state = state_of(put("a", 1, 1, A), put("a", 2, 2, B), put("b", 1, 2, B))
    assert state.subjects() == ["a", "b"]
    assert state.subjects(prefix="b") == ["b"]
    assert state.versions("a") == [Version("a", 1, 1, False), Version("a", 2, 2, False)]
    assert state.version("a", LATEST) == Version("a", 2, 2, False)
    assert state.uses(2) == [Version("a", 2, 2, False), Version("b", 1, 2, False)]
    assert state.id_of(B) == 2 and state.id_of(P) is None
    assert state.next_version("a") == 3 and state.next_version("new") == 1
    assert (state.max_id, state.schema_count, state.subject_count) == (2, 2, 2)


def test_an_id_names_one_schema_for_good() -> None:
    state = state_of(put("a", 1, 1, A))
    assert state.apply(*put("b", 1, 1, B)) == "schema id 1 already names another schema"
    assert state.versions("b") == [] and state.schema(1) == A


def test_soft_deletes_keep_the_id_hard_deletes_forget_it() -> None:
    state = state_of(put("a", 1, 1, A), put("a", 2, 2, B), put("a", 1, 1, A, deleted=True))
    assert [v.version for v in state.versions("a")] == [2]
    assert [v.version for v in state.versions("a", deleted=True)] == [1, 2]
    assert [v.version for v in state.versions("a", deleted_only=True)] == [1]
    assert state.version("a", 1) is None and state.version("a", 1, deleted=True) is not None
    assert state.schema(1) == A  # a soft-deleted version keeps its schema readable by id
    state.apply(rec.delete_subject_key("a"), rec.delete_subject_value("a", 2))
    assert state.subjects() == [] and state.subjects(deleted=True) == ["a"]
    assert state.subjects(deleted_only=True) == ["a"]
    assert state.version("a", LATEST) is None
    state.apply(rec.schema_key("a", 1), None)
    assert state.schema(1) is None and state.uses(1) == []
    assert state.max_id == 2  # never handed out again
    state.apply(rec.schema_key("a", 2), None)
    assert state.subjects(deleted=True) == [] and state.total_bytes == 0


def test_clear_subject_forgets_it() -> None:
    state = state_of(
        put("a", 1, 1), raw({"keytype": "CLEAR_SUBJECT", "subject": "a", "magic": 0}, {"subject": "a"})
    )
    assert state.subjects(deleted=True) == [] and state.schema(1) is None


def test_references_and_referenced_by() -> None:
    ref = Schema(
        SchemaType.AVRO,
        '{"type":"record","name":"R","fields":[{"name":"x","type":"n.T"}]}',
        (SchemaReference("n.T", "t", 1),),
    )
    state = state_of(put("t", 1, 1, A), put("r", 1, 2, ref), put("other", 1, 2, ref, deleted=True))
    assert state.referenced_by("t", 1) == [2]
    state.apply(*put("r", 1, 2, ref, deleted=True))
    assert state.referenced_by("t", 1) == []  # no live version of schema 2 left
    assert state.referenced_by("t", 1, deleted=True) == [2]
    state.apply(rec.schema_key("r", 1), None)
    state.apply(rec.schema_key("other", 1), None)
    assert state.referenced_by("t", 1, deleted=True) == []


def test_settings_and_their_scope() -> None:
    state = state_of(
        (rec.config_key("s"), rec.config_value("s", "FULL")),
        (rec.mode_key("s"), rec.mode_value("s", "READONLY")),
    )
    assert state.compatibility_in_scope("s", Compatibility.BACKWARD) is Compatibility.FULL
    assert state.compatibility_in_scope("t", Compatibility.BACKWARD) is Compatibility.BACKWARD
    assert (state.mode_in_scope("s"), state.mode_in_scope("t")) == (Mode.READONLY, Mode.READWRITE)
    state.apply(rec.config_key(None), rec.config_value(None, "NONE"))
    state.apply(rec.mode_key(None), rec.mode_value(None, "READONLY_OVERRIDE"))
    assert state.compatibility_in_scope("t", Compatibility.BACKWARD) is Compatibility.NONE
    state.apply(rec.mode_key("t"), rec.mode_value("t", "READWRITE"))
    assert state.mode_in_scope("t") is Mode.READONLY_OVERRIDE  # the override beats a subject's own
    state.apply(rec.config_key("s"), None)
    state.apply(rec.mode_key(None), None)
    assert state.compatibility("s") is None and state.mode(None) is None
    assert state.mode_in_scope("t") is Mode.READWRITE


# --- changes: checked as Confluent checks them, written as its records ----------------------


def applied(state: RegistryState, records: list[Record]) -> RegistryState:
    for key, value in records:
        assert state.apply(key, value) is None
    return state


def test_deleting_a_subject_soft_then_hard() -> None:
    state = state_of(
        put("s", 1, 1, A), put("s", 2, 2, B), (rec.config_key("s"), rec.config_value("s", "NONE"))
    )
    with pytest.raises(SubjectNotFound):
        state.plan_delete_subject("nope", permanent=False)
    with pytest.raises(SubjectNotSoftDeleted):
        state.plan_delete_subject("s", permanent=True)
    out, versions = state.plan_delete_subject("s", permanent=False)
    assert versions == [1, 2]
    assert out == [(rec.delete_subject_key("s"), rec.delete_subject_value("s", 2))]
    applied(state, out)
    with pytest.raises(SubjectSoftDeleted):
        state.plan_delete_subject("s", permanent=False)
    out, versions = state.plan_delete_subject("s", permanent=True)
    assert versions == [1, 2]
    # tombstones, latest first, then the subject's settings
    assert out == [
        (rec.schema_key("s", 2), None),
        (rec.schema_key("s", 1), None),
        (rec.config_key("s"), None),
    ]
    applied(state, out)
    assert state.subjects(deleted=True) == [] and state.schema_count == 0 and state.compatibility("s") is None


def test_deleting_a_version_soft_then_hard() -> None:
    state = state_of(put("s", 1, 1, A), put("s", 2, 2, B))
    with pytest.raises(VersionNotFound):
        state.plan_delete_version("s", 3, permanent=False)
    with pytest.raises(SubjectNotFound):
        state.plan_delete_version("t", 1, permanent=False)
    with pytest.raises(VersionNotSoftDeleted):
        state.plan_delete_version("s", 2, permanent=True)
    out, number = state.plan_delete_version("s", LATEST, permanent=False)
    assert number == 2 and out == [put("s", 2, 2, B, deleted=True)]
    applied(state, out)
    with pytest.raises(VersionSoftDeleted):
        state.plan_delete_version("s", 2, permanent=False)
    out, number = state.plan_delete_version("s", 2, permanent=True)
    assert out == [(rec.schema_key("s", 2), None)]
    applied(state, out)
    assert [v.version for v in state.versions("s", deleted=True)] == [1]
    assert state.next_version("s") == 2  # a hard-deleted version number is free again, as in Confluent


def test_a_referenced_version_cannot_be_deleted() -> None:
    ref = Schema(SchemaType.AVRO, '"r"', (SchemaReference("t", "t", 1),))
    state = state_of(put("t", 1, 1, A), put("r", 1, 2, ref))
    with pytest.raises(ReferenceExists):
        state.plan_delete_version("t", 1, permanent=False)
    with pytest.raises(ReferenceExists):
        state.plan_delete_subject("t", permanent=False)
    applied(state, state.plan_delete_subject("r", permanent=False)[0])
    # soft-deleted referrers stop a soft delete no more, but still stop a hard one
    applied(state, state.plan_delete_subject("t", permanent=False)[0])
    with pytest.raises(ReferenceExists):
        state.plan_delete_subject("t", permanent=True)


def test_read_only_refuses_writes_but_mode_changes() -> None:
    state = state_of(put("s", 1, 1), (rec.mode_key(None), rec.mode_value(None, "READONLY")))
    for plan in (
        lambda: state.plan_delete_subject("s", permanent=False),
        lambda: state.plan_delete_version("s", 1, permanent=False),
        lambda: state.plan_set_config("s", Compatibility.FULL),
        lambda: state.plan_set_config(None, Compatibility.FULL),
        lambda: state.check_writable("s"),
    ):
        with pytest.raises(OperationNotPermitted, match="read-only"):
            plan()
    applied(state, state.plan_set_mode(None, Mode.READWRITE))
    state.check_writable("s")


def test_deleting_settings() -> None:
    state = state_of((rec.mode_key("s"), rec.mode_value("s", "READONLY")))
    with pytest.raises(SubjectNotFound):
        state.plan_delete_config("s")
    assert state.plan_delete_config(None) == ([], None)  # nothing set: the default stays
    out, mode = state.plan_delete_mode("s")
    assert mode is Mode.READONLY and out == [(rec.mode_key("s"), None)]
    with pytest.raises(SubjectNotFound):
        applied(state, out).plan_delete_mode("s")
