"""Settings are checked when the governor is built; a misbehaving ballot or rule fails a turn."""

from __future__ import annotations

import math
from typing import Any

import pytest
from jevqueue import Governor, Path, Thresholds
from jevqueue.errors import ConfigurationError, DecisionError, InvalidToolSchemaError, UsageError
from jevqueue.testing import ScriptedHost, ScriptedModel, Step, text_response

from .conftest import CONFIDENT, THRESHOLDS, FixedBallot, user_turn


@pytest.mark.parametrize("on_error", ["ignore", "", None, "RAISE", "delegate "])
def test_on_error_accepts_only_delegate_or_raise(on_error: Any) -> None:
    with pytest.raises(ConfigurationError, match="on_error must be 'delegate' or 'raise'"):
        Governor(FixedBallot({}), on_error=on_error)


def test_configuration_errors_are_usage_errors() -> None:
    assert issubclass(ConfigurationError, UsageError)


def test_a_ballot_without_score_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="score"):
        Governor(object())  # type: ignore[arg-type]


def test_thresholds_must_be_thresholds() -> None:
    with pytest.raises(ConfigurationError, match="Thresholds"):
        Governor(FixedBallot({}), thresholds=(0.6, 0.2, 0.2))  # type: ignore[arg-type]


def test_a_single_rule_instead_of_a_sequence_is_rejected() -> None:
    def rule(*_: Any) -> None:
        return None

    with pytest.raises(ConfigurationError, match=r"risk_rules=\(rule,\)"):
        Governor(FixedBallot({}), risk_rules=rule)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="callable"):
        Governor(FixedBallot({}), risk_rules=["not a rule"])  # type: ignore[list-item]


def test_defaults_are_the_lexical_ballot_and_calibrated_thresholds() -> None:
    from jevqueue.governor import LexicalBallot

    gov = Governor()
    assert isinstance(gov.ballot, LexicalBallot)
    assert gov.thresholds == Thresholds()
    assert gov.risk_rules == ()
    assert gov.on_error == "delegate"
    assert dict(gov.static_tools) == {}


class ReturnsBallot:
    def __init__(self, value: Any) -> None:
        self.value = value

    def score(self, messages: Any, tools: Any) -> Any:
        return self.value


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        ({"unknown_tool": 0.5}, "not an offered tool"),
        ({"read_file": 1.5}, r"\[0, 1\]"),
        ({"read_file": -0.1}, r"\[0, 1\]"),
        ({"read_file": math.nan}, r"\[0, 1\]"),
        ({"read_file": "high"}, "str"),
        ({"read_file": True}, "bool"),
        ([("read_file", 0.9)], "mapping"),
        (None, "mapping"),
    ],
)
def test_a_ballot_that_returns_nonsense_fails_the_decision(
    tools: list[dict[str, Any]], returned: Any, message: str
) -> None:
    delegating = Governor(ReturnsBallot(returned), thresholds=THRESHOLDS)
    decision = delegating.decide(user_turn(), tools)
    assert decision.path is Path.ERROR_DELEGATE
    assert decision.provider_calls == 1

    raising = Governor(ReturnsBallot(returned), thresholds=THRESHOLDS, on_error="raise")
    with pytest.raises(DecisionError, match=message):
        raising.decide(user_turn(), tools)
    assert raising.last is not None and raising.last.path is Path.ERROR_RAISE


def test_integer_scores_are_accepted_and_missing_tools_score_zero(
    tools: list[dict[str, Any]],
) -> None:
    decision = Governor(ReturnsBallot({"read_file": 1}), thresholds=THRESHOLDS).decide(
        user_turn(), tools
    )
    assert decision.path is Path.TOOL
    assert dict(decision.scores) == {"read_file": 1.0, "search_files": 0.0, "list_tasks": 0.0}


