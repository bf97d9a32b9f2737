"""Approvals as workflow events, on real LlamaIndex agents: ask, answer, pause, resume.

The strong proof is :func:`test_pause_serialize_and_resume_in_another_process`: the run
pauses here, its context is serialized with ``ctx.to_dict()``, and a second Python process
rebuilds the agent, resumes from that data and answers the approval. The tools log every
run to a file and the audit log is one SQLite file, so both processes are counted.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jevqueue import ApprovalRecord
from jevqueue.audit import verify_audit_log
from jevqueue.errors import InvalidApprovalError
from jevqueue.plugins.llamaindex import (
    ApprovalRequiredEvent,
    ApprovalResponseEvent,
    GovernedFunctionAgent,
    governed_tools,
)
from jevqueue.plugins.llamaindex.testing import ScriptedFunctionCallingLLM, scripted_tool_calls
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent, ToolCallResult
from llama_index.core.workflow import Context, HumanResponseEvent, InputRequiredEvent
from llamaindex_kit import DELEGATE, Kit, fixed_governor, run

HERE = Path(__file__).resolve().parent
LS = {"command": "ls", "cwd": "."}


def agent_for(kit: Kit, steps: list[Any]) -> tuple[FunctionAgent, ScriptedFunctionCallingLLM]:
    llm = ScriptedFunctionCallingLLM(steps=steps)
    tools = governed_tools(kit.tools, pep=kit.pep, specs=kit.specs(), context=kit.context)
    return FunctionAgent(llm=llm, tools=tools, streaming=False), llm


async def answer_with(
    handler: Any, answer: Any
) -> tuple[Any, list[ApprovalRequiredEvent], list[ToolCallResult]]:
    """Run to the end, answering every approval request with ``answer(request)``."""
    asked: list[ApprovalRequiredEvent] = []
    results: list[ToolCallResult] = []
    async for event in handler.stream_events():
        if isinstance(event, ApprovalRequiredEvent):
            asked.append(event)
            handler.ctx.send_event(answer(event))
        elif isinstance(event, ToolCallResult):
            results.append(event)
    return await handler, asked, results


def audited(kit: Kit, digest: str) -> list[tuple[str, bool]]:
    return [
        (str(e["result"]), bool(e["allowed"]))
        for e in kit.audit.events
        if e.get("action_digest") == digest
    ]


def test_the_request_shows_the_exact_action_and_an_approval_runs_it_once(kit: Kit) -> None:
    agent, llm = agent_for(kit, [scripted_tool_calls(("run_command", LS)), "Listed."])
    result, asked, results = run(
        lambda: answer_with(
            agent.run(user_msg="list the files"),
            lambda request: ApprovalResponseEvent.approve(
                kit.authority.issue(request.action_digest)
            ),
        )
    )
    assert str(result) == "Listed."
    (request,) = asked
    assert isinstance(request, InputRequiredEvent)
    digest = "sha256:" + hashlib.sha256(request.canonical_action.encode()).hexdigest()
    assert request.action_digest == digest, "the canonical action is what the digest covers"
    assert request.tool_name == "run_command" and request.arguments == LS
    assert request.obligations == ["explicit_approval"]
    assert request.context["task_id"] == kit.context.task_id
    assert kit.runs == [("run_command", {"command": "ls", "cwd": str(kit.workspace.resolve())})]
    assert not results[0].tool_output.is_error
    # One record asked for the approval, one allowed the run: the replayed step after the
    # answer did not evaluate (nor audit) again.
    assert audited(kit, digest) == [
        ("ALLOW_WITH_OBLIGATIONS", False),
        ("ALLOW_WITH_OBLIGATIONS", True),
    ]
    llm.assert_complete()


def test_a_decline_reaches_the_model_and_nothing_runs(kit: Kit) -> None:
    agent, llm = agent_for(kit, [scripted_tool_calls(("run_command", LS)), "Understood."])
    result, asked, results = run(
        lambda: answer_with(
            agent.run(user_msg="list the files"),
            lambda request: ApprovalResponseEvent.decline(request.action_digest, "not now"),
        )
    )
    assert str(result) == "Understood."
    assert kit.runs == []
    output = results[0].tool_output
    assert output.is_error and "declined" in output.content and "not now" in output.content
    assert len(audited(kit, asked[0].action_digest)) == 1
    llm.assert_complete()


def test_an_approval_for_another_action_authorises_nothing(kit: Kit) -> None:
    other = kit.authority.issue("sha256:" + "0" * 64)
    agent, _ = agent_for(kit, [scripted_tool_calls(("run_command", LS)), "Not run."])

    def forged(request: ApprovalRequiredEvent) -> ApprovalResponseEvent:
        # Addressed to the waiting call, carrying a record bound to another digest.
        return ApprovalResponseEvent(
            response="approved", action_digest=request.action_digest, record=other.to_dict()
        )

    _, asked, results = run(lambda: answer_with(agent.run(user_msg="list"), forged))
    assert kit.runs == []
    assert results[0].tool_output.is_error
    assert "not fulfilled" in results[0].tool_output.content
    assert [allowed for _, allowed in audited(kit, asked[0].action_digest)] == [False, False]


def test_an_answer_for_another_digest_does_not_wake_the_call(kit: Kit) -> None:
    agent, _ = agent_for(kit, [scripted_tool_calls(("run_command", LS)), "Done."])

    async def go() -> tuple[Any, list[ToolCallResult]]:
        handler = agent.run(user_msg="list")
        results: list[ToolCallResult] = []
        async for event in handler.stream_events():
            if isinstance(event, ApprovalRequiredEvent):
                stray = kit.authority.issue("sha256:" + "1" * 64)
                handler.ctx.send_event(ApprovalResponseEvent.approve(stray))
                handler.ctx.send_event(HumanResponseEvent(response="yes"))
                handler.ctx.send_event(
                    ApprovalResponseEvent.approve(kit.authority.issue(event.action_digest))
                )
            elif isinstance(event, ToolCallResult):
                results.append(event)
        return await handler, results

    _, results = run(go)
    assert [r.tool_output.is_error for r in results] == [False]
    assert kit.names_run() == ["run_command"]


def test_an_approval_is_single_use(kit: Kit) -> None:
    records: list[ApprovalRecord] = []

    def once(request: ApprovalRequiredEvent) -> ApprovalResponseEvent:
        if not records:
            records.append(kit.authority.issue(request.action_digest))
        return ApprovalResponseEvent.approve(records[0])

    agent, _ = agent_for(
        kit,
        [
            scripted_tool_calls(("run_command", LS)),
            scripted_tool_calls(("run_command", LS)),
            "Ran it once.",
        ],
    )
    _, asked, results = run(lambda: answer_with(agent.run(user_msg="list twice"), once))
    assert len(asked) == 2 and asked[0].action_digest == asked[1].action_digest
    assert [r.tool_output.is_error for r in results] == [False, True]
    assert kit.names_run() == ["run_command"]


def test_approve_reads_only_approval_records() -> None:
    with pytest.raises(InvalidApprovalError):
        ApprovalResponseEvent.approve("yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidApprovalError):
        ApprovalResponseEvent.approve({"action_digest": "sha256:nothex"})


def test_pause_serialize_and_resume_in_another_process(tmp_path: Path) -> None:
    import resume_agent

    folder = tmp_path / "run"
    folder.mkdir()
    agent, llm = resume_agent.build_agent(
        folder,
        [scripted_tool_calls(("get_weather", {"city": "Oslo"}), ("run_command", LS))],
    )

    async def pause() -> tuple[dict[str, Any], str]:
        handler = agent.run(user_msg="weather in Oslo, and list the files")
        digest = ""
        weather_done = False
        async for event in handler.stream_events():
            if isinstance(event, ApprovalRequiredEvent):
                digest = event.action_digest
            elif isinstance(event, ToolCallResult) and event.tool_name == "get_weather":
                weather_done = True
            if digest and weather_done:
                # Serialized once the run only waits: a step still running when the
                # context is serialized is run again on resume (LlamaIndex's replay).
                # The ToolCallResult event is streamed before its step has finished, so
                # wait until no tool step is in progress, only the approval's waiter.
                data = handler.ctx.to_dict()
                for _ in range(500):
                    if not data["workers"]["call_tool"]["in_progress"]:
                        break
                    await asyncio.sleep(0.01)
                    data = handler.ctx.to_dict()
                assert not data["workers"]["call_tool"]["in_progress"], "a tool step never ended"
                await handler.cancel_run()
                return data, digest
        raise AssertionError("the run finished without asking for an approval")

    data, digest = run(pause)
    llm.assert_complete()
    # Here the weather call ran, and the shell command waits.
    assert [name for name, _ in resume_agent.runs(folder)] == ["get_weather"]
    (folder / "context.json").write_text(json.dumps(data))
    (folder / "digest.txt").write_text(digest)

    second = subprocess.run(
        [sys.executable, str(HERE / "resume_agent.py"), str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=HERE,
    )
    assert second.returncode == 0, second.stderr[-3000:]
    assert "Listed the files" in second.stdout
    # Across both processes: every call ran exactly once, the gated one after approval.
    ran = resume_agent.runs(folder)
    assert ran == [
        ["get_weather", {"city": "Oslo"}],
        ["run_command", {"command": "ls", "cwd": str((folder / "workspace").resolve())}],
    ], ran
    report = verify_audit_log(folder / "audit.sqlite")
    assert report.ok, report
    from jevqueue.audit import SQLiteAuditLog

    with SQLiteAuditLog(folder / "audit.sqlite") as log:
        records = [(r.action_digest, r.result, r.allowed) for r in log.records()]
    gated = [(result, allowed) for d, result, allowed in records if d == digest]
    assert gated == [("ALLOW_WITH_OBLIGATIONS", False), ("ALLOW_WITH_OBLIGATIONS", True)], records
    assert len(records) == 3, "one record for the weather call, two for the approved command"


def test_the_serialized_context_restores_in_process_too(kit: Kit) -> None:
    agent, _ = agent_for(kit, [scripted_tool_calls(("run_command", LS)), "Listed."])

    async def go() -> str:
        handler = agent.run(user_msg="list")
        async for event in handler.stream_events():
            if isinstance(event, ApprovalRequiredEvent):
                data = json.loads(json.dumps(handler.ctx.to_dict()))
                await handler.cancel_run()
                break
        resumed = agent.run(ctx=Context.from_dict(agent, data))
        resumed.ctx.send_event(
            ApprovalResponseEvent.approve(kit.authority.issue(event.action_digest))
        )
        return str(await resumed)

    assert run(go) == "Listed."
    assert kit.names_run() == ["run_command"]
    assert len(audited(kit, kit.audit.events[0]["action_digest"])) == 2


def test_approvals_inside_an_agent_workflow_with_streaming(kit: Kit) -> None:
    llm = ScriptedFunctionCallingLLM(steps=[scripted_tool_calls(("run_command", LS)), "Listed."])
    agent = GovernedFunctionAgent(
        name="ops",
        description="Runs commands",
        llm=llm,
        governor=fixed_governor(DELEGATE),
        tools=kit.tools,
        pep=kit.pep,
        specs=kit.specs(),
        context=kit.context,
        streaming=True,
    )
    workflow = AgentWorkflow(agents=[agent], root_agent="ops")
    result, asked, results = run(
        lambda: answer_with(
            workflow.run(user_msg="list the files"),
            lambda request: ApprovalResponseEvent.approve(
                kit.authority.issue(request.action_digest)
            ),
        )
    )
    assert str(result) == "Listed."
    assert len(asked) == 1 and not results[0].tool_output.is_error
    assert kit.names_run() == ["run_command"]
    assert len(audited(kit, asked[0].action_digest)) == 2
