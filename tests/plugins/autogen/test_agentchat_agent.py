"""A real AssistantAgent, governed and policed, against the scripted model client."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "autogen_agentchat", reason='AgentChat is not installed: pip install "jevqueue[autogen]"'
)

from agentchat_kit import Kit
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import (
    ModelClientStreamingChunkEvent,
    TextMessage,
    ToolCallSummaryMessage,
)
from autogen_core.models import SystemMessage, UserMessage
from autogen_core.tools import FunctionTool, StaticWorkbench
from autogen_kit import WEATHER, governor
from jevqueue import ConfigurationError, ProviderDisobeyedError
from jevqueue import Path as RoutePath
from jevqueue.errors import ApprovalDeclinedError, ApprovalRequiredError
from jevqueue.plugins.autogen import (
    ApprovalRequest,
    GovernedChatCompletionClient,
    PolicyWorkbench,
    tool_spec,
)
from jevqueue.plugins.autogen.testing import ScriptedChatCompletionClient, tool_call
from jevqueue.policy import ApprovalRequest as CoreApprovalRequest


@pytest.fixture
def kit(workspace: Path) -> Kit:
    return Kit(workspace)


def agent(kit: Kit, client: Any, **kwargs: Any) -> AssistantAgent:
    workbench = kwargs.pop("workbench", None) or kit.workbench(
        approver=kwargs.pop("approver", None)
    )
    return AssistantAgent("assistant", model_client=client, workbench=workbench, **kwargs)


def run(assistant: AssistantAgent, task: str) -> Any:
    return asyncio.run(assistant.run(task=task))


def test_a_forced_turn_runs_the_tool_once_and_the_next_turn_is_unforced(kit: Kit) -> None:
    model = ScriptedChatCompletionClient(
        [tool_call("lookup_weather", {"city": "Lisbon"}), "It is sunny in Lisbon."]
    )
    client = GovernedChatCompletionClient(model, governor(WEATHER))
    result = run(agent(kit, client, max_tool_iterations=2), "What is the weather in Lisbon?")
    model.assert_complete()
    forced, after = model.requests
    assert forced.forced_tool == "lookup_weather" and forced.parallel_tool_calls is False
    assert isinstance(forced.messages[-1], SystemMessage)
    assert "lookup_weather" in forced.messages[-1].content
    assert sorted(forced.tool_names) == ["lookup_weather", "run_shell", "write_note"]
    # Forcing is per turn: after the tool result the agent is passed through untouched.
    assert after.tool_choice == "auto" and after.forced_tool is None
    assert after.parallel_tool_calls is None and dict(after.extra_create_args) == {}
    assert not any(m.content == forced.messages[-1].content for m in after.messages)
    assert [d.path for d in client.decisions] == [RoutePath.TOOL, RoutePath.DELEGATE]
    assert kit.ran.calls == [("lookup_weather", {"city": "Lisbon"})]
    assert result.messages[-1].content == "It is sunny in Lisbon."


def test_the_tool_runs_with_the_path_the_policy_judged(kit: Kit) -> None:
    model = ScriptedChatCompletionClient(
        [tool_call("write_note", {"path": "notes/a.txt", "text": "hi"})]
    )
    result = run(agent(kit, model), "Write hi to notes/a.txt")
    assert kit.ran.calls == [
        ("write_note", {"path": str(kit.workspace / "notes" / "a.txt"), "text": "hi"})
    ]
    assert isinstance(result.messages[-1], ToolCallSummaryMessage)
    assert result.messages[-1].results[0].is_error is False


def test_a_denied_call_never_runs_and_the_conversation_goes_on(kit: Kit) -> None:
    model = ScriptedChatCompletionClient(
        [
            tool_call("write_note", {"path": "../outside.txt", "text": "x"}),
            "I could not write outside the workspace.",
        ]
    )
    result = run(agent(kit, model, max_tool_iterations=2), "Write x to ../outside.txt")
    model.assert_complete()
    assert kit.ran.calls == []
    (denial,) = model.requests[1].openai[-1:]
    assert denial["role"] == "tool" and "denied" in denial["content"]
    assert result.messages[-1].content == "I could not write outside the workspace."
    assert ("write_note", "DENY") in kit.policy.results()


def test_a_tool_without_a_spec_is_refused_when_the_workbench_is_built(kit: Kit) -> None:
    extra = FunctionTool(lambda: "x", "An undeclared tool.", "undeclared")
    with pytest.raises(ConfigurationError, match="tool_spec"):
        PolicyWorkbench(
            StaticWorkbench([*kit.tools, extra]),
            pep=kit.policy.pep,
            specs=kit.specs,
            context=kit.policy.context,
        )


@pytest.mark.parametrize("style", ["sync", "async"])
def test_an_approval_from_the_approver_lets_exactly_that_call_run(kit: Kit, style: str) -> None:
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> Any:
        asked.append(request)
        return kit.policy.authority.issue(request.action_digest)

    async def approve_async(request: ApprovalRequest) -> Any:
        return approve(request)

    arguments = {"command": "pytest -q", "cwd": str(kit.workspace)}
    model = ScriptedChatCompletionClient([tool_call("run_shell", arguments)])
    func = approve if style == "sync" else approve_async
    run(agent(kit, model, approver=func), "Run the tests")
    assert kit.ran.calls == [("run_shell", arguments)]
    (request,) = asked
    assert type(request) is CoreApprovalRequest and ApprovalRequest is CoreApprovalRequest
    assert request.tool == "run_shell" and request.action_digest.startswith("sha256:")


def test_without_an_approver_the_call_is_denied_with_how_to_configure_one(kit: Kit) -> None:
    model = ScriptedChatCompletionClient(
        [tool_call("run_shell", {"command": "ls", "cwd": str(kit.workspace)})]
    )
    result = run(agent(kit, model), "List files")
    (outcome,) = result.messages[-1].results
    assert outcome.is_error and "approver=" in outcome.content
    assert kit.ran.calls == []


def test_an_approval_for_another_action_authorises_nothing(kit: Kit) -> None:
    other = kit.workbench().guard  # a digest for a different command, from the same policy
    from jevqueue.policy import Action

    digest = Action.build(
        other.registry, "run_shell", {"command": "ls", "cwd": str(kit.workspace)}, other.context
    ).digest
    model = ScriptedChatCompletionClient(
        [tool_call("run_shell", {"command": "rm -rf build", "cwd": str(kit.workspace)})]
    )
    approve = lambda request: kit.policy.authority.issue(digest)  # noqa: E731
    result = run(agent(kit, model, approver=approve), "Clean up")
    (outcome,) = result.messages[-1].results
    assert outcome.is_error and "the approval given was refused" in outcome.content
    assert kit.ran.calls == []


@pytest.mark.parametrize(
    "declined",
    [
        ApprovalDeclinedError("the on-call engineer said no"),
        # As docs/plugins/autogen.md documented it: no verdict (a TypeError before the guard).
        ApprovalRequiredError("the on-call engineer said no"),
    ],
    ids=["ApprovalDeclinedError", "ApprovalRequiredError"],
)
def test_an_approver_that_declines_with_a_reason_reaches_the_model(
    kit: Kit, declined: Exception
) -> None:
    def decline(request: ApprovalRequest) -> Any:
        raise declined

    model = ScriptedChatCompletionClient(
        [
            tool_call("run_shell", {"command": "ls", "cwd": str(kit.workspace)}),
            "I was not allowed to list the files.",
        ]
    )
    result = run(agent(kit, model, approver=decline, max_tool_iterations=2), "List files")
    model.assert_complete()
    (denial,) = model.requests[1].openai[-1:]
    assert denial["role"] == "tool"
    assert "the approver declined: the on-call engineer said no" in denial["content"]
    assert "TypeError" not in denial["content"]
    assert result.messages[-1].content == "I was not allowed to list the files."
    assert kit.ran.calls == []


def test_an_approver_that_fails_is_reported_with_its_own_error(kit: Kit) -> None:
    def broken(request: ApprovalRequest) -> Any:
        raise RuntimeError("the pager service is unreachable")

    def wrong(request: ApprovalRequest) -> Any:
        return True  # a plain "yes" cannot be verified

    for approver, expected in [
        (broken, "RuntimeError: the pager service is unreachable"),
        (wrong, "the approver returned True (bool)"),
    ]:
        model = ScriptedChatCompletionClient(
            [tool_call("run_shell", {"command": "ls", "cwd": str(kit.workspace)})]
        )
        result = run(agent(kit, model, approver=approver), "List files")
        (outcome,) = result.messages[-1].results
        assert outcome.is_error and "the approver failed" in outcome.content
        assert expected in outcome.content, outcome.content
    assert kit.ran.calls == []


def test_approval_func_still_works_with_a_deprecation_warning(kit: Kit) -> None:
    def approve(request: ApprovalRequest) -> Any:
        return kit.policy.authority.issue(request.action_digest)

    with pytest.warns(DeprecationWarning, match="approver="):
        workbench = kit.workbench(approval_func=approve)
    arguments = {"command": "ls", "cwd": str(kit.workspace)}
    model = ScriptedChatCompletionClient([tool_call("run_shell", arguments)])
    run(agent(kit, model, workbench=workbench), "List files")
    assert kit.ran.calls == [("run_shell", arguments)]
    with (
        pytest.raises(ConfigurationError, match="more than one keyword"),
        pytest.warns(DeprecationWarning),
    ):
        kit.workbench(approver=approve, approval_func=approve)


def test_handoffs_on_a_governed_agent_are_refused_before_any_provider_call(kit: Kit) -> None:
    model = ScriptedChatCompletionClient([tool_call("transfer_to_planner", {})])
    client = GovernedChatCompletionClient(model, governor(WEATHER))
    with pytest.raises(ConfigurationError, match="SelectorGroupChat"):
        run(agent(kit, client, handoffs=["planner"]), "Hand this over to the planner")
    assert model.requests == []


def test_a_swarm_of_governed_agents_is_refused_before_any_provider_call(kit: Kit) -> None:
    from autogen_agentchat.conditions import MaxMessageTermination
    from autogen_agentchat.teams import Swarm

    model = ScriptedChatCompletionClient([tool_call("transfer_to_planner", {})])
    client = GovernedChatCompletionClient(model, governor(WEATHER))
    first = agent(kit, client, handoffs=["planner"])
    planner = AssistantAgent("planner", model_client=ScriptedChatCompletionClient(["ok"]))
    team = Swarm([first, planner], termination_condition=MaxMessageTermination(3))
    with pytest.raises(Exception, match="handoff tools"):
        asyncio.run(team.run(task="Plan it"))
    assert model.requests == [] and kit.ran.calls == []


def test_a_disobeying_provider_raises_and_nothing_runs(kit: Kit) -> None:
    model = ScriptedChatCompletionClient(
        [tool_call("run_shell", {"command": "ls", "cwd": str(kit.workspace)})]
    )
    client = GovernedChatCompletionClient(model, governor(WEATHER))
    with pytest.raises(ProviderDisobeyedError):
        run(agent(kit, client), "What is the weather in Lisbon?")
    assert kit.ran.calls == [] and kit.policy.audit.events == []


def test_on_disobey_message_answers_locally_and_nothing_runs(kit: Kit) -> None:
    model = ScriptedChatCompletionClient(
        [tool_call("run_shell", {"command": "ls", "cwd": str(kit.workspace)})]
    )
    client = GovernedChatCompletionClient(model, governor(WEATHER), on_disobey="message")
    result = run(agent(kit, client), "What is the weather in Lisbon?")
    assert isinstance(result.messages[-1], TextMessage)
    assert "blocked" in result.messages[-1].content
    assert kit.ran.calls == [] and kit.policy.audit.events == []
    assert client.last_result is not None and client.last_result.model == "jevqueue-local"


def test_a_prose_turn_calling_a_tool_is_blocked(kit: Kit) -> None:
    model = ScriptedChatCompletionClient([tool_call("lookup_weather", {"city": "Lisbon"})])
    client = GovernedChatCompletionClient(model, governor({}))
    with pytest.raises(ProviderDisobeyedError):
        run(agent(kit, client), "Tell me a joke")
    assert model.requests[0].tool_choice == "none"
    assert kit.ran.calls == []


def test_the_directive_is_a_user_message_where_the_client_allows_one_system_message(
    kit: Kit,
) -> None:
    info = {**ScriptedChatCompletionClient().model_info, "multiple_system_messages": False}
    model = ScriptedChatCompletionClient(
        [tool_call("lookup_weather", {"city": "Lisbon"})], model_info=info
    )
    run(agent(kit, GovernedChatCompletionClient(model, governor(WEATHER))), "Weather in Lisbon?")
    last = model.requests[0].messages[-1]
    assert isinstance(last, UserMessage) and last.source == "jevqueue"


def test_a_reflection_turn_passes_through_untouched(kit: Kit) -> None:
    model = ScriptedChatCompletionClient(
        [tool_call("lookup_weather", {"city": "Lisbon"}), "Sunny, 24 C."]
    )
    client = GovernedChatCompletionClient(model, governor(WEATHER))
    result = run(agent(kit, client, reflect_on_tool_use=True), "What is the weather in Lisbon?")
    model.assert_complete()
    reflection = model.requests[1]
    assert reflection.tool_choice == "none" and reflection.tool_names == ()
    assert not any(getattr(m, "source", None) == "jevqueue" for m in reflection.messages)
    assert reflection.messages[-1].__class__.__name__ == "FunctionExecutionResultMessage"
    assert client.decisions[-1].path is RoutePath.DELEGATE
    assert result.messages[-1].content == "Sunny, 24 C."


def test_streaming_a_constrained_turn_yields_nothing_before_the_read_back(kit: Kit) -> None:
    model = ScriptedChatCompletionClient(["I will not call the tool."])
    client = GovernedChatCompletionClient(model, governor(WEATHER))
    assistant = agent(kit, client, model_client_stream=True)

    async def collect() -> list[Any]:
        seen: list[Any] = []
        with pytest.raises(ProviderDisobeyedError):
            async for item in assistant.run_stream(task="What is the weather in Lisbon?"):
                seen.append(item)
        return seen

    seen = asyncio.run(collect())
    assert model.requests[0].streamed and model.requests[0].forced_tool == "lookup_weather"
    assert not any(isinstance(item, ModelClientStreamingChunkEvent) for item in seen), seen


def test_streaming_a_delegated_turn_streams_live(kit: Kit) -> None:
    model = ScriptedChatCompletionClient(["Sunny in Lisbon today."])
    client = GovernedChatCompletionClient(model, governor({"lookup_weather": 0.4}))
    assistant = agent(kit, client, model_client_stream=True)

    async def collect() -> list[Any]:
        return [item async for item in assistant.run_stream(task="Weather?")]

    seen = asyncio.run(collect())
    chunks = [item.content for item in seen if isinstance(item, ModelClientStreamingChunkEvent)]
    assert "".join(chunks) == "Sunny in Lisbon today."
    assert model.requests[0].tool_choice == "auto" and model.requests[0].forced_tool is None


def test_bad_configuration_is_a_typed_error(kit: Kit) -> None:
    with pytest.raises(ConfigurationError, match="ChatCompletionClient"):
        GovernedChatCompletionClient(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="on_disobey"):
        GovernedChatCompletionClient(ScriptedChatCompletionClient(), on_disobey="ignore")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="ToolSpec"):
        PolicyWorkbench(
            StaticWorkbench(kit.tools),
            pep=kit.policy.pep,
            specs=["lookup_weather"],  # type: ignore[list-item]
            context=kit.policy.context,
        )
    with pytest.raises(ConfigurationError, match="not parameters"):
        tool_spec(kit.tools[1], side_effects={"file_write"}, path_fields=["file"])
    with pytest.raises(ConfigurationError, match="approver"):
        kit.workbench(approver="yes")
    with pytest.raises(ConfigurationError, match="Workbench"):
        PolicyWorkbench(kit.tools, pep=kit.policy.pep, specs=kit.specs, context=kit.policy.context)  # type: ignore[arg-type]


def test_a_cancelled_token_stops_the_turn_before_any_provider_call(kit: Kit) -> None:
    from autogen_core import CancellationToken
    from autogen_core.models import UserMessage as User
    from jevqueue.errors import TurnInterruptedError

    model = ScriptedChatCompletionClient(["never sent"])
    client = GovernedChatCompletionClient(model, governor(WEATHER))
    token = CancellationToken()
    token.cancel()
    schemas = [tool.schema for tool in kit.tools]
    with pytest.raises(TurnInterruptedError):
        asyncio.run(
            client.create(
                [User(content="Weather in Lisbon?", source="user")],
                tools=schemas,
                cancellation_token=token,
            )
        )
    assert model.requests == []
    assert client.last_decision is not None
    assert client.last_decision.path is RoutePath.INTERRUPTED
