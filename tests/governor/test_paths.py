"""Every one of the nine paths, end to end on the recording host."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from jevqueue import LOCAL_MODEL_ID, Governor, Path
from jevqueue.errors import DecisionError, TurnInterruptedError
from jevqueue.governor import PROSE_DIRECTIVE
from jevqueue.testing import ScriptedHost, ScriptedModel, Step, text_response, tool_call_response

from .conftest import (
    CONFIDENT,
    LOW,
    MIDDLE,
    THRESHOLDS,
    TIED,
    FixedBallot,
    after_tool_result,
    user_turn,
)


def governor(scores: dict[str, float], **settings: Any) -> Governor:
    return Governor(FixedBallot(scores), thresholds=THRESHOLDS, **settings)


def test_tool_forces_the_top_tool_and_returns_the_response(tools: list[dict[str, Any]]) -> None:
    reply = tool_call_response(("read_file", {"path": "notes.txt"}))
    model = ScriptedModel([Step(reply, force_tool="read_file")])
    host = ScriptedHost(tools, user_turn(), model)
    gov = governor(CONFIDENT)

    assert gov.step(host) is reply

    decision = gov.last
    assert decision is not None
    assert decision.path is Path.TOOL
    assert decision.tool == "read_file"
    assert "read_file" in decision.directive
    assert decision.provider_calls == 1 == host.provider_calls
    assert decision.error is None
    assert set(decision.timings) == {"decide", "effect"}
    assert [name for name, _ in decision.candidates] == ["read_file", "search_files", "list_tasks"]
    assert decision.scores == CONFIDENT
    (call,) = host.calls
    assert call.kind == "generate" and call.force_tool == "read_file"
    assert call.directive == decision.directive
    model.assert_complete()


def test_static_tool_says_the_call_locally(tools: list[dict[str, Any]]) -> None:
    scores = {"list_tasks": 0.95, "read_file": 0.1, "search_files": 0.0}
    host = ScriptedHost(tools, user_turn("what are my open tasks"), ScriptedModel([]))
    gov = governor(scores, static_tools={"list_tasks": {"status": "open", "limit": 5}})

    response = gov.step(host)

    assert gov.last is not None and gov.last.path is Path.STATIC_TOOL
    assert gov.last.tool == "list_tasks"
    assert dict(gov.last.arguments or {}) == {"status": "open", "limit": 5}
    assert gov.last.provider_calls == 0 == host.provider_calls
    (call,) = host.calls
    assert call.kind == "say_tool_call" and call.name == "list_tasks"
    assert call.arguments == {"status": "open", "limit": 5}
    assert response["model"] == LOCAL_MODEL_ID
    assert host.called_tools(response) == ["list_tasks"]


def test_prose_forbids_tools_with_a_directive(tools: list[dict[str, Any]]) -> None:
    reply = text_response("Paris is the capital of France.")
    model = ScriptedModel([Step(reply, force_tool=None, directive=PROSE_DIRECTIVE)])
    host = ScriptedHost(tools, user_turn("what is the capital of France"), model)
    gov = governor(LOW)

    assert gov.step(host) is reply
    assert gov.last is not None and gov.last.path is Path.PROSE
    assert gov.last.tool is None
    assert gov.last.directive == PROSE_DIRECTIVE
    assert gov.last.reason and "floor" in gov.last.reason
    assert host.calls[0].request is not None
    assert host.calls[0].request["tool_choice"] == "none"
    model.assert_complete()


def test_clarify_asks_a_question_naming_the_tied_candidates(tools: list[dict[str, Any]]) -> None:
    host = ScriptedHost(tools, user_turn("find notes"), ScriptedModel([]))
    gov = governor(TIED)

    response = gov.step(host)

    assert gov.last is not None and gov.last.path is Path.CLARIFY
    question = gov.last.reason
    assert question is not None
    assert "`read_file`" in question and "`search_files`" in question
    assert "list_tasks" not in question  # not a candidate: far below the top
    assert "Read a text file from the workspace" in question  # the description's first sentence
    assert host.provider_calls == 0
    (call,) = host.calls
    assert call.kind == "say" and call.text == question
    assert response["choices"][0]["message"]["content"] == question
    assert response["model"] == LOCAL_MODEL_ID


def test_risk_stop_says_the_reason_and_calls_nothing(tools: list[dict[str, Any]]) -> None:
    seen: list[Any] = []

    def rule(messages: Any, tools: Any, scores: Any) -> str | None:
        seen.append((messages, tools, dict(scores)))
        return "Reading that file is not allowed on this machine."

    host = ScriptedHost(tools, user_turn(), ScriptedModel([]))
    gov = governor(CONFIDENT, risk_rules=(rule,))

    response = gov.step(host)

    assert gov.last is not None and gov.last.path is Path.RISK_STOP
    assert gov.last.reason == "Reading that file is not allowed on this machine."
    assert gov.last.provider_calls == 0 == host.provider_calls
    assert [c.kind for c in host.calls] == ["say"]
    assert response["choices"][0]["message"]["content"] == gov.last.reason
    # the rule saw the very lists the host returned, and the scores highest first
    assert seen[0][0] is host.conversation and seen[0][1] is host.toolset
    assert list(seen[0][2]) == ["read_file", "search_files", "list_tasks"]


def test_the_first_rule_that_fires_wins_and_later_rules_do_not_run(
    tools: list[dict[str, Any]],
) -> None:
    ran: list[str] = []

    def passes(*_: Any) -> None:
        ran.append("passes")
        return None

    def fires(*_: Any) -> str:
        ran.append("fires")
        return "stop"

    def never(*_: Any) -> str:
        ran.append("never")
        return "never"

    gov = governor(CONFIDENT, risk_rules=[passes, fires, never])
    gov.step(ScriptedHost(tools, user_turn(), ScriptedModel([])))
    assert ran == ["passes", "fires"]
    assert gov.last is not None and gov.last.reason == "stop"


def test_delegate_between_floor_and_confident_is_a_passthrough(
    tools: list[dict[str, Any]],
) -> None:
    reply = text_response("Which notes do you mean?")
    model = ScriptedModel([Step(reply, force_tool=None, directive="")])
    host = ScriptedHost(tools, user_turn("notes"), model)
    gov = governor(MIDDLE)

    assert gov.step(host) is reply
    assert gov.last is not None and gov.last.path is Path.DELEGATE
    assert gov.last.directive == ""
    assert gov.last.provider_calls == 1
    model.assert_complete()


def test_error_delegate_passes_through_and_records_the_error(
    tools: list[dict[str, Any]],
) -> None:
    class BrokenBallot:
        def score(self, messages: Any, tools: Any) -> Any:
            raise RuntimeError("index corrupted")

    reply = text_response("hello")
    model = ScriptedModel([Step(reply, force_tool=None, directive="")])
    host = ScriptedHost(tools, user_turn(), model)
    gov = Governor(BrokenBallot(), thresholds=THRESHOLDS)

    assert gov.step(host) is reply
    assert gov.last is not None and gov.last.path is Path.ERROR_DELEGATE
    assert gov.last.error is not None and "index corrupted" in gov.last.error
    assert gov.last.provider_calls == 1 == host.provider_calls
    model.assert_complete()


def test_error_raise_raises_decision_error_with_no_effect(tools: list[dict[str, Any]]) -> None:
    def broken_rule(*_: Any) -> str | None:
        raise KeyError("missing")

    host = ScriptedHost(tools, user_turn(), ScriptedModel([]))
    gov = governor(CONFIDENT, risk_rules=(broken_rule,), on_error="raise")

    with pytest.raises(DecisionError, match="could not decide") as caught:
        gov.step(host)

    assert isinstance(caught.value.__cause__, KeyError)
    assert gov.last is not None and gov.last.path is Path.ERROR_RAISE
    assert gov.last.error is not None and "missing" in gov.last.error
    assert gov.last.provider_calls == 0
    assert host.calls == [] and host.provider_calls == 0
    assert host.interrupted_checks == 0  # nothing happens after a failed decision


@pytest.mark.parametrize(
    ("scores", "settings", "would_have_been"),
    [
        (CONFIDENT, {}, Path.TOOL),
        (LOW, {}, Path.PROSE),
        (TIED, {}, Path.CLARIFY),
        (MIDDLE, {}, Path.DELEGATE),
        (CONFIDENT, {"risk_rules": (lambda *_: "no",)}, Path.RISK_STOP),
        (CONFIDENT, {"static_tools": {"read_file": {"path": "a.txt"}}}, Path.STATIC_TOOL),
    ],
)
def test_interrupted_before_any_effect(
    tools: list[dict[str, Any]],
    scores: dict[str, float],
    settings: dict[str, Any],
    would_have_been: Path,
) -> None:
    host = ScriptedHost(tools, user_turn(), ScriptedModel([]), interrupted=True)
    gov = governor(scores, **settings)

    with pytest.raises(TurnInterruptedError, match="nothing was sent"):
        gov.step(host)

    assert gov.last is not None and gov.last.path is Path.INTERRUPTED
    assert gov.last.provider_calls == 0
    assert gov.last.directive == ""
    assert would_have_been.value in (gov.last.reason or "")
    assert host.calls == [] and host.provider_calls == 0
    assert host.interrupted_checks == 1


def test_interrupted_is_consulted_after_the_decision(tools: list[dict[str, Any]]) -> None:
    order: list[str] = []

    class OrderBallot(FixedBallot):
        def score(self, messages: Any, tools: Any) -> Any:
            order.append("decide")
            return super().score(messages, tools)

    class OrderHost(ScriptedHost):
        def interrupted(self) -> bool:
            order.append("interrupted")
            return super().interrupted()

        def generate(self, *, force_tool: str | None, directive: str) -> Any:
            order.append("generate")
            return super().generate(force_tool=force_tool, directive=directive)

    host = OrderHost(tools, user_turn(), [tool_call_response("read_file")])
    Governor(OrderBallot(CONFIDENT), thresholds=THRESHOLDS).step(host)
    assert order == ["decide", "interrupted", "generate"]


def test_a_turn_after_a_tool_result_is_never_forced_again(tools: list[dict[str, Any]]) -> None:
    first = tool_call_response(("read_file", {"path": "notes.txt"}))
    second = text_response("The file says: buy milk.")
    model = ScriptedModel(
        [
            Step(first, force_tool="read_file", label="forced read"),
            Step(second, force_tool=None, directive="", label="unforced answer"),
        ]
    )
    messages = user_turn()
    host = ScriptedHost(tools, messages, model)
    gov = governor(CONFIDENT)  # the ballot would force read_file on every turn

    gov.step(host)
    assert gov.last is not None and gov.last.path is Path.TOOL
    messages.extend(after_tool_result()[len(messages) :])
    gov.step(host)

    assert gov.last is not None and gov.last.path is Path.DELEGATE
    assert gov.last.tool == "read_file"  # recorded, not forced
    assert gov.last.reason is not None and "tool result" in gov.last.reason
    assert [c.force_tool for c in host.calls] == ["read_file", None]
    assert host.calls[1].directive == ""
    model.assert_complete()


def test_a_turn_whose_newest_message_is_not_the_users_delegates(
    tools: list[dict[str, Any]],
) -> None:
    messages = [*user_turn(), {"role": "assistant", "content": "Anything else?"}]
    host = ScriptedHost(tools, messages, [text_response("...")])
    gov = governor(CONFIDENT)
    gov.step(host)
    assert gov.last is not None and gov.last.path is Path.DELEGATE
    assert host.calls[0].force_tool is None and host.calls[0].directive == ""


def test_no_tools_delegates() -> None:
    host = ScriptedHost([], user_turn(), [text_response("hi")])
    gov = governor({})
    gov.step(host)
    assert gov.last is not None and gov.last.path is Path.DELEGATE
    assert gov.last.reason == "no tools are offered this turn"


def test_risk_rules_also_run_after_a_tool_result(tools: list[dict[str, Any]]) -> None:
    def after_tools(messages: Any, *_: Any) -> str | None:
        return "stopped" if messages[-1]["role"] == "tool" else None

    host = ScriptedHost(tools, after_tool_result(), ScriptedModel([]))
    gov = governor(CONFIDENT, risk_rules=[after_tools])
    gov.step(host)
    assert gov.last is not None and gov.last.path is Path.RISK_STOP


@pytest.mark.parametrize(
    ("top", "second", "expected"),
    [
        (0.6, 0.4, Path.TOOL),  # exactly confident, exactly the margin
        (0.6, 0.41, Path.CLARIFY),  # confident, lead just short
        (0.59, 0.0, Path.DELEGATE),  # just below confident
        (0.2, 0.0, Path.DELEGATE),  # exactly the floor
        (0.19, 0.0, Path.PROSE),  # just below the floor
        (1.0, 1.0, Path.CLARIFY),
        (0.0, 0.0, Path.PROSE),
    ],
)
def test_threshold_boundaries(top: float, second: float, expected: Path) -> None:
    tools = [{"name": "a", "description": "A."}, {"name": "b", "description": "B."}]
    gov = governor({"a": top, "b": second})
    assert gov.decide(user_turn(), tools).path is expected


def test_a_single_tool_leads_by_its_whole_score() -> None:
    gov = governor({"only": 0.7})
    decision = gov.decide(user_turn(), [{"name": "only"}])
    assert decision.path is Path.TOOL and decision.tool == "only"


def test_decide_is_pure_and_records_last(tools: list[dict[str, Any]]) -> None:
    messages = user_turn()
    before = copy.deepcopy((messages, tools))
    gov = governor(CONFIDENT)
    decision = gov.decide(messages, tools)
    assert gov.last is decision
    assert (messages, tools) == before
    assert decision.timings.keys() == {"decide"}
    assert decision.provider_calls == 1  # what the effect will cost
