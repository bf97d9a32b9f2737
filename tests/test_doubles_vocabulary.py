"""Every scripted model speaks the same words: requests, responses, remaining, assert_complete."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from jevqueue.testing import ModelCall, ScriptedModel, ScriptedModelError, text_response


def _core() -> tuple[Any, Callable[[Any], Any]]:
    model = ScriptedModel([text_response("one"), text_response("two")])
    return model, lambda m: m(ModelCall(messages=(), tools=(), force_tool=None, directive=""))


def _langgraph() -> tuple[Any, Callable[[Any], Any]]:
    pytest.importorskip("langgraph")
    from jevqueue.plugins.langgraph.testing import ScriptedChatModel
    from langchain_core.messages import HumanMessage

    model = ScriptedChatModel(steps=["one", "two"])
    return model, lambda m: m.invoke([HumanMessage("hi")])


def _crewai() -> tuple[Any, Callable[[Any], Any]]:
    pytest.importorskip("crewai")
    from jevqueue.plugins.crewai.testing import ScriptedLLM

    model = ScriptedLLM(["one", "two"])
    return model, lambda m: m.call("hi")


@pytest.mark.parametrize("make", [_core, _langgraph, _crewai], ids=["core", "langgraph", "crewai"])
def test_scripted_models_share_one_vocabulary(make: Callable[[], Any]) -> None:
    model, ask = make()
    assert len(model.requests) == 0 and len(model.responses) == 0 and len(model.remaining) == 2
    ask(model)
    assert len(model.requests) == 1 and len(model.responses) == 1 and len(model.remaining) == 1
    with pytest.raises((AssertionError, ScriptedModelError)):
        model.assert_complete()  # one step never used
    ask(model)
    model.assert_complete()
    with pytest.raises((AssertionError, ScriptedModelError)):
        ask(model)  # beyond the script: fails when made
    assert len(model.requests) == 3 and len(model.responses) == 2


def test_the_old_spelling_still_reads_but_warns() -> None:
    model, ask = _core()
    ask(model)
    with pytest.warns(DeprecationWarning, match="requests"):
        assert model.calls == model.requests
