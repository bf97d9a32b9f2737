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
from jevqueue.errors import ApprovalDeclinedError, ConfigurationError, InvalidApprovalError
from jevqueue.plugins.llamaindex import (
    ApprovalRequiredEvent,
    ApprovalResponseEvent,
    GovernedFunctionAgent,
    ToolCallRefusedError,
    governed_tools,
    tool_spec,
)
from jevqueue.plugins.llamaindex.testing import ScriptedFunctionCallingLLM, scripted_tool_calls
from jevqueue.policy import ApprovalRequest, AuthorityApprover
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent, ToolCall, ToolCallResult
from llama_index.core.tools import FunctionTool
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
            reply = answer(event)
            if reply is not None:
                handler.ctx.send_event(reply)
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
    assert "approves another action" in results[0].tool_output.content
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


def test_an_answer_for_another_digest_does_not_wake_a_restored_call(kit: Kit) -> None:
    """After Context.from_dict, LlamaIndex restores a waiter without its filter until the
    step runs again: a stray answer sent first must not settle the call (it used to be
    judged with the stray record and refused, and the right answer then woke nothing)."""
    agent, llm = agent_for(kit, [scripted_tool_calls(("run_command", LS)), "Listed."])

    async def go() -> tuple[str, str, list[ToolCallResult]]:
        handler = agent.run(user_msg="list")
        async for event in handler.stream_events():
            if isinstance(event, ApprovalRequiredEvent):
                data = json.loads(json.dumps(handler.ctx.to_dict()))
                await handler.cancel_run()
                break
        resumed = agent.run(ctx=Context.from_dict(agent, data))
        stray = kit.authority.issue("sha256:" + "1" * 64)
        resumed.ctx.send_event(ApprovalResponseEvent.approve(stray))
        resumed.ctx.send_event(
            ApprovalResponseEvent.approve(kit.authority.issue(event.action_digest))
        )
        results = [e async for e in resumed.stream_events() if isinstance(e, ToolCallResult)]
        return str(await resumed), event.action_digest, results

    result, digest, results = run(go)
    assert result == "Listed."
    assert [r.tool_output.is_error for r in results] == [False], results
    assert kit.names_run() == ["run_command"]
    assert audited(kit, digest) == [
        ("ALLOW_WITH_OBLIGATIONS", False),
        ("ALLOW_WITH_OBLIGATIONS", True),
    ]
    llm.assert_complete()


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
    assert "already used" in results[1].tool_output.content
    assert kit.names_run() == ["run_command"]


