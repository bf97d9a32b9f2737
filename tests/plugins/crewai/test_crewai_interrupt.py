"""``interrupted`` stops every turn before the provider call, pass-through turns included."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest
from crew_kit import FixedBallot, make_crew
from jevqueue import Governor, Path, Thresholds, TurnInterruptedError
from jevqueue.plugins.crewai import (
    REACT_NOTE,
    CrewTurnInterruptedError,
    ForcingUnavailableError,
    GovernedLLM,
)
from jevqueue.plugins.crewai.testing import ScriptedLLM
from pydantic import BaseModel

MESSAGES = [{"role": "user", "content": "Read my notes."}]
READ_FILE = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file",
        "parameters": {"type": "object", "properties": {}},
    },
}


class Summary(BaseModel):
    text: str


# (tools, response_model, native function calling), one per kind of pass-through turn
PASS_THROUGH_TURNS = [
    pytest.param(None, None, True, id="no-tools"),
    pytest.param([READ_FILE], Summary, True, id="response-model"),
    pytest.param([READ_FILE], None, False, id="react"),
]


def governor() -> Governor:
    return Governor(
        FixedBallot({"read_file": 0.95}),
        thresholds=Thresholds(confident=0.6, margin=0.25, floor=0.2),
    )


def run_turn(llm: GovernedLLM, tools: Any, response_model: Any, *, asynchronous: bool) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the ReAct-mode warning
        if asynchronous:
            return asyncio.run(llm.acall(MESSAGES, tools=tools, response_model=response_model))
        return llm.call(MESSAGES, tools=tools, response_model=response_model)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["call", "acall"])
@pytest.mark.parametrize(("tools", "response_model", "native"), PASS_THROUGH_TURNS)
def test_an_interrupted_pass_through_turn_sends_nothing(
    tools: Any, response_model: Any, native: bool, asynchronous: bool
) -> None:
    inner = ScriptedLLM(["never sent"], native=native)
    gov = governor()
    llm = GovernedLLM(inner, gov, interrupted=lambda: True)

    with pytest.raises(CrewTurnInterruptedError, match="nothing was sent") as raised:
        run_turn(llm, tools, response_model, asynchronous=asynchronous)

    assert isinstance(raised.value, TurnInterruptedError)
    assert inner.requests == [], "an interrupted turn must not reach the provider"
    decision = llm.last_decision
    assert decision is not None and decision.path is Path.INTERRUPTED
    assert decision.provider_calls == 0
    assert llm.decisions == [decision], "one turn, one record"
    assert gov.last is None, "pass-through turns do not run the governor"


@pytest.mark.parametrize("asynchronous", [False, True], ids=["call", "acall"])
@pytest.mark.parametrize(("tools", "response_model", "native"), PASS_THROUGH_TURNS)
def test_a_pass_through_turn_consults_interrupted_once_and_then_passes_through(
    tools: Any, response_model: Any, native: bool, asynchronous: bool
) -> None:
    asked: list[bool] = []

    def interrupted() -> bool:
        asked.append(True)
        return False

    inner = ScriptedLLM(["Here are your notes."], native=native)
    llm = GovernedLLM(inner, governor(), interrupted=interrupted)

    reply = run_turn(llm, tools, response_model, asynchronous=asynchronous)

    inner.assert_complete()
    assert reply == "Here are your notes."
    assert asked == [True]
    (request,) = inner.requests
    assert request.tools == tools and request.constraint is None, "passed through unchanged"
    decision = llm.last_decision
    assert decision is not None and decision.path is Path.DELEGATE
    assert decision.provider_calls == 1
    if not native:
        assert decision.reason == REACT_NOTE


@pytest.mark.parametrize("asynchronous", [False, True], ids=["call", "acall"])
def test_a_failing_interrupted_callable_sends_nothing_and_is_recorded(asynchronous: bool) -> None:
    def interrupted() -> bool:
        raise RuntimeError("cancellation service unreachable")

    inner = ScriptedLLM(["never sent"])
    llm = GovernedLLM(inner, governor(), interrupted=interrupted)

    with pytest.raises(RuntimeError, match="cancellation service unreachable"):
        run_turn(llm, None, None, asynchronous=asynchronous)

    assert inner.requests == []
    decision = llm.last_decision
    assert decision is not None and decision.error is not None
    assert "cancellation service unreachable" in decision.error


def test_react_mode_still_warns_when_the_turn_is_interrupted() -> None:
    inner = ScriptedLLM([], native=False)
    llm = GovernedLLM(inner, governor(), interrupted=lambda: True)

    with (
        pytest.warns(RuntimeWarning, match="ReAct text mode"),
        pytest.raises(CrewTurnInterruptedError),
    ):
        llm.call(MESSAGES, tools=[READ_FILE])

    assert inner.requests == []


@pytest.mark.parametrize("asynchronous", [False, True], ids=["call", "acall"])
def test_react_raise_still_refuses_before_the_interruption_check(asynchronous: bool) -> None:
    asked: list[bool] = []
    inner = ScriptedLLM([])
    llm = GovernedLLM(
        inner, governor(), react="raise", interrupted=lambda: asked.append(True) or True
    )
    inner.native = False  # the wrapped LLM stops reporting native function calling

    with pytest.raises(ForcingUnavailableError, match="ReAct text mode"):
        run_turn(llm, [READ_FILE], None, asynchronous=asynchronous)

    assert inner.requests == [] and asked == []


def test_an_interrupted_tool_less_agent_stops_the_crew() -> None:
    inner = ScriptedLLM(["Hello!"])
    llm = GovernedLLM(inner, governor(), interrupted=lambda: True)
    crew = make_crew(llm, [], "Say hello to me.")

    with pytest.raises(TurnInterruptedError):
        crew.kickoff()

    assert inner.requests == []
    assert llm.last_decision is not None and llm.last_decision.path is Path.INTERRUPTED
