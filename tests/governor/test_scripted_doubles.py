"""The test doubles themselves: they must fail loudly, or tests built on them prove nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jevqueue import LOCAL_MODEL_ID
from jevqueue.testing import (
    ANY,
    ScriptedHost,
    ScriptedModel,
    ScriptedModelError,
    Step,
    called_tool_names,
    text_response,
    tool_call_response,
)
from jevqueue.testing.scripted_model import ModelCall


def call(force_tool: str | None = None, directive: str = "") -> ModelCall:
    return ModelCall([{"role": "user", "content": "hi"}], [], force_tool, directive)


def test_an_unexpected_call_raises_at_once() -> None:
    model = ScriptedModel([])
    with pytest.raises(ScriptedModelError, match="unexpected provider call #1"):
        model(call())
    assert len(model.requests) == 1


def test_a_call_that_does_not_match_the_step_raises() -> None:
    model = ScriptedModel([Step(text_response("x"), force_tool="read_file", label="forced read")])
    with pytest.raises(
        ScriptedModelError, match="forced read: force_tool=None, expected 'read_file'"
    ):
        model(call())
    model2 = ScriptedModel([Step(text_response("x"), directive="")])
    with pytest.raises(ScriptedModelError, match="directive="):
        model2(call(directive="Answer in prose."))
    model3 = ScriptedModel([Step(text_response("x"), directive=lambda d: "read_file" in d)])
    with pytest.raises(ScriptedModelError, match="does not satisfy"):
        model3(call(directive="Answer in prose."))


def test_assert_complete_fails_on_unused_steps() -> None:
    model = ScriptedModel([text_response("a"), Step(text_response("b"), label="the answer")])
    model(call())
    with pytest.raises(ScriptedModelError, match="1 scripted step\\(s\\) never used: the answer"):
        model.assert_complete()
    model(call())
    model.assert_complete()


def test_a_step_can_build_its_response_from_the_call() -> None:
    model = ScriptedModel([Step(lambda c: tool_call_response(c.force_tool), force_tool=ANY)])
    response = model(call(force_tool="read_file"))
    assert called_tool_names(response) == ["read_file"]


def test_the_host_records_generate_with_the_copy_it_built() -> None:
    messages = [{"role": "user", "content": "hi"}]
    host = ScriptedHost([{"name": "t"}], messages, [text_response("a"), text_response("b")])

    host.generate(force_tool="t", directive="Call t.")
    host.generate(force_tool=None, directive="")

    first, second = host.calls
    assert first.messages == [*messages, {"role": "system", "content": "Call t."}]
    assert first.messages is not messages
    assert second.messages == messages
    assert second.request is not None and "tool_choice" not in second.request
    assert messages == [{"role": "user", "content": "hi"}]
    assert host.provider_calls == 2


def test_the_host_records_a_rejected_call_too() -> None:
    host = ScriptedHost([], [], ScriptedModel([]))
    with pytest.raises(ScriptedModelError):
        host.generate(force_tool=None, directive="")
    assert len(host.calls) == 1 and host.calls[0].response is None


def test_says_are_local_and_stamped() -> None:
    host = ScriptedHost()
    said = host.say("Which one?")
    called = host.say_tool_call("list_tasks", {"status": "open"})
    assert said["model"] == called["model"] == LOCAL_MODEL_ID
    assert host.called_tools(said) == []
    assert host.called_tools(called) == ["list_tasks"]
    arguments = called["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(arguments) == {"status": "open"}
    assert host.provider_calls == 0
    assert [c.kind for c in host.local_calls] == ["say", "say_tool_call"]


def test_interrupt_flag_and_count() -> None:
    host = ScriptedHost()
    assert host.interrupted() is False
    host.interrupt()
    assert host.interrupted() is True
    assert host.interrupted_checks == 2


@pytest.mark.parametrize("response", [None, {}, {"choices": []}, "text"])
def test_called_tool_names_rejects_what_is_not_a_completion(response: Any) -> None:
    with pytest.raises(TypeError, match="chat-completion"):
        called_tool_names(response)


def test_tool_call_response_shapes() -> None:
    assert called_tool_names(tool_call_response()) == []
    assert called_tool_names(tool_call_response("a", ("b", {"x": 1}))) == ["a", "b"]
    assert called_tool_names(text_response("hi")) == []
