"""PolicyToolRunner beyond the conformance suite: what never runs, and what the model reads."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("httpx", reason='the openai plugin needs pip install "jevqueue[openai]"')

from jevqueue.errors import ConfigurationError
from jevqueue.plugins.openai import (
    PolicyToolRunner,
    tool_call_completion,
    tool_calls_completion,
)
from jevqueue.policy import (
    ExecutionContext,
    PolicyEnforcementPoint,
    ToolRegistry,
    ToolSpec,
    Verdict,
)
from jevqueue.testing.recording_audit import RecordingAuditSink


class ByToolName:
    """A policy decided by tool name: ``archive`` is repaired into ``archive_copy``."""

    revision = "test-1"

    def evaluate(self, action: Any) -> Verdict:
        if action.tool == "archive":
            return Verdict.repair("archive_copy", {"path": "a.txt"}, "archive a copy instead")
        return Verdict.allow("allowed")


@pytest.fixture
def setup(tmp_path: Any) -> tuple[PolicyToolRunner, list[tuple[str, dict[str, Any]]], Any]:
    ran: list[tuple[str, dict[str, Any]]] = []

    def tool(name: str) -> Any:
        def run(**arguments: Any) -> Any:
            ran.append((name, arguments))
            if name == "explode":
                raise RuntimeError("disk full")
            return {"ok": True}

        return run

    registry = ToolRegistry()
    for name in ("lookup", "archive", "explode"):
        registry.register(ToolSpec(name=name, side_effects=frozenset({"network"})))
    audit = RecordingAuditSink()
    runner = PolicyToolRunner(
        {name: tool(name) for name in ("lookup", "archive", "explode")},
        pep=PolicyEnforcementPoint(ByToolName(), audit_logger=audit),
        specs=registry,
        context=ExecutionContext(
            task_id="t-1", actor_id="agent-1", workspace=str(tmp_path), git_sha="a1b2c3d"
        ),
    )
    return runner, ran, audit


def test_runs_each_call_of_a_response_and_answers_each_id(setup: Any) -> None:
    runner, ran, audit = setup
    response = tool_calls_completion([("lookup", {"q": "a"}), ("lookup", {"q": "b"})])

    results = runner.run(response)

    ids = [call["id"] for call in response["choices"][0]["message"]["tool_calls"]]
    assert [result.message()["tool_call_id"] for result in results] == ids
    assert [result.content for result in results] == ['{"ok": true}', '{"ok": true}']
    assert ran == [("lookup", {"q": "a"}), ("lookup", {"q": "b"})]
    assert len(audit.events) == 2


@pytest.mark.parametrize(
    ("name", "arguments", "says"),
    [
        ("lookup", "{not json", "not a JSON object"),
        ("lookup", "[1, 2]", "not a JSON object"),
        ("unknown_tool", "{}", "refused before evaluation"),
        ("archive", '{"path": "a.txt"}', "proposes a repaired call instead"),
    ],
)
def test_what_never_runs_reaches_the_model_as_an_error(
    setup: Any, name: str, arguments: str, says: str
) -> None:
    runner, ran, audit = setup

    result = runner.run_call(name, arguments, call_id="call_9")

    assert ran == []
    assert result.is_error and not result.executed
    assert says in result.content
    assert result.message() == {"role": "tool", "tool_call_id": "call_9", "content": result.content}
    assert audit.events, "a refused call is audited too"


def test_a_tool_that_raises_is_an_error_message_not_a_crash(setup: Any) -> None:
    runner, ran, _ = setup

    result = runner.run(tool_call_completion("explode", {}))[0]

    assert ran == [("explode", {})]
    assert result.executed and result.is_error
    assert "RuntimeError: disk full" in result.content


def test_prose_runs_nothing(setup: Any) -> None:
    runner, ran, _ = setup
    assert runner.run({"choices": [{"message": {"role": "assistant", "content": "hi"}}]}) == []
    assert ran == []


def test_a_function_without_a_declaration_is_refused_up_front(tmp_path: Any) -> None:
    with pytest.raises(ConfigurationError, match="no policy declaration"):
        PolicyToolRunner(
            {"ghost": lambda: None},
            pep=PolicyEnforcementPoint(ByToolName()),
            specs=ToolRegistry(),
            context=ExecutionContext(
                task_id="t", actor_id="a", workspace=str(tmp_path), git_sha="a1b2c3d"
            ),
        )
