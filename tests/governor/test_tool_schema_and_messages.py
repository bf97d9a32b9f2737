"""Tool schemas in both OpenAI shapes, and the message helpers hosts and rules use."""

from __future__ import annotations

from typing import Any

import pytest
from jevqueue.errors import InvalidToolSchemaError
from jevqueue.governor import (
    EMPTY_PARAMETERS,
    ToolSchema,
    follows_tool_result,
    is_user_turn,
    message_text,
    newest_role,
    newest_tool_result_text,
    newest_user_text,
    normalize_tools,
    tool_names,
    with_directive,
)

PARAMS = {"type": "object", "properties": {"path": {"type": "string"}}}


def test_both_shapes_normalize_to_the_same_schema() -> None:
    nested = {
        "type": "function",
        "function": {"name": "read_file", "description": "Read.", "parameters": PARAMS},
    }
    flat = {"name": "read_file", "description": "Read.", "parameters": PARAMS}
    (a,) = normalize_tools([nested])
    (b,) = normalize_tools([flat])
    assert a == b == ToolSchema("read_file", "Read.", PARAMS)
    assert a.as_openai()["function"]["name"] == "read_file"


def test_missing_description_and_parameters_have_defaults() -> None:
    (schema,) = normalize_tools([{"name": "ping"}])
    assert schema.description == "" and schema.parameters == EMPTY_PARAMETERS


def test_mixed_shapes_keep_their_order() -> None:
    tools = [{"name": "b"}, {"type": "function", "function": {"name": "a"}}]
    assert [t.name for t in normalize_tools(tools)] == ["b", "a"] == tool_names(tools)


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ("read_file", "list of tool schemas"),
        ({"name": "read_file"}, "list of tool schemas"),
        ([["read_file"]], r"tools\[0\] is a list"),
        ([{"description": "x"}], r"tools\[0\] has no non-empty string 'name'"),
        ([{"name": 3}], "name"),
        ([{"type": "retrieval", "function": {"name": "x"}}], "only function tools"),
        ([{"type": "function", "function": "x"}], "not a mapping"),
        ([{"name": "x", "description": 3}], "description"),
        ([{"name": "x", "parameters": "path"}], "JSON Schema object"),
        ([{"name": "x"}, {"name": "x"}], "two tools are named 'x'"),
    ],
)
def test_anything_else_is_a_typed_error(tools: Any, message: str) -> None:
    with pytest.raises(InvalidToolSchemaError, match=message):
        normalize_tools(tools)


@pytest.mark.parametrize(
    "tools",
    [
        "read_file",
        [["read_file"]],
        [{"description": "x"}],
        [{"name": ""}],
        [{"name": "x"}, {"function": {"name": "x"}}],
        [{"function": "x"}],
    ],
)
def test_tool_names_rejects_what_normalize_tools_rejects(tools: Any) -> None:
    with pytest.raises(InvalidToolSchemaError):
        tool_names(tools)


def test_message_text_flattens_parts() -> None:
    assert message_text({"role": "user", "content": "hi"}) == "hi"
    parts = [{"type": "text", "text": "look at"}, {"type": "image_url"}, "this"]
    assert message_text({"role": "user", "content": parts}) == "look at this"
    assert message_text({"role": "assistant", "content": None}) == ""


def test_turn_helpers() -> None:
    convo: list[dict[str, Any]] = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "content": "a"},
        {"role": "tool", "content": "b"},
    ]
    assert newest_role(convo) == "tool" and follows_tool_result(convo)
    assert not is_user_turn(convo)
    assert newest_user_text(convo) == "first"
    assert newest_tool_result_text(convo) == "a\nb"
    assert newest_role([]) is None and newest_user_text([]) == ""
    assert is_user_turn([{"role": "user", "content": "x"}])
    assert follows_tool_result([{"role": "function", "content": "x"}])


def test_with_directive_copies_and_never_mutates() -> None:
    messages = [{"role": "user", "content": "hi"}]
    sent = with_directive(messages, "Call read_file.")
    assert sent == [*messages, {"role": "system", "content": "Call read_file."}]
    assert messages == [{"role": "user", "content": "hi"}]
    passthrough = with_directive(messages, "")
    assert passthrough == messages and passthrough is not messages
    assert with_directive(messages, "x", role="user")[-1]["role"] == "user"
