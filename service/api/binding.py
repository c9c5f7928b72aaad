"""A control body bound as Confluent's proxy binds it: the ``Jackson`` dialect of ``bodies``.

Confluent's proxy reads a consumer request with Jackson (rest-utils' JacksonMessageBodyProvider).
Text that is not JSON is a ``JsonParseException``, a value of the wrong JSON type (a list where an
object goes, a string where a list goes, an integer field given ``"abc"``) a
``JsonMappingException``: rest-utils' JsonParseExceptionMapper and JsonMappingExceptionMapper
answer both 400 with error code 400; a name the request class has no field for is its 422 with
error code 422 (``Unrecognized field: x``), as is a value that breaks a constraint of the class
(bean validation, or the gateway's bounds). What binds but is refused afterwards keeps its own answer:
a value the request class refuses as it is built (``refusals``: a consumer's ``format``), what the
consumer manager refuses (the routes' codes), and what the gateway checks itself (42206, 42204).

Jackson also takes what pydantic would not: a number or a boolean where a string goes is its
text, a null the field left out. The body is bound once more with those values as Jackson reads
them before anything is refused.

Collaborators: ``bodies`` reads the body (size limit, Content-Type, depth);
``service.wire.records.json_kind`` names a JSON value as the produce routes do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar, get_args

from fastapi import Request
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from service.errors import BadRequest, GatewayError, Unprocessable
from service.wire.records import json_kind

from .bodies import check_control_type, loads

__all__ = ["JACKSON", "Jackson", "Refusals"]

M = TypeVar("M", bound=BaseModel)

# What a request class refuses as Jackson builds it, by the body's field: the error for a value of
# the right JSON type that the class does not take.
Refusals = Mapping[str, Callable[[Any], GatewayError]]

# pydantic's errors for a value of the wrong JSON type: where Jackson's binding fails, and what the
# field is, for the message.
_WRONG_TYPE: Mapping[str, str] = {
    "model_type": "a JSON object",
    "model_attributes_type": "a JSON object",
    "dict_type": "a JSON object",
    "list_type": "a list",
    "tuple_type": "a list",
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "a boolean",
    "bool_parsing": "a boolean",
    "datetime_type": "an ISO 8601 timestamp",
    "datetime_parsing": "an ISO 8601 timestamp",
    "datetime_from_date_parsing": "an ISO 8601 timestamp",
}
# A field validator's own words for a value that is no integer (api_schemas.v2's ``_int_like``).
_NOT_AN_INTEGER = "must be an integer"


@dataclass(frozen=True, slots=True)
class Jackson:
    """The dialect (``bodies.Dialect``) of Confluent's proxy's routes, as the module doc says.

    ``refusals``: what the request class refuses as it is built, by field. ``aliases``: names
    Confluent's class takes for a field of the model's (its ``@JsonAlias``), the alias's value
    winning. ``creator_requires``: the class's creator refuses a required field left out (v3's
    AutoValue builders throw), which Jackson answers as a binding failure, 400, rather than as a
    constraint violation."""

    refusals: Refusals = field(default_factory=dict)
    aliases: Mapping[str, str] = field(default_factory=dict)
    creator_requires: bool = False

    def check_type(self, request: Request) -> None:
        check_control_type(request)

    def text(self, body: bytes) -> bytes:
        return body

    def loads(self, body: bytes, max_depth: int) -> Any:
        # records=True: text that is not JSON is Jackson's 400, as in a produce body
        return loads(body, records=True, max_depth=max_depth)

    def bind(self, data: Any, model: type[M]) -> M | None:
        if data is None:  # Jackson's null entity
            return None
        if not isinstance(data, dict):
            raise BadRequest(
                f"Cannot deserialize the request body from {json_kind(data)}: it is a JSON object."
            )
        for alias, name in self.aliases.items():
            if alias in data:
                data[name] = data.pop(alias)
        # Jackson fails on a property its class does not have; rest-utils' JacksonMessageBodyProvider
        # answers that as a constraint violation, 422 with error code 422.
        unknown = _unrecognized(model, data)
        if unknown is not None:
            raise Unprocessable(f"Unrecognized field: {unknown}")
        # A null is a field left out: every field of Confluent's request classes is nullable.
        data = {key: value for key, value in data.items() if value is not None}
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            coerced = _as_jackson_reads(data, exc.errors())
            if coerced is None:
                raise _refusal(exc, data, self.refusals, self.creator_requires) from None
        try:
            return model.model_validate(coerced)
        except ValidationError as exc:
            raise _refusal(exc, coerced, self.refusals, self.creator_requires) from None

    def missing(self) -> GatewayError:
        # the resource's @NotNull: a constraint violation, rest-utils' 422 with error code 422
        return Unprocessable("The request body must not be null (was null)")


# The dialect of a route whose request class has no refusals, aliases or required creator fields.
JACKSON: Final = Jackson()


# Confluent's offsets and timestamps carry a "metadata" the gateway takes and does not keep.
_TAKEN_NOT_KEPT: Final = frozenset({"metadata"})


def _unrecognized(model: type[BaseModel], data: Any) -> str | None:
    """The first name in ``data`` (at any depth) that ``model`` has no field for, by the field's
    JSON name; None when there is none."""
    if not isinstance(data, dict):
        return None
    fields = {field.alias or name: field for name, field in model.model_fields.items()}
    for key, value in data.items():
        field = fields.get(key)
        if field is None:
            if key in _TAKEN_NOT_KEPT:
                continue
            return str(key)
        for inner in _models_in(field.annotation):
            for item in value if isinstance(value, list) else [value]:
                found = _unrecognized(inner, item)
                if found is not None:
                    return found
    return None


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models a field's type holds (``list[TopicPartitionRef] | None``: ``TopicPartitionRef``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in get_args(annotation) for model in _models_in(arg)]


def _as_jackson_reads(data: dict[str, Any], errors: list[ErrorDetails]) -> dict[str, Any] | None:
    """``data`` with each number or boolean a string field refused as Jackson reads it (its text),
    or None when there is none."""
    changed = False
    for err in errors:
        value = err["input"]
        if err["type"] != "string_type" or type(value) not in (int, bool) or _path(err) != err["loc"]:
            continue  # a member of a union, as for ``int | str``, is no string field
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        changed = _set(data, _path(err), text) or changed
    return data if changed else None


def _wrong_type(err: ErrorDetails) -> bool:
    """Whether pydantic refused a value for its JSON type, where Jackson's binding fails too."""
    if err["type"] == "value_error":
        return _NOT_AN_INTEGER in err["msg"]
    return err["type"] in _WRONG_TYPE


