"""``brokergate schemas list|get|register|compat|delete|config``: the schema registry the gateway serves.

``list`` names the subjects (``--prefix``; ``--deleted`` adds the soft-deleted ones and marks
them), ``get`` prints a schema's text as it is stored (by ``--subject`` and ``--version``, latest
by default, or by ``--id``), so that it can be saved and registered again. ``register`` registers
``--schema-file`` under ``--subject`` (``--type``, ``--reference name=subject:version``) and prints
its version and id; ``compat`` asks whether it may follow a version (``--version``; by default
the versions the subject's level compares with, as a registration would) and prints
``compatible``, or ``incompatible`` and the reasons, ending with status 5 then. ``delete``
soft-deletes a subject or one ``--version`` of it, ``--permanent`` removes what was
soft-deleted; ``config`` shows the compatibility level of the registry or of ``--subject`` (the
registry's when the subject has none of its own) and sets it with ``--level``.

``produce`` in a schema format takes its schemas here too: ``record_schemas`` reads the key
and value schema options and refuses the combinations that cannot be meant.

Built on ``GatewayClient``'s registry calls (Confluent's schema-registry API under
``/schema-registry``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from service.cli.common import ToolError, emit
from service.client.gateway_client import LATEST, ClientError, GatewayClient, Version
from service.core.schemas.model import Compatibility, Schema, SchemaReference, SchemaType
from service.errors import RegistryErrorCode

SCHEMA_FORMATS: Final = ("avro", "jsonschema", "protobuf")
INCOMPATIBLE: Final = 5  # the exit status of a compat check that says no


# --- what the flags take ----------------------------------------------------------------


def version(text: str) -> Version:
    """A version as the registry names one: a number from 1, or ``latest``."""
    if text.strip().lower() == LATEST:
        return LATEST
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"a version is a number from 1 or 'latest', not {text!r}")
    return number


def schema_id(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(f"a schema id is a number from 0, not {text!r}")
    return number


def reference(text: str) -> SchemaReference:
    """``name=subject:version``: the name the schema imports it by, and the version of a subject
    that is its schema (``latest`` is the latest one, made a number by the registry)."""
    name, sep, target = text.partition("=")
    subject, colon, number = target.rpartition(":")
    if not (name and sep and subject and colon and number):
        raise argparse.ArgumentTypeError(f"a reference is name=subject:version, not {text!r}")
    found = version(number)
    return SchemaReference(name, subject, -1 if found == LATEST else found)


def read_schema(path: str, flag: str) -> str:
    """The text of a schema file, or a ``ToolError`` (status 2) saying why there is none."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeError) as exc:
        raise ToolError(f"cannot read {flag} {path!r}: {getattr(exc, 'strerror', None) or exc}", 2) from exc
    if not text.strip():
        raise ToolError(f"{flag} {path!r} is empty", 2)
    return text.strip()  # whitespace around the schema means nothing in any of the three formats


def schema_of(args: argparse.Namespace) -> Schema:
    return Schema(
        SchemaType(args.type), read_schema(args.schema_file, "--schema-file"), tuple(args.reference)
    )


# --- produce's schemas --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordSchemas:
    """What a produce in a schema format sends: each schema's text, or the id of a registered one;
    no key schema when the records have no key."""

    key: str | int | None
    value: str | int


def record_schemas(args: argparse.Namespace) -> RecordSchemas | None:
    """The schemas ``produce``'s options give (None for a format without schemas); a
    ``ToolError`` (status 2) for options that contradict each other or the format."""
    given = [
        f"--{side}-schema-{kind}"
        for side in ("key", "value")
        for kind in ("file", "id")
        if getattr(args, f"{side}_schema_{kind}") is not None
    ]
    if args.format not in SCHEMA_FORMATS:
        if given:
            raise ToolError(
                f"{given[0]} goes with --format avro, jsonschema or protobuf, not {args.format}", 2
            )
        return None
    value = _one_schema(args, "value")
    if value is None:
        raise ToolError(f"--format {args.format} needs --value-schema-file or --value-schema-id", 2)
    key = _one_schema(args, "key")
    if key is not None and args.key_separator is None:
        raise ToolError("a key schema goes with --key-separator: without it the records have no key", 2)
    if key is None and args.key_separator is not None:
        raise ToolError(
            f"--format {args.format} with --key-separator needs --key-schema-file or --key-schema-id", 2
        )
    return RecordSchemas(key, value)