def test_approve_reads_only_approval_records() -> None:
    with pytest.raises(InvalidApprovalError):
        ApprovalResponseEvent.approve("yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidApprovalError):
        ApprovalResponseEvent.approve({"action_digest": "sha256:nothex"})


def test_answer_needs_the_request_of_this_process(kit: Kit) -> None:
    agent, _ = agent_for(kit, [scripted_tool_calls(("run_command", LS))])

    async def pause() -> ApprovalRequiredEvent:
        handler = agent.run(user_msg="list")
        async for event in handler.stream_events():
            if isinstance(event, ApprovalRequiredEvent):
                await handler.cancel_run()
                return event
        raise AssertionError("no approval was asked for")

    event = run(pause)
    restored = ApprovalRequiredEvent.model_validate(json.loads(event.model_dump_json()))
    assert restored.approval_request is None and restored.request == event.request
    with pytest.raises(ConfigurationError, match="deserialized"):
        ApprovalResponseEvent.answer(restored, AuthorityApprover(kit.authority))
    answered = ApprovalResponseEvent.answer(event, AuthorityApprover(kit.authority))
    assert answered.action_digest == event.action_digest and not answered.declined


def test_pause_serialize_and_resume_in_another_process(tmp_path: Path) -> None:
    import resume_agent

    folder = tmp_path / "run"
    folder.mkdir()
    # The command names a folder the agent read in the weather tool's output: the call's
    # provenance says so, and the process that resumes reads it again from the restored
    # memory, so the approval of the digest shown here still applies there.
    listing = {"command": "ls ./forecasts/oslo", "cwd": "."}
    agent, llm = resume_agent.build_agent(
        folder,
        [
            scripted_tool_calls(("get_weather", {"city": "Oslo"}), ids=["call-weather"]),
            scripted_tool_calls(("run_command", listing)),
        ],
    )

    async def pause() -> tuple[dict[str, Any], str]:
        handler = agent.run(user_msg="weather in Oslo, and list the week's forecasts")
        digest = ""
        weather_done = False
        async for event in handler.stream_events():
            if isinstance(event, ApprovalRequiredEvent):
                digest = event.action_digest
                (origin,) = [o for o in event.provenance or () if o.get("kind") == "path"]
                assert origin["label"] == "untrusted", event.provenance
                assert "get_weather's output (call call-weather)" in origin["says"], origin
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
        [
            "run_command",
            {"command": "ls ./forecasts/oslo", "cwd": str((folder / "workspace").resolve())},
        ],
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


def test_the_pause_carries_the_core_request_and_one_approver_answers_it(kit: Kit) -> None:
    approver = AuthorityApprover(kit.authority)
    agent, llm = agent_for(kit, [scripted_tool_calls(("run_command", LS)), "Listed."])
    result, asked, _ = run(
        lambda: answer_with(
            agent.run(user_msg="list"),
            lambda event: ApprovalResponseEvent.answer(event, approver),
        )
    )
    assert str(result) == "Listed."
    (event,) = asked
    (request,) = approver.requests
    assert type(request) is ApprovalRequest and event.approval_request is request
    assert event.request == request.to_dict()
    assert request.action_digest == event.action_digest
    assert dict(request.arguments) == LS and request.context == kit.context
    assert kit.names_run() == ["run_command"]
    llm.assert_complete()


def test_a_decline_with_a_reason_reaches_the_model_in_the_guards_words(kit: Kit) -> None:
    def approver(request: ApprovalRequest) -> None:
        raise ApprovalDeclinedError("no shell before the release")

    agent, _ = agent_for(kit, [scripted_tool_calls(("run_command", LS)), "Understood."])
    _, _, results = run(
        lambda: answer_with(
            agent.run(user_msg="list"),
            lambda event: ApprovalResponseEvent.answer(event, approver),
        )
    )
    output = results[0].tool_output
    assert output.is_error and kit.runs == []
    assert output.content == (
        "jevqueue denied the call to 'run_command': the approver declined: no shell before "
        "the release; the call was not run"
    )


@pytest.mark.parametrize("flavour", ["plain", "async"])
def test_an_inline_approver_answers_without_pausing_the_run(kit: Kit, flavour: str) -> None:
    shown: list[ApprovalRequest] = []

    def plain(request: ApprovalRequest) -> ApprovalRecord:
        shown.append(request)
        return kit.authority.issue(request.action_digest)

    async def asynchronous(request: ApprovalRequest) -> ApprovalRecord:
        return plain(request)

    llm = ScriptedFunctionCallingLLM(steps=[scripted_tool_calls(("run_command", LS)), "Listed."])
    agent = GovernedFunctionAgent(
        llm=llm,
        governor=fixed_governor(DELEGATE),
        tools=kit.tools,
        pep=kit.pep,
        specs=kit.specs(),
        context=kit.context,
        approver=plain if flavour == "plain" else asynchronous,
        streaming=False,
    )
    result, asked, results = run(
        lambda: answer_with(agent.run(user_msg="list"), lambda event: None)
    )
    assert str(result) == "Listed." and asked == []
    assert [r.tool_output.is_error for r in results] == [False]
    assert [type(r) for r in shown] == [ApprovalRequest]
    assert kit.runs == [("run_command", {"command": "ls", "cwd": str(kit.workspace.resolve())})]


def test_an_inline_approver_that_fails_is_reported_with_its_own_error(kit: Kit) -> None:
    def approver(request: ApprovalRequest) -> Any:
        return True  # a bare "yes" cannot be verified

    (shell,) = [
        t
        for t in governed_tools(
            kit.tools, pep=kit.pep, specs=kit.specs(), context=kit.context, approver=approver
        )
        if t.metadata.name == "run_command"
    ]
    with pytest.raises(ToolCallRefusedError, match=r"the approver failed \(ApproverAnswerError"):
        shell.call(command="ls", cwd=".")
    assert kit.runs == []


def test_an_unanswered_approval_times_out_and_nothing_runs(kit: Kit) -> None:
    llm = ScriptedFunctionCallingLLM(
        steps=[
            scripted_tool_calls(("run_command", LS)),
            scripted_tool_calls(("run_command", LS)),
            "Nobody answered.",
        ]
    )
    tools = governed_tools(
        kit.tools, pep=kit.pep, specs=kit.specs(), context=kit.context, approval_timeout=0.2
    )
    agent = FunctionAgent(llm=llm, tools=tools, streaming=False)
    result, asked, results = run(
        lambda: answer_with(agent.run(user_msg="list"), lambda event: None)
    )
    assert str(result) == "Nobody answered."
    assert kit.runs == []
    assert [r.tool_output.is_error for r in results] == [True, True]
    assert all("Timed out" in r.tool_output.content for r in results)
    # The second, identical call was judged afresh (and asked again), not left waiting on
    # the first call's marker.
    assert len(asked) == 2
    assert [allowed for _, allowed in audited(kit, asked[0].action_digest)] == [False, False]


def test_a_call_cancelled_while_it_ran_is_not_run_again_on_resume(kit: Kit) -> None:
    """A step still running when the context is serialized is run again on resume: the
    guard knows the call id began once, so the tool does not run a second time."""
    ran: list[str] = []

    async def slow_weather(city: str) -> str:
        """Current weather forecast for a city, slowly."""
        ran.append(city)
        await asyncio.sleep(0.5)
        return "Sunny"

    tool = FunctionTool.from_defaults(async_fn=slow_weather)
    # Depending on when the context was serialized, LlamaIndex may deliver the in-progress
    # call once or twice on resume (each delivery is judged and refused; neither runs), and
    # then asks the model once or once per delivery: a second "Done." answers a second ask.
    llm = ScriptedFunctionCallingLLM(
        steps=[
            scripted_tool_calls(("slow_weather", {"city": "Oslo"}), ids=["call-1"]),
            "Done.",
            "Done.",
        ]
    )
    agent = GovernedFunctionAgent(
        llm=llm,
        governor=fixed_governor({"slow_weather": 0.4}),
        tools=[tool],
        pep=kit.pep,
        specs=[tool_spec(tool, side_effects={"network"})],
        context=kit.context,
        streaming=False,
    )

    async def go() -> tuple[str, list[ToolCallResult]]:
        handler = agent.run(user_msg="weather in Oslo")
        async for event in handler.stream_events():
            if isinstance(event, ToolCall):
                while not ran:
                    await asyncio.sleep(0.01)
                data = json.loads(json.dumps(handler.ctx.to_dict()))
                assert data["workers"]["call_tool"]["in_progress"], "the tool step had ended"
                await handler.cancel_run()
                break
        resumed = agent.run(ctx=Context.from_dict(agent, data))
        results = [e async for e in resumed.stream_events() if isinstance(e, ToolCallResult)]
        return str(await asyncio.wait_for(resumed, 30)), results

    result, results = run(go)
    assert result == "Done."
    assert ran == ["Oslo"], "the interrupted call ran again on resume"
    assert 1 <= len(results) <= 2, results
    assert all(r.tool_output.is_error for r in results)
    assert all("interrupted" in r.tool_output.content for r in results)
    assert 2 <= len(llm.requests) <= 1 + len(results), llm.requests


def test_a_decline_reaches_the_model_after_a_restore_into_a_fresh_agent(kit: Kit) -> None:
    """Restored into another agent (as in another process), whose guard never saw the
    pause: the decline is still the guard's refusal, and nothing runs."""
    first, _ = agent_for(kit, [scripted_tool_calls(("run_command", LS))])
    second, llm = agent_for(kit, ["Understood."])

    async def go() -> list[ToolCallResult]:
        handler = first.run(user_msg="list")
        async for event in handler.stream_events():
            if isinstance(event, ApprovalRequiredEvent):
                data = json.loads(json.dumps(handler.ctx.to_dict()))
                await handler.cancel_run()
                break
        resumed = second.run(ctx=Context.from_dict(second, data))
        resumed.ctx.send_event(ApprovalResponseEvent.decline(event.action_digest, "not today"))
        results = [e async for e in resumed.stream_events() if isinstance(e, ToolCallResult)]
        await resumed
        return results

    (result,) = run(go)
    assert kit.runs == []
    assert result.tool_output.is_error
    assert "the approver declined: not today" in result.tool_output.content
    llm.assert_complete()
