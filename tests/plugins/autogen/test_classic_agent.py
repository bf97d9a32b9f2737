"""Real classic AutoGen chats (ag2), governed and policed, against the scripted model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "autogen", reason='classic AutoGen is not installed: pip install "jevqueue[ag2]"'
)

from autogen import ConversableAgent, GroupChat, GroupChatManager, UserProxyAgent
from autogen_kit import WEATHER, governor
from classic_kit import Kit, pair
from jevqueue import ConfigurationError, ProviderDisobeyedError
from jevqueue import Path as RoutePath
from jevqueue.errors import ApprovalDeclinedError, ApprovalRequiredError
from jevqueue.plugins.autogen import (
    ApprovalRequest,
    GovernorCapability,
    PolicyCapability,
    governed_tool,
)
from jevqueue.plugins.autogen.testing import ScriptedModel, classic_tool_call


@pytest.fixture
def kit(workspace: Path) -> Kit:
    return Kit(workspace)


def chat(executor: ConversableAgent, assistant: ConversableAgent, text: str, turns: int) -> Any:
    return executor.initiate_chat(assistant, message=text, max_turns=turns, silent=True)


def achat(executor: ConversableAgent, assistant: ConversableAgent, text: str, turns: int) -> Any:
    return asyncio.run(
        executor.a_initiate_chat(assistant, message=text, max_turns=turns, silent=True)
    )


@pytest.mark.parametrize("run", [chat, achat], ids=["sync", "async"])
def test_a_forced_turn_runs_the_tool_once_and_the_next_turn_is_unforced(kit: Kit, run: Any) -> None:
    model = ScriptedModel(
        [classic_tool_call("lookup_weather", {"city": "Lisbon"}), "It is sunny in Lisbon."]
    )
    assistant, executor, governed, _ = kit.agents(model, governor(WEATHER))
    result = run(executor, assistant, "What is the weather in Lisbon?", 2)
    model.assert_complete()
    forced, after = model.requests
    assert forced.forced_tool == "lookup_weather" and forced.parallel_tool_calls is False
    assert forced.messages[-1]["role"] == "system"
    assert "lookup_weather" in forced.messages[-1]["content"]
    assert sorted(forced.tool_names) == ["lookup_weather", "run_shell", "write_note"]
    # Forcing is per turn: after the tool result nothing is added to the request.
    assert after.tool_choice is None and after.parallel_tool_calls is None
    assert after.messages[-1]["role"] == "tool"
    assert governed is not None
    assert [d.path for d in governed.decisions] == [RoutePath.TOOL, RoutePath.DELEGATE]
    assert kit.ran.calls == [("lookup_weather", {"city": "Lisbon"})]
    assert result.chat_history[-1]["content"] == "It is sunny in Lisbon."


@pytest.mark.parametrize("run", [chat, achat], ids=["sync", "async"])
def test_a_disobeying_provider_raises_and_nothing_runs(kit: Kit, run: Any) -> None:
    model = ScriptedModel([classic_tool_call("write_note", {"path": "a.txt", "text": "x"})])
    assistant, executor, _, _ = kit.agents(model, governor(WEATHER))
    with pytest.raises(ProviderDisobeyedError):
        run(executor, assistant, "What is the weather in Lisbon?", 2)
    assert kit.ran.calls == [] and kit.policy.audit.events == []


def test_on_disobey_message_replies_locally_and_nothing_runs(kit: Kit) -> None:
    model = ScriptedModel([classic_tool_call("write_note", {"path": "a.txt", "text": "x"})])
    assistant, executor, _, _ = kit.agents(
        model, governor(WEATHER), governor_options={"on_disobey": "message"}
    )
    result = chat(executor, assistant, "What is the weather in Lisbon?", 1)
    assert "blocked" in result.chat_history[-1]["content"]
    assert "tool_calls" not in result.chat_history[-1]
    assert kit.ran.calls == []


def test_a_prose_turn_sends_tool_choice_none(kit: Kit) -> None:
    model = ScriptedModel(["Hello!"])
    assistant, executor, _, _ = kit.agents(model, governor({}))
    result = chat(executor, assistant, "Say hello.", 1)
    (request,) = model.requests
    assert request.tool_choice == "none" and request.forced_tool is None
    assert result.chat_history[-1]["content"] == "Hello!"


def test_delegation_adds_nothing_to_the_request(kit: Kit) -> None:
    ungoverned_model = ScriptedModel(["Probably sunny."])
    assistant, executor, _, _ = kit.agents(ungoverned_model)
    chat(executor, assistant, "Weather?", 1)
    model = ScriptedModel(["Probably sunny."])
    assistant, executor, _, _ = kit.agents(model, governor({"lookup_weather": 0.4}))
    chat(executor, assistant, "Weather?", 1)
    (governed,), (plain,) = model.requests, ungoverned_model.requests
    assert dict(governed.params) == dict(plain.params)
    assert "tool_choice" not in governed.params and "parallel_tool_calls" not in governed.params


@pytest.mark.parametrize("run", [chat, achat], ids=["sync", "async"])
def test_every_call_of_a_batch_is_judged_before_any_runs(kit: Kit, run: Any) -> None:
    ran_when_asked: list[list[str]] = []

    def approve(request: ApprovalRequest) -> Any:
        ran_when_asked.append(kit.ran.names())
        return kit.policy.authority.issue(request.action_digest)

    shell = {"command": "pytest -q", "cwd": str(kit.workspace)}
    model = ScriptedModel(
        [
            [
                classic_tool_call("lookup_weather", {"city": "Lisbon"}),
                classic_tool_call("write_note", {"path": "../outside.txt", "text": "x"}),
                classic_tool_call("run_shell", shell),
            ],
            "Done.",
        ]
    )
    assistant, executor, _, _ = kit.agents(model, approver=approve)
    run(executor, assistant, "Check the weather, write a note and run the tests", 2)
    assert ran_when_asked == [[]], "a call of the batch ran before the batch was judged"
    assert kit.ran.calls == [("lookup_weather", {"city": "Lisbon"}), ("run_shell", shell)]
    tool_messages = model.requests[1].messages[-3:]
    assert [m["role"] for m in tool_messages] == ["tool", "tool", "tool"]
    assert "denied" in tool_messages[1]["content"]
    assert ("write_note", "DENY") in kit.policy.results()


def test_the_tool_runs_with_the_path_the_policy_judged(kit: Kit) -> None:
    model = ScriptedModel([classic_tool_call("write_note", {"path": "notes/a.txt", "text": "hi"})])
    assistant, executor, _, _ = kit.agents(model)
    chat(executor, assistant, "Write hi to notes/a.txt", 1)
    executor.generate_reply(sender=assistant)
    assert kit.ran.calls == [
        ("write_note", {"path": str(kit.workspace / "notes" / "a.txt"), "text": "hi"})
    ]


def test_without_an_approver_the_call_is_denied_with_how_to_configure_one(kit: Kit) -> None:
    model = ScriptedModel([classic_tool_call("run_shell", {"command": "ls", "cwd": "."})])
    assistant, executor, _, capability = kit.agents(model)
    chat(executor, assistant, "List files", 1)
    reply = executor.generate_reply(sender=assistant)
    assert "approver=" in reply["tool_responses"][0]["content"]
    assert kit.ran.calls == [] and capability.last is not None and not capability.last.allowed


def test_an_async_approver_in_a_sync_chat_denies_and_says_why(kit: Kit) -> None:
    async def approve(request: ApprovalRequest) -> Any:
        return kit.policy.authority.issue(request.action_digest)

    model = ScriptedModel([classic_tool_call("run_shell", {"command": "ls", "cwd": "."})])
    assistant, executor, _, _ = kit.agents(model, approver=approve)
    chat(executor, assistant, "List files", 1)
    reply = executor.generate_reply(sender=assistant)
    assert "asynchronously" in reply["tool_responses"][0]["content"]
    assert kit.ran.calls == []
    # The same approver in an async chat approves, and the call runs once.
    model = ScriptedModel([classic_tool_call("run_shell", {"command": "ls", "cwd": "."})])
    assistant, executor, _, _ = kit.agents(model, approver=approve)
    achat(executor, assistant, "List files", 1)
    asyncio.run(executor.a_generate_reply(sender=assistant))
    assert kit.ran.calls == [("run_shell", {"command": "ls", "cwd": str(kit.workspace)})]


def test_bad_configuration_is_a_typed_error(kit: Kit) -> None:
    model = ScriptedModel()
    config = model.llm_config()
    config["config_list"][0]["tool_choice"] = "auto"
    forced = ConversableAgent("assistant", llm_config=config)
    with pytest.raises(ConfigurationError, match="tool_choice"):
        GovernorCapability(governor()).add_to_agent(forced)
    with pytest.raises(ConfigurationError, match="no LLM"):
        GovernorCapability(governor()).add_to_agent(ConversableAgent("x", llm_config=False))
    assistant, executor = pair(ScriptedModel(), kit.functions)
    with pytest.raises(ConfigurationError, match="no policy declaration"):
        PolicyCapability(
            kit.policy.pep, specs=kit.specs[:1], context=kit.policy.context
        ).add_to_agent(executor)
    capability = GovernorCapability(governor())
    capability.add_to_agent(assistant)
    with pytest.raises(ConfigurationError, match="already governed"):
        capability.add_to_agent(assistant)
    with pytest.raises(ConfigurationError, match="on_disobey"):
        GovernorCapability(governor(), on_disobey="ignore")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="ToolSpec"):
        PolicyCapability(kit.policy.pep, specs="lookup_weather", context=kit.policy.context)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="tool_spec"):
        governed_tool(
            kit.functions["lookup_weather"],
            pep=kit.policy.pep,
            specs=[],
            context=kit.policy.context,
        )


def test_a_tool_choice_put_into_the_config_later_stops_the_turn(kit: Kit) -> None:
    model = ScriptedModel(["unused"])
    assistant, executor, _, _ = kit.agents(model, governor(WEATHER))
    assistant.client._config_list[0]["tool_choice"] = "auto"
    with pytest.raises(ConfigurationError, match="override"):
        chat(executor, assistant, "Weather in Lisbon?", 1)
    assert model.requests == []


def test_governed_tools_in_a_group_chat(kit: Kit) -> None:
    model = ScriptedModel(
        [
            [
                classic_tool_call("lookup_weather", {"city": "Lisbon"}),
                classic_tool_call("write_note", {"path": "../outside.txt", "text": "x"}),
            ],
            "Done.",
        ]
    )
    assistant = ConversableAgent(
        "assistant", llm_config=model.llm_config(), human_input_mode="NEVER"
    )
    executor = ConversableAgent("executor", llm_config=False, human_input_mode="NEVER")
    for name in ("lookup_weather", "write_note"):
        tool = governed_tool(
            kit.functions[name],
            name=name,
            pep=kit.policy.pep,
            specs=kit.specs,
            context=kit.policy.context,
        )
        tool.register_for_llm(assistant)
        tool.register_for_execution(executor)
    model.install(assistant)
    group = GroupChat(
        agents=[executor, assistant],
        messages=[],
        max_round=4,
        speaker_selection_method="round_robin",
    )
    manager = GroupChatManager(group, llm_config=False)
    executor.initiate_chat(manager, message="Weather, then a note outside.", silent=True)
    assert kit.ran.calls == [("lookup_weather", {"city": "Lisbon"})]
    contents = [str(m.get("content")) for m in group.messages]
    assert any("denied" in c for c in contents), contents
    assert ("write_note", "DENY") in kit.policy.results()


def test_an_interrupted_turn_sends_nothing(kit: Kit) -> None:
    from jevqueue.errors import TurnInterruptedError

    model = ScriptedModel(["never sent"])
    assistant, executor, governed, _ = kit.agents(
        model, governor(WEATHER), governor_options={"interrupted": lambda: True}
    )
    with pytest.raises(TurnInterruptedError):
        chat(executor, assistant, "Weather in Lisbon?", 1)
    assert model.requests == []
    assert governed is not None and governed.last_decision is not None
    assert governed.last_decision.path is RoutePath.INTERRUPTED


@pytest.mark.parametrize("run", [chat, achat], ids=["sync", "async"])
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
    kit: Kit, run: Any, declined: Exception
) -> None:
    def decline(request: ApprovalRequest) -> Any:
        raise declined

    shell = {"command": "ls", "cwd": str(kit.workspace)}
    model = ScriptedModel([classic_tool_call("run_shell", shell), "I may not list the files."])
    assistant, executor, _, _ = kit.agents(model, approver=decline)
    result = run(executor, assistant, "List files", 2)
    model.assert_complete()
    (denial,) = model.requests[1].messages[-1:]
    assert denial["role"] == "tool"
    assert "the approver declined: the on-call engineer said no" in denial["content"]
    assert "TypeError" not in denial["content"]
    assert result.chat_history[-1]["content"] == "I may not list the files."
    assert kit.ran.calls == []


def test_the_approver_is_shown_the_core_request_and_a_failing_one_is_reported(kit: Kit) -> None:
    from jevqueue.policy import ApprovalRequest as CoreApprovalRequest

    shown: list[Any] = []

    def broken(request: Any) -> Any:
        shown.append(request)
        raise RuntimeError("the pager service is unreachable")

    model = ScriptedModel([classic_tool_call("run_shell", {"command": "ls", "cwd": "."})])
    assistant, executor, _, _ = kit.agents(model, approver=broken)
    chat(executor, assistant, "List files", 1)
    reply = executor.generate_reply(sender=assistant)
    content = reply["tool_responses"][0]["content"]
    assert "the approver failed (RuntimeError: the pager service is unreachable)" in content
    assert [type(r) for r in shown] == [CoreApprovalRequest]
    assert ApprovalRequest is CoreApprovalRequest
    assert kit.ran.calls == []


def test_approval_still_works_with_a_deprecation_warning(kit: Kit) -> None:
    def approve(request: ApprovalRequest) -> Any:
        return kit.policy.authority.issue(request.action_digest)

    shell = {"command": "ls", "cwd": str(kit.workspace)}
    with pytest.warns(DeprecationWarning, match="approver="):
        capability = PolicyCapability(
            kit.policy.pep, specs=kit.specs, context=kit.policy.context, approval=approve
        )
    model = ScriptedModel([classic_tool_call("run_shell", shell)])
    assistant, executor = pair(model, kit.functions)
    capability.add_to_agent(executor)
    chat(executor, assistant, "List files", 1)
    executor.generate_reply(sender=assistant)
    assert kit.ran.calls == [("run_shell", shell)]
    with pytest.warns(DeprecationWarning, match="approver="):
        governed_tool(
            kit.functions["run_shell"],
            pep=kit.policy.pep,
            specs=kit.specs,
            context=kit.policy.context,
            approval=approve,
        )


@pytest.mark.parametrize(
    "executor",
    [
        lambda root: UserProxyAgent("executor", human_input_mode="NEVER"),  # {} by default
        lambda root: ConversableAgent(
            "executor",
            llm_config=False,
            human_input_mode="NEVER",
            code_execution_config={"work_dir": str(root), "use_docker": False},
        ),
    ],
    ids=["UserProxyAgent", "ConversableAgent"],
)
def test_an_executor_that_runs_code_blocks_is_refused(kit: Kit, executor: Any) -> None:
    # Before the guard, such an executor ran `touch <outside>` from a prose reply's code
    # block with no judgement and no audit record.
    agent = executor(kit.workspace)
    with pytest.raises(ConfigurationError, match="code_execution_config=False") as refused:
        PolicyCapability(kit.policy.pep, specs=kit.specs, context=kit.policy.context).add_to_agent(
            agent
        )
    assert "shell_command" in str(refused.value)
    assert kit.policy.audit.events == []