def test_scores_are_recorded_highest_first_whatever_order_the_ballot_used(
    tools: list[dict[str, Any]],
) -> None:
    ballot = ReturnsBallot({"list_tasks": 0.1, "search_files": 0.3, "read_file": 0.9})
    decision = Governor(ballot, thresholds=THRESHOLDS).decide(user_turn(), tools)
    assert list(decision.scores) == ["read_file", "search_files", "list_tasks"]
    with pytest.raises(TypeError):
        decision.scores["read_file"] = 0.0  # type: ignore[index]


@pytest.mark.parametrize("returned", ["", "   ", 42, True])
def test_a_rule_that_returns_neither_none_nor_a_sentence_fails_the_decision(
    tools: list[dict[str, Any]], returned: Any
) -> None:
    gov = Governor(FixedBallot(CONFIDENT), thresholds=THRESHOLDS, risk_rules=[lambda *_: returned])
    assert gov.decide(user_turn(), tools).path is Path.ERROR_DELEGATE


@pytest.mark.parametrize(
    "tools",
    [
        [{"description": "no name"}],
        [{"name": ""}],
        [{"name": "a"}, {"type": "function", "function": {"name": "a"}}],
        ["read_file"],
        {"name": "read_file"},
        [{"type": "function", "function": "read_file"}],
    ],
    ids=["no-name", "empty-name", "duplicate", "string-tool", "not-a-list", "function-str"],
)
def test_malformed_tools_fail_the_decision_both_ways(tools: Any) -> None:
    ballot = FixedBallot({})
    decision = Governor(ballot, thresholds=THRESHOLDS).decide(user_turn(), tools)
    assert decision.path is Path.ERROR_DELEGATE
    assert decision.error is not None and "InvalidToolSchemaError" in decision.error
    assert ballot.calls == 0  # checked before the ballot runs

    with pytest.raises(DecisionError) as caught:
        Governor(ballot, thresholds=THRESHOLDS, on_error="raise").decide(user_turn(), tools)
    assert isinstance(caught.value.__cause__, InvalidToolSchemaError)


def test_a_host_whose_messages_fail_takes_the_error_path(tools: list[dict[str, Any]]) -> None:
    class BrokenHost(ScriptedHost):
        def messages(self) -> list[dict[str, Any]]:
            raise ConnectionError("session store down")

    model = ScriptedModel([Step(text_response("ok"), force_tool=None, directive="")])
    host = BrokenHost(tools, user_turn(), model)
    gov = Governor(FixedBallot(CONFIDENT), thresholds=THRESHOLDS)
    gov.step(host)
    assert gov.last is not None and gov.last.path is Path.ERROR_DELEGATE
    assert "session store down" in (gov.last.error or "")

    raising = Governor(FixedBallot(CONFIDENT), thresholds=THRESHOLDS, on_error="raise")
    with pytest.raises(DecisionError, match="session store down"):
        raising.step(BrokenHost(tools, user_turn(), ScriptedModel([])))


def test_an_async_host_in_step_is_refused_before_any_effect(tools: list[dict[str, Any]]) -> None:
    from jevqueue.testing import AsyncScriptedHost

    host = AsyncScriptedHost(tools, user_turn(), ScriptedModel([]))
    with pytest.raises(ConfigurationError, match="astep"):
        Governor(FixedBallot(CONFIDENT), thresholds=THRESHOLDS).step(host)  # type: ignore[arg-type]
    assert host.calls == []


def test_keyboard_interrupt_in_the_ballot_is_not_swallowed(tools: list[dict[str, Any]]) -> None:
    class CtrlC:
        def score(self, messages: Any, tools: Any) -> Any:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Governor(CtrlC(), thresholds=THRESHOLDS).decide(user_turn(), tools)


def test_repr_names_the_settings() -> None:
    text = repr(Governor(FixedBallot({}), thresholds=THRESHOLDS, static_tools={"a": {}}))
    assert "FixedBallot" in text and "['a']" in text and "on_error='delegate'" in text
