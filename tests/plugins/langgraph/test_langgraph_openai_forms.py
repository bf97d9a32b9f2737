"""The governor's view of a LangChain conversation equals LangChain's own OpenAI form."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jevqueue.plugins.langgraph.openai_forms import _openai_form, openai_messages
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)

_text = st.text(max_size=12)
_names = st.none() | st.just("") | st.text(min_size=1, max_size=8)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)
_extra = st.fixed_dictionaries(
    {},
    optional={
        "refusal": st.none() | _text,
        "__openai_role__": st.sampled_from(["developer", "system", ""]),
        "other": _text,
    },
)
_calls = st.lists(
    st.builds(
        lambda name, args, index: {
            "name": name,
            "args": args,
            "id": f"call_{index}",
            "type": "tool_call",
        },
        st.text(min_size=1, max_size=8),
        st.dictionaries(_text, _json, max_size=3),
        st.integers(0, 99),
    ),
    max_size=3,
)


@st.composite
def _message(draw: Any) -> Any:
    kind = draw(st.sampled_from(["human", "ai", "tool", "system"]))
    content = draw(_text)
    name = draw(_names)
    extra = draw(_extra)
    if kind == "human":
        return HumanMessage(content, name=name, additional_kwargs=extra)
    if kind == "system":
        return SystemMessage(content, name=name, additional_kwargs=extra)
    if kind == "tool":
        return ToolMessage(content, tool_call_id=draw(_text), name=name, additional_kwargs=extra)
    return AIMessage(content, name=name, additional_kwargs=extra, tool_calls=draw(_calls))


@settings(max_examples=300, deadline=None)
@given(st.lists(_message(), max_size=6))
def test_text_messages_convert_exactly_as_langchain_does(messages: list[Any]) -> None:
    # Every generated message takes the direct route, so this compares the two conversions.
    assert all(_openai_form(message) is not None for message in messages)
    ours = openai_messages(messages)
    assert ours == convert_to_openai_messages(messages)
    # Key order too: what a ballot or a log sees is the same document.
    assert [list(form) for form in ours] == [
        list(form) for form in convert_to_openai_messages(messages)
    ]


@pytest.mark.parametrize(
    "odd",
    [
        HumanMessage([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
        AIMessageChunk("partial"),
        ChatMessage("hi", role="critic"),
        {"role": "user", "content": "a dict"},
    ],
    ids=["content-blocks", "subclass", "chat-message", "dict"],
)
def test_anything_else_takes_langchains_conversion(odd: Any) -> None:
    messages = [HumanMessage("first"), odd, AIMessage("last")]
    assert openai_messages(messages) == convert_to_openai_messages(messages)


def test_a_non_string_openai_role_fails_as_langchain_fails() -> None:
    messages = [SystemMessage("s", additional_kwargs={"__openai_role__": 7})]
    with pytest.raises(TypeError, match="__openai_role__"):
        convert_to_openai_messages(messages)
    with pytest.raises(TypeError, match="__openai_role__"):
        openai_messages(messages)
