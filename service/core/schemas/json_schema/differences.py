"""The differences Confluent's JSON Schema checker names, which of them keep a schema compatible, and
the message each incompatible one gives.

``compatibility`` finds the differences between the writer's schema (Confluent's "original") and
the reader's ("update") as ``Difference``\\ s: a rule name, as Confluent's ``Difference.Type``
spells it, and the JSON path where it was found (``#/properties/a``). ``COMPATIBLE`` is the set of
rules Confluent's strict (default) policy accepts; any other difference makes the schemas
incompatible. ``message`` words it as Confluent does (``{errorType:"…", description:"…'}``,
Confluent's own spelling), ``%s`` in the places Confluent fills with "new" and "old".
"""

from __future__ import annotations

from typing import Final, NamedTuple

__all__ = ["COMPATIBLE", "Difference", "Diffs", "at", "compatible", "message"]


class Difference(NamedTuple):
    """A rule (Confluent's ``Difference.Type`` name) and where it applied."""

    rule: str
    path: str


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Confluent's COMPATIBLE_CHANGES_STRICT (SchemaDiff.java).
COMPATIBLE: Final = _words(
    """
    ID_CHANGED DESCRIPTION_CHANGED TITLE_CHANGED DEFAULT_CHANGED SCHEMA_REMOVED TYPE_EXTENDED
    MAX_LENGTH_INCREASED MAX_LENGTH_REMOVED MIN_LENGTH_DECREASED MIN_LENGTH_REMOVED PATTERN_REMOVED
    MAXIMUM_INCREASED MAXIMUM_REMOVED MINIMUM_DECREASED MINIMUM_REMOVED EXCLUSIVE_MAXIMUM_INCREASED
    EXCLUSIVE_MAXIMUM_REMOVED EXCLUSIVE_MINIMUM_DECREASED EXCLUSIVE_MINIMUM_REMOVED
    MULTIPLE_OF_REDUCED MULTIPLE_OF_REMOVED
    REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED REQUIRED_ATTRIBUTE_REMOVED DEPENDENCY_ARRAY_NARROWED
    DEPENDENCY_ARRAY_REMOVED DEPENDENCY_SCHEMA_REMOVED MAX_PROPERTIES_INCREASED
    MAX_PROPERTIES_REMOVED MIN_PROPERTIES_DECREASED MIN_PROPERTIES_REMOVED
    ADDITIONAL_PROPERTIES_ADDED ADDITIONAL_PROPERTIES_EXTENDED UNEVALUATED_PROPERTIES_ADDED
    UNEVALUATED_PROPERTIES_EXTENDED PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL
    REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL
    OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL
    PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL
    PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    MAX_ITEMS_INCREASED MAX_ITEMS_REMOVED MIN_ITEMS_DECREASED MIN_ITEMS_REMOVED
    MAX_CONTAINS_INCREASED MAX_CONTAINS_REMOVED MIN_CONTAINS_DECREASED MIN_CONTAINS_REMOVED
    UNIQUE_ITEMS_REMOVED ADDITIONAL_ITEMS_ADDED ADDITIONAL_ITEMS_EXTENDED UNEVALUATED_ITEMS_ADDED
    UNEVALUATED_ITEMS_EXTENDED ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL
    ITEM_ADDED_TO_CLOSED_CONTENT_MODEL ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL
    ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    ENUM_ARRAY_EXTENDED COMBINED_TYPE_EXTENDED PRODUCT_TYPE_NARROWED SUM_TYPE_EXTENDED
    NOT_TYPE_NARROWED
    """
)