def _set(data: Any, path: tuple[str | int, ...], value: Any) -> bool:
    for step in path[:-1]:
        try:
            data = data[step]
        except (KeyError, IndexError, TypeError):
            return False
    if not path or not isinstance(data, dict | list):
        return False
    container: Any = data
    try:
        container[path[-1]] = value
    except (IndexError, TypeError):
        return False
    return True


def _path(err: ErrorDetails) -> tuple[str | int, ...]:
    """The place in the body an error is about, without the union member pydantic adds."""
    loc = err["loc"]
    if len(loc) > 1 and isinstance(loc[-1], str) and ("[" in loc[-1] or loc[-1] in _UNION_MEMBERS):
        loc = loc[:-1]
    return tuple(loc)


_UNION_MEMBERS = frozenset({"int", "str", "bool", "datetime", "float", "list", "dict", "none"})


def _where(path: tuple[str | int, ...]) -> str:
    """A place in the body as the produce routes name it: ``'topics'``, ``offsets[0].partition``."""
    if len(path) == 1 and isinstance(path[0], str):
        return f"'{path[0]}'"
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text or "the request body"


def _refusal(
    exc: ValidationError, data: dict[str, Any], refusals: Refusals, creator_requires: bool = False
) -> GatewayError:
    """What Confluent's proxy answers for what pydantic refused in ``data``: Jackson's 400 for a
    value of the wrong JSON type, first; then the request class's refusal of a value; else the
    gateway's 422."""
    errors = exc.errors()
    # A value of a union type (``int | str``) is of the wrong JSON type when every member refuses it so.
    wrong = {_path(err) for err in errors if _wrong_type(err)}
    wrong -= {_path(err) for err in errors if not _wrong_type(err)}
    for err in errors:
        path = _path(err)
        field = path[0] if path else None
        value = err["input"]
        if isinstance(field, str) and field in refusals and len(path) == 1:
            if not isinstance(value, dict | list):
                continue  # a value of a type Jackson binds: the class refuses it, below
        elif path not in wrong:
            continue
        expected = _expected(errors, path)
        if isinstance(field, str) and field in refusals:
            expected = "a string"
        return BadRequest(f"Cannot deserialize {_where(path)} from {json_kind(value)}: it is {expected}.")
    for err in errors:
        path = _path(err)
        if len(path) == 1 and isinstance(path[0], str) and path[0] in refusals:
            return refusals[path[0]](data.get(path[0]))
    if creator_requires:
        for err in errors:
            if err["type"] == "missing":
                return BadRequest(f"Cannot construct the request: {_where(_path(err))} is null.")
    # What binds and breaks a constraint (bean validation's @PositiveOrZero, @NotEmpty, or the
    # gateway's bounds): rest-utils' ConstraintViolationExceptionMapper, 422 with error code 422,
    # each violation as ConstraintViolations.format writes it.
    return Unprocessable("; ".join(_violation(err) for err in errors[:5]))


def _expected(errors: list[ErrorDetails], path: tuple[str | int, ...]) -> str:
    """What the value at ``path`` may be, by each member of its type that refused it: a seek's
    ``timestamp`` is "an integer or an ISO 8601 timestamp", not the first member alone."""
    kinds = dict.fromkeys(_WRONG_TYPE.get(err["type"], "an integer") for err in errors if _path(err) == path)
    return " or ".join(kinds)


def _violation(err: ErrorDetails) -> str:
    """A constraint pydantic found broken, as ``ConstraintViolations.format``: the property's path,
    what it must be, and the value it was."""
    ctx = err.get("ctx") or {}
    path = _where(_path(err)).strip("'")
    if err["type"] == "missing":
        return f"{path} must not be null (was null)"
    bounds = {"greater_than_equal": "greater than or equal to", "less_than_equal": "less than or equal to"}
    if err["type"] in bounds:
        bound = ctx.get("ge", ctx.get("le"))
        return f"{path} must be {bounds[err['type']]} {bound} (was {err['input']})"
    return f"{path} {err['msg'][:1].lower()}{err['msg'][1:]} (was {str(err['input'])[:100]})"
