"""The flat-schema fast path in front of jsonschema never accepts what jsonschema rejects."""

from __future__ import annotations

from typing import Any

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st
from jevqueue.policy._action import _plainly_valid

_NAMES = st.sampled_from(["path", "content", "count", "flag", "ratio", "mode"])
_SIMPLE = st.sampled_from(["string", "boolean", "integer", "number", "array", "null"])
_EXTRA = st.sampled_from(
    [{}, {"description": "d"}, {"title": "t"}, {"minLength": 2}, {"enum": ["a", 1]}]
)
_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(-2, 2, allow_nan=False),
    st.text(max_size=3),
    st.lists(st.integers(0, 2), max_size=2),
)


@st.composite
def _schemas(draw: st.DrawFn) -> dict[str, Any]:
    properties = {
        name: {"type": draw(_SIMPLE), **draw(_EXTRA)}
        for name in draw(st.lists(_NAMES, max_size=4, unique=True))
    }
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    schema["required"] = draw(st.lists(_NAMES, max_size=3, unique=True))
    if draw(st.booleans()):
        schema["additionalProperties"] = False
    return schema


@settings(max_examples=400, deadline=None)
@given(_schemas(), st.dictionaries(_NAMES, _VALUES, max_size=4))
def test_the_fast_path_only_accepts_what_jsonschema_accepts(
    schema: dict[str, Any], arguments: dict[str, Any]
) -> None:
    if _plainly_valid(schema, arguments):
        assert jsonschema.Draft202012Validator(schema).is_valid(arguments)


def test_the_fast_path_takes_a_plain_tool_schema() -> None:
    schema = {
        "type": "object",
        "title": "read_file",
        "properties": {"path": {"type": "string", "description": "where"}},
        "required": ["path"],
    }
    assert _plainly_valid(schema, {"path": "a.txt"})
    assert not _plainly_valid(schema, {})
    assert not _plainly_valid(schema, {"path": 3})
    assert not _plainly_valid({**schema, "additionalProperties": False}, {"path": "a"})