# Which description each rule gets (Difference.java groups them so).
_KEYWORD: Final = _words(
    """
    MAXIMUM_ADDED MINIMUM_ADDED EXCLUSIVE_MAXIMUM_ADDED EXCLUSIVE_MINIMUM_ADDED MULTIPLE_OF_ADDED
    MAX_LENGTH_ADDED MIN_LENGTH_ADDED PATTERN_ADDED REQUIRED_ATTRIBUTE_ADDED MAX_PROPERTIES_ADDED
    MIN_PROPERTIES_ADDED DEPENDENCY_ARRAY_ADDED DEPENDENCY_SCHEMA_ADDED MAX_ITEMS_ADDED
    MIN_ITEMS_ADDED MAX_CONTAINS_ADDED MIN_CONTAINS_ADDED UNIQUE_ITEMS_ADDED ADDITIONAL_ITEMS_REMOVED
    ADDITIONAL_PROPERTIES_REMOVED UNEVALUATED_PROPERTIES_REMOVED UNEVALUATED_ITEMS_REMOVED
    """
)
_INCREASED: Final = _words(
    """
    MIN_LENGTH_INCREASED MINIMUM_INCREASED EXCLUSIVE_MINIMUM_INCREASED MIN_PROPERTIES_INCREASED
    MULTIPLE_OF_EXPANDED MIN_ITEMS_INCREASED MIN_CONTAINS_INCREASED
    """
)
_DECREASED: Final = _words(
    """
    MAX_LENGTH_DECREASED MAXIMUM_DECREASED MAX_ITEMS_DECREASED MAX_CONTAINS_DECREASED
    EXCLUSIVE_MAXIMUM_DECREASED MAX_PROPERTIES_DECREASED
    """
)
_CHANGED_VALUE: Final = _words("PATTERN_CHANGED MULTIPLE_OF_CHANGED DEPENDENCY_ARRAY_CHANGED")
_NARROWED: Final = _words(
    """
    ADDITIONAL_ITEMS_NARROWED ENUM_ARRAY_NARROWED SUM_TYPE_NARROWED ADDITIONAL_PROPERTIES_NARROWED
    UNEVALUATED_PROPERTIES_NARROWED UNEVALUATED_ITEMS_NARROWED
    """
)
_EXTENDED: Final = _words(
    "DEPENDENCY_ARRAY_EXTENDED PRODUCT_TYPE_EXTENDED SUM_TYPE_EXTENDED NOT_TYPE_EXTENDED"
)
_CHANGED_TYPE: Final = _words(
    "TYPE_CHANGED TYPE_NARROWED COMBINED_TYPE_CHANGED COMBINED_TYPE_SUBSCHEMAS_CHANGED ENUM_ARRAY_CHANGED"
)
_ADDED_TO_OPEN: Final = _words(
    """
    REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL
    OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL ITEM_ADDED_TO_OPEN_CONTENT_MODEL
    """
)
_GROUPS: Final = (
    (_KEYWORD, "The keyword at path '{path}' in the %s schema is not present in the %s schema"),
    (_INCREASED, "The value at path '{path}' in the %s schema is more than its value in the %s schema"),
    (_DECREASED, "The value at path '{path}' in the %s schema is less than its value in the %s schema"),
    (_CHANGED_VALUE, "The value at path '{path}' is different between the %s and %s schema"),
    (
        _NARROWED,
        "An array or combined type at path '{path}' has fewer elements in the %s schema than the %s schema",
    ),
    (
        _EXTENDED,
        "An array or combined type at path '{path}' has more elements in the %s schema than the %s schema",
    ),
    (_CHANGED_TYPE, "A type at path '{path}' is different between the %s schema and the %s schema"),
    (
        _ADDED_TO_OPEN,
        "The %s schema has an open content model and has a property or item at path '{path}' which is "
        "missing in the %s schema",
    ),
)
_SINGLE: Final = {
    "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL": "The %s schema has an unopen content model and has "
    "a required property at path '{path}' which is missing in the %s schema",
    "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL": "The %s has a closed content model and is missing a "
    "property or item present at path '{path}' in the %s schema",
    "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": "A property or item is missing in the "
    "%s schema but present at path '{path}' in the %s schema and is not covered by its partially open "
    "content model",
    "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": "The %s schema has a property or item "
    "at path '{path}' which is missing in the %s schema and is not covered by its partially open "
    "content model",
}
_SINGLE["ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"] = _SINGLE["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"]
_SINGLE["ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"] = _SINGLE[
    "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
]
_SINGLE["ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"] = _SINGLE[
    "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
]


Diffs = list[Difference]


def compatible(diffs: Diffs) -> bool:
    return all(d.rule in COMPATIBLE for d in diffs)


def at(path: str, diffs: Diffs) -> Diffs:
    """``diffs`` found under ``path`` (relative to it) as paths from the pair's root."""
    if not path:
        return diffs
    return [Difference(d.rule, f"{path}/{d.path}" if d.path else path) for d in diffs]


def message(difference: Difference) -> str:
    """Confluent's text for an incompatible difference, ``%s`` where Confluent writes the roles
    ("new" and "old", or "old" and "new" when it checks that old readers read new data:
    ``model.fill_roles``)."""
    template = _SINGLE.get(difference.rule, "")
    for rules, text in _GROUPS:
        if difference.rule in rules:
            template = text
            break
    description = template.replace("{path}", difference.path)
    return f'{{errorType:"{difference.rule}", description:"{description}\'}}'