def _one_schema(args: argparse.Namespace, side: str) -> str | int | None:
    path: str | None = getattr(args, f"{side}_schema_file")
    number: int | None = getattr(args, f"{side}_schema_id")
    if path is not None and number is not None:
        raise ToolError(f"give the {side} schema once: --{side}-schema-file or --{side}-schema-id", 2)
    return read_schema(path, f"--{side}-schema-file") if path is not None else number


# --- the commands ---------------------------------------------------------------------------


def _list(args: argparse.Namespace, client: GatewayClient) -> int:
    subjects = client.subjects(prefix=args.prefix, deleted=args.deleted)
    if not args.deleted:
        emit(args, subjects, [[s] for s in subjects], ["SUBJECT"])
        return 0
    deleted = set(client.subjects(prefix=args.prefix, deleted_only=True))
    emit(args, subjects, [[s, "yes" if s in deleted else "no"] for s in subjects], ["SUBJECT", "DELETED"])
    return 0


def _get(args: argparse.Namespace, client: GatewayClient) -> int:
    if args.id is not None and (args.subject is not None or args.version is not None):
        raise ToolError("schemas get takes --subject (and --version) or --id, not both", 2)
    if args.id is None and args.subject is None:
        raise ToolError("schemas get needs --subject (and --version) or --id", 2)
    if args.id is not None:
        found = {"id": args.id, **client.schema_by_id(args.id)}
    else:
        found = client.subject_version(args.subject, args.version or LATEST, deleted=args.deleted)
    if args.output == "json":
        emit(args, found, [], [])
    else:
        text = str(found["schema"])
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def _register(args: argparse.Namespace, client: GatewayClient) -> int:
    schema = schema_of(args)
    registered = client.register_schema(args.subject, schema)
    # The answer is the id only; the version it is (new, or the one it was already) is a lookup's.
    found = client.lookup_schema(args.subject, schema)
    out = {"subject": args.subject, "version": found["version"], "id": registered}
    emit(args, out, [[args.subject, found["version"], registered]], ["SUBJECT", "VERSION", "ID"])
    return 0


def _compat(args: argparse.Namespace, client: GatewayClient) -> int:
    compatible, reasons = client.check_compatibility(args.subject, schema_of(args), args.version)
    if args.output == "json":
        emit(
            args,
            {
                "subject": args.subject,
                "version": args.version,
                "is_compatible": compatible,
                "messages": reasons,
            },
            [],
            [],
        )
    else:
        print("compatible" if compatible else "incompatible")
        for reason in reasons:
            print(f"  {reason}")
    if compatible:
        return 0
    if args.version is None:
        against = f"subject {args.subject!r}"
    elif args.version == LATEST:
        against = f"the latest version of subject {args.subject!r}"
    else:
        against = f"version {args.version} of subject {args.subject!r}"
    raise ToolError(f"the schema is not compatible with {against}", INCOMPATIBLE)


def _delete(args: argparse.Namespace, client: GatewayClient) -> int:
    if args.version is None:
        versions = client.delete_subject(args.subject, permanent=args.permanent)
    else:
        versions = [client.delete_subject_version(args.subject, args.version, permanent=args.permanent)]
    status = "permanently deleted" if args.permanent else "soft-deleted"
    emit(
        args,
        {"subject": args.subject, "versions": versions, "permanent": args.permanent},
        [[args.subject, v, status] for v in versions],
        ["SUBJECT", "VERSION", "STATUS"],
    )
    return 0


