"""Hermes runs a tool when a hook raises; the guard never lets that happen."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "run_agent",
    reason="Hermes Agent is not installed here: it runs in its own venv (make test builds it; "
    'pip install "jevqueue[hermes]")',
)

from hermes_cli.plugins import get_plugin_manager
from hermes_kit import register_tools
from jevqueue import ExecutionContext, PolicyEnforcementPoint
from jevqueue.plugins.hermes import PolicyGuard
from jevqueue.testing.conformance import ConformancePolicy, conformance_tools
from jevqueue.testing.recording_audit import RecordingAuditSink
from model_tools import handle_function_call


@contextmanager
def installed(kind: str, name: str, callback: Any) -> Iterator[None]:
    manager = get_plugin_manager()
    table = manager._hooks if kind == "hook" else manager._middleware
    table.setdefault(name, []).append(callback)
    try:
        yield
    finally:
        table[name] = [entry for entry in table[name] if entry != callback]


@contextmanager
def guarding(guard: PolicyGuard) -> Iterator[None]:
    with (
        installed("hook", "pre_tool_call", guard.pre_tool_call),
        installed("middleware", "tool_execution", guard.tool_execution),
    ):
        yield


class Broken:
    """A PEP whose every check fails with a bug."""

    def enforce(self, action: Any, records: Any = ()) -> Any:
        raise RuntimeError("the policy store is unreachable")


@pytest.fixture
def tools() -> Any:
    return conformance_tools()


@pytest.fixture
def context(tmp_path: Path) -> ExecutionContext:
    return ExecutionContext(
        task_id="hermes", actor_id="tester", workspace=str(tmp_path), git_sha="0123456"
    )


def weather(tools: Any) -> Any:
    return next(tool for tool in tools if tool.name == "get_weather")


def test_control_hermes_runs_the_tool_when_a_plain_hook_raises(tools: Any) -> None:
    register_tools(tools)

    def raising_hook(**_: Any) -> Any:
        raise RuntimeError("a bug in a hook")

    with installed("hook", "pre_tool_call", raising_hook):
        handle_function_call("get_weather", {"city": "Oslo"}, tool_call_id="c1", session_id="")
    assert weather(tools).calls == [{"city": "Oslo"}], "Hermes is expected to fail open here"


def test_a_check_that_fails_blocks_the_call(tools: Any, context: ExecutionContext) -> None:
    guard = PolicyGuard(pep=Broken(), specs=register_tools(tools), context=context)
    with guarding(guard):
        result = handle_function_call(
            "get_weather", {"city": "Oslo"}, tool_call_id="c1", session_id=""
        )
    assert weather(tools).calls == []
    assert "could not complete" in json.loads(result)["error"]


def test_a_call_that_skipped_the_hook_is_refused_by_the_gate(
    tools: Any, context: ExecutionContext
) -> None:
    audit = RecordingAuditSink()
    pep = PolicyEnforcementPoint(ConformancePolicy(), audit_logger=audit)
    guard = PolicyGuard(pep=pep, specs=register_tools(tools), context=context)
    with guarding(guard):
        result = handle_function_call(
            "get_weather",
            {"city": "Oslo"},
            tool_call_id="c1",
            session_id="",
            skip_pre_tool_call_hook=True,
        )
    assert weather(tools).calls == []
    assert "not the call the policy judged" in result
    assert audit.results == ["DENY"], "the unjudged call's refusal must be audited"


def test_a_call_changed_after_it_was_judged_is_refused_and_each_runs_once(
    tools: Any, context: ExecutionContext
) -> None:
    pep = PolicyEnforcementPoint(ConformancePolicy(), audit_logger=RecordingAuditSink())
    guard = PolicyGuard(pep=pep, specs=register_tools(tools), context=context)
    ran: list[Any] = []
    assert (
        guard.pre_tool_call(tool_name="get_weather", args={"city": "Oslo"}, tool_call_id="c1")
        is None
    )
    changed = guard.tool_execution(
        tool_name="get_weather", args={"city": "Paris"}, next_call=ran.append, tool_call_id="c1"
    )
    assert ran == [] and "not the call the policy judged" in changed
    assert (
        guard.pre_tool_call(tool_name="get_weather", args={"city": "Oslo"}, tool_call_id="c2")
        is None
    )
    guard.tool_execution(
        tool_name="get_weather", args={"city": "Oslo"}, next_call=ran.append, tool_call_id="c2"
    )
    again = guard.tool_execution(
        tool_name="get_weather", args={"city": "Oslo"}, next_call=ran.append, tool_call_id="c2"
    )
    assert ran == [{"city": "Oslo"}] and "already run" in again
