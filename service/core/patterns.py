"""Topic patterns: which topics a ``topic_pattern`` subscription covers.

A pattern matches a topic name in full, as Kafka's Java client does with
``Pattern.matcher(topic).matches()``. Patterns come from users and are re-run
by every rebalance and by the metadata watcher over every group, so they are
matched with RE2 (``google-re2``), whose time is linear in the topic name's
length whatever the pattern: a pattern such as ``(a+)+$``, which makes a
backtracking engine like Python's ``re`` take exponential time, cannot stall
the gateway. RE2 has no backreferences, lookarounds, atomic groups or
possessive quantifiers; a pattern using them is refused at subscribe time with
a message naming the construct.

Compiled patterns and (pattern, topic) answers are kept in bounded caches, so
the watcher's refresh over many groups and topics costs little. Pure logic, no
I/O; ``GroupManager`` (``groups``) and ``ConsumerService`` (``consumers``) use it.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable
from typing import Any, Final, Protocol

import re2

from service.errors import InvalidConsumerConfig

from .models import Subscription

log = logging.getLogger(__name__)

MAX_PATTERN_CHARS: Final = 1_000  # bounds RE2's compile time and memory per pattern
_PATTERN_MEMORY: Final = 1 << 20  # bytes per compiled pattern (program and DFA cache); beyond: refused
_CACHED_PATTERNS: Final = 256
_CACHED_MATCHES: Final = 16_384  # keys up to ~1.25 kB each: 20 MB at the very worst

# What RE2 refuses that backtracking engines accept, by the fragment RE2's error names.
_UNSUPPORTED: Final = (
    ("(?=", "a lookahead (?=…)"),
    ("(?!", "a negative lookahead (?!…)"),
    ("(?<=", "a lookbehind (?<=…)"),
    ("(?<!", "a negative lookbehind (?<!…)"),
    ("(?P=", "a named backreference (?P=…)"),
    ("(?>", "an atomic group (?>…)"),
    ("(?#", "a comment (?#…)"),
)
_BACKREFERENCE: Final = re.compile(r"\\[1-9]")
_POSSESSIVE: Final = re.compile(r"(?:[*+?]|\})\+")


class CompiledPattern(Protocol):
    """A compiled topic pattern (an RE2 regexp)."""

    def fullmatch(self, text: str) -> object | None: ...


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is the user's error, answered 42204, not a log line
    options.never_capture = True  # only yes/no is asked: no submatch bookkeeping
    options.max_mem = _PATTERN_MEMORY
    return options


_OPTIONS: Final = _options()


def _explain(pattern: str, detail: str) -> str:
    """The refusal message for ``pattern``, given RE2's own ``detail`` (``"<problem>: <fragment>"``)."""
    fragment = detail.rpartition(": ")[2]
    construct = next(
        (
            name
            for prefix, name in _UNSUPPORTED
            # RE2 names "(?P" for "(?P=name)": the pattern itself tells which construct it was
            if fragment.startswith(prefix) or (prefix.startswith(fragment) and prefix in pattern)
        ),
        None,
    )
    if construct is None and _BACKREFERENCE.match(fragment):
        construct = f"a backreference {fragment}"
    if construct is None and "bad repetition" in detail and _POSSESSIVE.fullmatch(fragment[-2:]):
        construct = f"a possessive quantifier {fragment}"
    if construct is not None:
        return (
            f"topic_pattern {pattern!r} uses {construct}, which topic patterns do not support: they are "
            "matched in linear time (RE2 syntax), without backreferences, lookarounds, atomic groups, "
            "possessive quantifiers or comments."
        )
    hint = " (use $ or \\z for the end of the name)" if fragment == "\\Z" else ""
    return f"topic_pattern {pattern!r} is not a valid regular expression (RE2 syntax): {detail}{hint}."


@functools.lru_cache(maxsize=_CACHED_PATTERNS)
def _compile(pattern: str) -> CompiledPattern | str:
    """The compiled pattern, or a ``str``: why it is refused (cached too, so a refused pattern
    stored before an upgrade is not recompiled on every refresh)."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"topic_pattern is {len(pattern)} characters long; the limit is {MAX_PATTERN_CHARS}."
    try:
        compiled: CompiledPattern = re2.compile(pattern, _OPTIONS)
        return compiled
    except re2.error as exc:
        detail = exc.args[0] if exc.args else ""
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        return _explain(pattern, str(detail))
    except UnicodeEncodeError:  # a lone surrogate: RE2 matches UTF-8 text
        return f"topic_pattern {pattern!r} is not valid Unicode text."


def compile_pattern(pattern: str) -> CompiledPattern:
    """``pattern`` compiled for matching topic names, or ``InvalidConsumerConfig`` (42204) saying
    why it is refused: too long, not valid, or using a construct RE2 lacks."""
    compiled = _compile(pattern)
    if isinstance(compiled, str):
        raise InvalidConsumerConfig(compiled)
    return compiled


@functools.lru_cache(maxsize=_CACHED_MATCHES)
def matches(pattern: str, topic: str) -> bool:
    """Whether ``topic`` matches ``pattern`` in full; a refused pattern matches nothing."""
    compiled = _compile(pattern)
    if isinstance(compiled, str):
        _warn_refused(pattern, compiled)
        return False
    return compiled.fullmatch(topic) is not None


@functools.lru_cache(maxsize=64)  # once per pattern while it stays in use, not every refresh
def _warn_refused(pattern: str, reason: str) -> None:
    # Only a subscription stored before patterns were matched with RE2 gets here: subscribe refuses
    # such patterns. It covers no topic rather than failing every rebalance of its group.
    log.warning("subscription's topic_pattern covers no topic: %s", reason)


def resolve(subscription: Subscription, topics: Iterable[str]) -> set[str]:
    """The existing topics a subscription covers."""
    existing = set(topics)
    if subscription.pattern is not None:
        pattern = subscription.pattern
        return {t for t in existing if matches(pattern, t)}
    return existing.intersection(subscription.topics)