def _config(args: argparse.Namespace, client: GatewayClient) -> int:
    subject: str | None = args.subject
    source = "global" if subject is None else "subject"
    if args.level is not None:
        level = client.set_compatibility(args.level, subject)
    else:
        try:
            level = client.compatibility(subject)
        except ClientError as exc:
            if exc.error_code != RegistryErrorCode.SUBJECT_COMPATIBILITY_NOT_CONFIGURED:
                raise
            level, source = client.compatibility(subject, default_to_global=True), "global"
    emit(
        args,
        {"subject": subject, "compatibilityLevel": level, "source": source},
        [[subject or "-", level, source]],
        ["SUBJECT", "COMPATIBILITY", "SOURCE"],
    )
    return 0


ACTIONS: Final[dict[str, Callable[[argparse.Namespace, GatewayClient], int]]] = {
    "list": _list,
    "get": _get,
    "register": _register,
    "compat": _compat,
    "delete": _delete,
    "config": _config,
}


def cmd_schemas(args: argparse.Namespace, client: GatewayClient) -> int:
    return ACTIONS[args.action](args, client)


# --- wiring ---------------------------------------------------------------------------------


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    schemas = sub.add_parser(
        "schemas",
        help="list, get, register, check and delete schemas of the gateway's schema registry",
        description="The schema registry the gateway serves (Confluent's API under /schema-registry): "
        "subjects, their versions and schemas, compatibility checks and levels.",
    )
    actions = schemas.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, summary: str) -> argparse.ArgumentParser:
        parser = actions.add_parser(name, parents=[common], help=summary, description=summary)
        parser.set_defaults(run=cmd_schemas)
        return parser

    listing = action("list", "list the subjects")
    listing.add_argument("--prefix", default="", help="only the subjects that start so")
    listing.add_argument("--deleted", action="store_true", help="soft-deleted subjects too (marked so)")

    get = action("get", "print a schema's text: a version of a subject, or the schema with an id")
    get.add_argument("--subject")
    get.add_argument("--version", type=version, help="a number or latest (the default)")
    get.add_argument("--id", type=schema_id, help="the schema with this id (instead of --subject)")
    get.add_argument("--deleted", action="store_true", help="a soft-deleted version too")

    for name, summary in (
        ("register", "register a schema under a subject; print its version and id"),
        (
            "compat",
            "whether a schema may follow a subject's versions: compatible, or why not (status 5)",
        ),
    ):
        parser = action(name, summary)
        parser.add_argument("--subject", required=True)
        parser.add_argument("--schema-file", required=True, metavar="FILE", help="the schema's text")
        parser.add_argument(
            "--type",
            type=str.upper,
            choices=[t.value for t in SchemaType],
            default=SchemaType.AVRO.value,
            help="the schema's type (default AVRO)",
        )
        parser.add_argument(
            "--reference",
            action="append",
            default=[],
            type=reference,
            metavar="NAME=SUBJECT:VERSION",
            help="a schema it imports, by the name it imports it by (repeatable; VERSION may be latest)",
        )
        if name == "compat":
            parser.add_argument(
                "--version",
                type=version,
                help="check against this version (a number or latest); default: the versions the "
                "subject's compatibility level compares with, as registering would",
            )

    delete = action("delete", "soft-delete a subject or one of its versions; --permanent removes them")
    delete.add_argument("--subject", required=True)
    delete.add_argument("--version", type=version, help="only this version (a number or latest)")
    delete.add_argument(
        "--permanent", action="store_true", help="remove what was soft-deleted before (it cannot be undone)"
    )

    config = action("config", "show or set the compatibility level, of the registry or of a subject")
    config.add_argument("--subject", help="the subject's level (the registry's when it has none of its own)")
    config.add_argument(
        "--level",
        type=str.upper,
        choices=[c.value for c in Compatibility],
        help="set this level",
    )
