"""Hypothesis strategies for what a log holds, shared by the tests of the record renderers: payloads,
and JSON values as clients store them (compact, spaced, numbers beyond what a double keeps)."""

from __future__ import annotations

import json

from hypothesis import strategies as st

payloads = st.none() | st.binary(max_size=40)
_json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)  # beyond 64 bits too: stored as written, never re-encoded
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_json_values = st.recursive(
    _json_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3)
)
# A stored JSON value as a client may have produced it: compact, spaced, or with numbers written
# beyond what a double keeps.
stored_json = st.builds(
    lambda v, indent: json.dumps(v, indent=indent, ensure_ascii=False).encode(),
    _json_values,
    st.sampled_from([None, 2]),
) | st.sampled_from([b"123456789012345678901234567890", b"3.14159265358979323846", b' {"a" : [1, 2.50]} '])
