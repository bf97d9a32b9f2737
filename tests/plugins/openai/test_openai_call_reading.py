"""The governor's read-back and PolicyToolRunner read a call the same way.

A call is named only by ``{"type": "function", "function": {"name": ...}}``. A call that
names one tool in another field (``type: "custom"``, ``custom.name``) and another in
``function.name`` must neither pass a forced turn nor run.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

pytest.importorskip("httpx", reason='the openai plugin needs pip install "jevqueue[openai]"')

from jevqueue import Governor, Path, Thresholds
from jevqueue.errors import ProviderDisobeyedError
from jevqueue.plugins.openai import (
    UNNAMED_CALL,
    OpenAIChatHost,
    PolicyToolRunner,
    ScriptedChatTransport,
    called_tool_names,
    tool_call_completion,
)
from jevqueue.policy import (
    ExecutionContext,
    PolicyEnforcementPoint,
    ToolRegistry,
    ToolSpec,
    Verdict,
)
from jevqueue.testing.recording_audit import RecordingAuditSink

TOOL_NAMES = ("read_file", "run_command")


def _tool(name: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": name,
            "parameters": {"type": "object", "properties": {}},
        },
    }


class FixedBallot:
    def __init__(self, scores: Mapping[str, float]) -> None:
        self.scores = dict(scores)

    def score(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> Mapping[str, float]:
        return self.scores


class AllowAll:
    revision = "allow-all"

    def evaluate(self, action: Any) -> Verdict:
        return Verdict.allow("allowed")


def _two_names_in_one_call(body: Mapping[str, Any]) -> dict[str, Any]:
    """One call: ``custom.name`` says read_file, ``function.name`` says run_command."""
    response = tool_call_completion("run_command", {})
    call = response["choices"][0]["message"]["tool_calls"][0]
    call["type"] = "custom"
    call["custom"] = {"name": "read_file", "input": ""}
    return response


def _message(**fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": {"role": "assistant", **fields}}]}


@pytest.fixture
def runner(tmp_path: Any) -> tuple[PolicyToolRunner, list[tuple[str, dict[str, Any]]], Any]:
    ran: list[tuple[str, dict[str, Any]]] = []

    def tool(name: str) -> Any:
        def run(**arguments: Any) -> str:
            ran.append((name, arguments))
            return f"{name} done"

        return run

    registry = ToolRegistry()
    for name in TOOL_NAMES:
        registry.register(ToolSpec(name=name, side_effects=frozenset({"network"})))
    audit = RecordingAuditSink()
    policy_runner = PolicyToolRunner(
        {name: tool(name) for name in TOOL_NAMES},
        pep=PolicyEnforcementPoint(AllowAll(), audit_logger=audit),
        specs=registry,
        context=ExecutionContext(
            task_id="t-1", actor_id="agent-1", workspace=str(tmp_path), git_sha="a1b2c3d"
        ),
    )
    return policy_runner, ran, audit


def test_a_call_naming_two_tools_is_blocked_and_nothing_executes(runner: Any) -> None:
    policy_runner, ran, _ = runner
    transport = ScriptedChatTransport(_two_names_in_one_call)
    host = OpenAIChatHost(
        model="gpt-test",
        messages=[{"role": "user", "content": "read notes"}],
        tools=[_tool(name) for name in TOOL_NAMES],
        transport=transport,
    )
    governor = Governor(
        FixedBallot({"read_file": 0.95, "run_command": 0.05}),
        thresholds=Thresholds(confident=0.7, margin=0.2, floor=0.2),
    )
    replies: list[Any] = []

    with pytest.raises(ProviderDisobeyedError) as caught:
        replies.append(governor.step(host))

    assert replies == []
    assert transport.requests[0]["tool_choice"] == {
        "type": "function",
        "function": {"name": "read_file"},
    }
    assert caught.value.expected == ["read_file"]
    assert governor.last is not None and governor.last.path is Path.TOOL
    assert governor.last.error is not None
    # Even handed the reply directly, the runner refuses the call it could not name.
    (result,) = policy_runner.run(_two_names_in_one_call({}))
    assert ran == []
    assert not result.executed and result.is_error
    assert result.name == UNNAMED_CALL


@pytest.mark.parametrize(
    "call",
    [
        {"type": "custom", "custom": {"name": "read_file"}, "function": {"name": "run_command"}},
        {"type": "custom", "custom": {"name": "run_command", "input": ""}},
        {"type": None, "function": {"name": "run_command", "arguments": "{}"}},
        {"type": "function", "function": {"name": ["run_command"], "arguments": "{}"}},
        {"type": "function", "function": {"arguments": "{}"}},
        {"type": "function", "function": "run_command"},
        {"type": "function", "run_command": {"name": "run_command"}},
        "run_command",
    ],
    ids=[
        "custom-with-function",
        "custom-only",
        "type-null",
        "name-not-a-string",
        "name-missing",
        "function-not-an-object",
        "name-under-another-key",
        "not-an-object",
    ],
)
def test_the_runner_refuses_and_audits_a_call_it_cannot_name(runner: Any, call: Any) -> None:
    policy_runner, ran, audit = runner
    response = _message(tool_calls=[{"id": "call_7", **call} if isinstance(call, dict) else call])

    results = policy_runner.run(response)

    assert called_tool_names(response) == [UNNAMED_CALL]
    assert [result.name for result in results] == [UNNAMED_CALL]
    (result,) = results
    assert ran == []
    assert not result.executed and result.is_error
    assert "name cannot be read" in result.content
    if isinstance(call, dict):
        assert result.message() == {
            "role": "tool",
            "tool_call_id": "call_7",
            "content": result.content,
        }
    (event,) = audit.events
    assert event["result"] == "DENY" and event["tool"] == UNNAMED_CALL


@pytest.mark.parametrize(
    "response",
    [
        tool_call_completion("read_file", {}),
        _two_names_in_one_call({}),
        _message(
            tool_calls=[
                {"type": "function", "function": {"name": "read_file", "arguments": "{}"}},
                {"function": {"name": "run_command", "arguments": "{}"}},
                {"type": "custom", "custom": {"name": "read_file"}},
            ]
        ),
        _message(function_call={"name": "run_command", "arguments": "{}"}),
        _message(function_call={"name": 7, "arguments": "{}"}),
        _message(
            tool_calls=[{"type": "function", "function": {"name": "read_file"}}],
            function_call={"name": "run_command"},
        ),
        _message(tool_calls="garbage"),
        _message(content="prose"),
    ],
    ids=[
        "one-call",
        "two-names",
        "mixed",
        "legacy",
        "legacy-unnamed",
        "both",
        "not-a-list",
        "prose",
    ],
)
def test_the_runner_handles_exactly_the_calls_the_read_back_reports(
    runner: Any, response: dict[str, Any]
) -> None:
    policy_runner, ran, _ = runner
    read_back = called_tool_names(copy.deepcopy(response))

    results = policy_runner.run(response)

    assert [result.name for result in results] == read_back
    assert [name for name, _ in ran] == [name for name in read_back if name != UNNAMED_CALL]


def test_a_legacy_function_call_is_judged_run_and_answered_as_a_function_message(
    runner: Any,
) -> None:
    policy_runner, ran, audit = runner
    response = _message(function_call={"name": "read_file", "arguments": '{"path": "a.txt"}'})

    (result,) = policy_runner.run(response)

    assert ran == [("read_file", {"path": "a.txt"})]
    assert result.executed and result.legacy
    assert result.message() == {
        "role": "function",
        "name": "read_file",
        "content": "read_file done",
    }
    assert len(audit.events) == 1
