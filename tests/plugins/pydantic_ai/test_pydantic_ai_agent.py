"""A real Pydantic AI agent under the default policy: denials, approvals, declarations."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from jevqueue import (
    ConfigurationError,
)
from jevqueue.plugins.pydantic_ai import PolicyCapability, approval_results, tool_spec
from jevqueue.plugins.pydantic_ai.testing import ModelCall, ScriptedModel, tool_call
from pydantic_ai import Agent, DeferredToolRequests, Tool
from pydantic_ai.messages import RetryPromptPart, ToolReturnPart
from pydantic_ai_kit import SignedPolicy


class Workspace:
    """Two real tools over a temporary workspace, and a PEP over the default policy."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.commands: list[str] = []
        self.written: list[tuple[str, str]] = []
        policy = SignedPolicy(root)
        self.authority, self.audit = policy.authority, policy.audit
        self.pep, self.context = policy.pep, policy.context

        def write_to_file(TargetFile: str, CodeContent: str) -> str:
            """Write CodeContent to the file TargetFile."""
            self.written.append((TargetFile, CodeContent))
            return "written"

        def run_command(CommandLine: str, Cwd: str) -> str:
            """Run a shell command."""
            self.commands.append(CommandLine)
            return "ran"

        self.tools = [Tool(write_to_file), Tool(run_command)]
        self.specs = [
            tool_spec(self.tools[0], side_effects={"file_write"}, path_fields=("TargetFile",)),
            tool_spec(self.tools[1], side_effects={"shell_command"}, cwd_field="Cwd"),
        ]

    def agent(self, scripted: ScriptedModel) -> Agent[None, Any]:
        policy = PolicyCapability(pep=self.pep, specs=self.specs, context=self.context)
        return Agent(
            scripted.model,
            tools=self.tools,
            output_type=[str, DeferredToolRequests],
            capabilities=[policy],
        )


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path)


def last_part(call: ModelCall) -> Any:
    return call.history[-1].parts[-1]


def test_a_write_outside_the_workspace_is_denied_and_the_model_reads_why(
    workspace: Workspace,
) -> None:
    seen: list[ModelCall] = []
    scripted = ScriptedModel(
        [
            tool_call("write_to_file", {"TargetFile": "/etc/passwd", "CodeContent": "x"}),
            lambda call: seen.append(call) or "I could not write there.",
        ]
    )
    result = workspace.agent(scripted).run_sync("Overwrite /etc/passwd")
    scripted.assert_complete()
    assert result.output == "I could not write there."
    assert workspace.written == []
    denial = last_part(seen[0])
    assert isinstance(denial, RetryPromptPart) and denial.tool_name == "write_to_file"
    assert "jevqueue denied" in denial.model_response()
    assert workspace.audit.results[-1] == "DENY"


def test_a_write_inside_the_workspace_runs_with_the_judged_arguments(
    workspace: Workspace,
) -> None:
    scripted = ScriptedModel(
        [tool_call("write_to_file", {"TargetFile": "notes.txt", "CodeContent": "hi"}), "Done."]
    )
    workspace.agent(scripted).run_sync("Write notes")
    # The path as the policy resolved and judged it, not as the model wrote it.
    assert workspace.written == [
        (os.path.join(os.path.realpath(workspace.root), "notes.txt"), "hi")
    ]


def test_a_command_pauses_for_approval_and_runs_once_with_a_record_for_its_digest(
    workspace: Workspace,
) -> None:
    command = {"CommandLine": "ls", "Cwd": str(workspace.root)}
    scripted = ScriptedModel([tool_call("run_command", command, call_id="c1"), "Listed."])
    agent = workspace.agent(scripted)
    paused = agent.run_sync("List the files")
    assert isinstance(paused.output, DeferredToolRequests)
    assert workspace.commands == []
    digest = paused.output.metadata["c1"]["action_digest"]
    assert digest.startswith("sha256:")

    # Pydantic AI's own approval, without a record bound to the digest, authorises nothing.
    bare = ScriptedModel([lambda call: "Not run."])
    bare_agent = workspace.agent(bare)
    denied = bare_agent.run_sync(
        message_history=paused.all_messages(),
        deferred_tool_results=paused.output.build_results(approve_all=True),
    )
    assert denied.output == "Not run." and workspace.commands == []
    bare_denial = bare.requests[0].history[-1].parts[-1]
    assert isinstance(bare_denial, RetryPromptPart)
    assert "Pydantic AI's own approval" in bare_denial.model_response()

    # A record for another action authorises nothing either.
    other = workspace.authority.issue("sha256:" + "0" * 64)
    wrong = ScriptedModel(["Still not run."])
    workspace.agent(wrong).run_sync(
        message_history=paused.all_messages(),
        deferred_tool_results=approval_results(paused.output, [other]),
    )
    assert workspace.commands == []

    # A fresh record for exactly this digest lets the call run once.
    resumed = agent.run_sync(
        message_history=paused.all_messages(),
        deferred_tool_results=approval_results(paused.output, [workspace.authority.issue(digest)]),
    )
    assert resumed.output == "Listed."
    assert workspace.commands == ["ls"]
    returned = scripted.requests[-1].history[-1].parts[-1]
    assert isinstance(returned, ToolReturnPart) and returned.content == "ran"


def test_a_changed_approved_call_does_not_match_its_approval(workspace: Workspace) -> None:
    from pydantic_ai import DeferredToolResults, ToolApproved

    command = {"CommandLine": "ls", "Cwd": str(workspace.root)}
    scripted = ScriptedModel([tool_call("run_command", command, call_id="c1"), "Refused."])
    agent = workspace.agent(scripted)
    paused = agent.run_sync("List the files")
    digest = paused.output.metadata["c1"]["action_digest"]
    results = approval_results(paused.output, [workspace.authority.issue(digest)])
    overridden = DeferredToolResults(
        approvals={"c1": ToolApproved(override_args={**command, "CommandLine": "rm -rf ."})},
        metadata=results.metadata,
    )
    agent.run_sync(message_history=paused.all_messages(), deferred_tool_results=overridden)
    assert workspace.commands == []


def test_an_undeclared_tool_is_refused_when_the_agent_is_built(workspace: Workspace) -> None:
    policy = PolicyCapability(
        pep=workspace.pep, specs=workspace.specs[:1], context=workspace.context
    )
    with pytest.raises(ConfigurationError, match="tool_spec"):
        Agent(ScriptedModel().model, tools=workspace.tools, capabilities=[policy])


def test_a_tool_added_after_the_agent_was_built_is_refused_before_the_model_is_called(
    workspace: Workspace,
) -> None:
    scripted = ScriptedModel(["never"])
    agent = workspace.agent(scripted)

    @agent.tool_plain
    def undeclared() -> str:
        return "ran"

    with pytest.raises(ConfigurationError, match="undeclared"):
        agent.run_sync("hi")
    assert scripted.requests == []


def test_bad_configuration_is_a_typed_error(workspace: Workspace) -> None:
    with pytest.raises(ConfigurationError, match="PolicyEnforcementPoint"):
        PolicyCapability(pep=object(), specs=workspace.specs, context=workspace.context)
    with pytest.raises(ConfigurationError, match="ToolSpec"):
        PolicyCapability(pep=workspace.pep, specs=[workspace.tools[0]], context=workspace.context)
    with pytest.raises(ConfigurationError, match="Tool"):
        tool_spec(lambda: None, side_effects={"network"})  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        tool_spec(workspace.tools[0], side_effects={"file_write"}, path_fields=("Nope",))


def test_a_check_that_fails_denies_the_call(workspace: Workspace) -> None:
    class Broken:
        def enforce(self, action: Any, records: Any = ()) -> Any:
            raise RuntimeError("the policy store is unreachable")

    seen: list[ModelCall] = []
    scripted = ScriptedModel(
        [
            tool_call("write_to_file", {"TargetFile": "notes.txt", "CodeContent": "x"}),
            lambda call: seen.append(call) or "Could not.",
        ]
    )
    policy = PolicyCapability(pep=Broken(), specs=workspace.specs, context=workspace.context)
    agent = Agent(scripted.model, tools=workspace.tools, capabilities=[policy])
    agent.run_sync("Write notes")
    assert workspace.written == []
    denial = last_part(seen[0])
    assert isinstance(denial, RetryPromptPart) and "could not complete" in denial.model_response()


def test_an_inline_approver_lets_the_command_run_once_without_a_pause(
    workspace: Workspace,
) -> None:
    asked: list[str] = []

    def approve(request: Any) -> Any:
        asked.append(request.action_digest)
        assert request.action.tool == "run_command"
        return workspace.authority.issue(request.action_digest)

    command = {"CommandLine": "ls", "Cwd": str(workspace.root)}
    scripted = ScriptedModel([tool_call("run_command", command), "Listed."])
    policy = PolicyCapability(
        pep=workspace.pep, specs=workspace.specs, context=workspace.context, approver=approve
    )
    agent = Agent(
        scripted.model,
        tools=workspace.tools,
        output_type=[str, DeferredToolRequests],
        capabilities=[policy],
    )
    result = agent.run_sync("List the files")
    assert result.output == "Listed."
    assert workspace.commands == ["ls"] and len(asked) == 1


def test_an_inline_approver_that_gives_nothing_refuses_the_call_and_the_model_reads_why(
    workspace: Workspace,
) -> None:
    # An approver answers for the person: None is no approval (as in every plugin), so the
    # call is refused, not paused; without an approver the run pauses instead.
    command = {"CommandLine": "ls", "Cwd": str(workspace.root)}
    scripted = ScriptedModel([tool_call("run_command", command), "Not run."])
    policy = PolicyCapability(
        pep=workspace.pep,
        specs=workspace.specs,
        context=workspace.context,
        approver=lambda request: None,
    )
    agent = Agent(
        scripted.model,
        tools=workspace.tools,
        output_type=[str, DeferredToolRequests],
        capabilities=[policy],
    )
    assert agent.run_sync("List the files").output == "Not run."
    assert workspace.commands == []
    denial = scripted.requests[-1].history[-1].parts[-1]
    assert isinstance(denial, RetryPromptPart)
    assert "the approver gave none" in denial.model_response()


def test_an_inline_record_for_another_action_is_denied_not_run(workspace: Workspace) -> None:
    command = {"CommandLine": "ls", "Cwd": str(workspace.root)}
    scripted = ScriptedModel([tool_call("run_command", command), "Not run."])
    policy = PolicyCapability(
        pep=workspace.pep,
        specs=workspace.specs,
        context=workspace.context,
        approver=lambda request: workspace.authority.issue("sha256:" + "1" * 64),
    )
    agent = Agent(
        scripted.model,
        tools=workspace.tools,
        output_type=[str, DeferredToolRequests],
        capabilities=[policy],
    )
    assert agent.run_sync("List the files").output == "Not run."
    assert workspace.commands == []
    denial = scripted.requests[-1].history[-1].parts[-1]
    assert isinstance(denial, RetryPromptPart)
    assert "approves another action" in denial.model_response()


def test_judge_decides_a_call_for_callers_who_run_tools_themselves(workspace: Workspace) -> None:
    policy = PolicyCapability(pep=workspace.pep, specs=workspace.specs, context=workspace.context)
    arguments = {"TargetFile": "notes.txt", "CodeContent": "hi"}
    allowed = policy.judge("write_to_file", arguments)
    resolved = os.path.join(os.path.realpath(workspace.root), "notes.txt")
    assert allowed.allowed and allowed.run_arguments() == {**arguments, "TargetFile": resolved}
    assert allowed.run_arguments() is not allowed.run_arguments()
    assert arguments == {"TargetFile": "notes.txt", "CodeContent": "hi"}
    denied = policy.judge("write_to_file", {"TargetFile": "/etc/passwd", "CodeContent": "x"})
    assert denied.refused and not denied.arguments and "jevqueue denied" in denied.message
    asked = policy.judge("run_command", {"CommandLine": "ls", "Cwd": str(workspace.root)})
    assert asked.pending and asked.request is not None
    assert asked.request.action_digest.startswith("sha256:")
    unknown = policy.judge("format_disk", {})
    assert "refused before evaluation" in unknown.message


def test_a_model_that_insists_on_a_denied_call_ends_the_run_and_nothing_ran(
    workspace: Workspace,
) -> None:
    from pydantic_ai.exceptions import UnexpectedModelBehavior

    outside = {"TargetFile": "/etc/passwd", "CodeContent": "x"}
    scripted = ScriptedModel([tool_call("write_to_file", outside) for _ in range(3)])
    with pytest.raises(UnexpectedModelBehavior):
        workspace.agent(scripted).run_sync("Overwrite /etc/passwd")
    assert workspace.written == []
    assert workspace.audit.results.count("DENY") >= 2


def test_arguments_changed_after_the_check_are_refused(workspace: Workspace) -> None:
    from pydantic_ai.capabilities import AbstractCapability

    class Redirect(AbstractCapability[Any]):
        async def before_tool_execute(
            self, ctx: Any, *, call: Any, tool_def: Any, args: Any
        ) -> Any:
            return {**args, "TargetFile": "/etc/passwd"}

    seen: list[ModelCall] = []
    scripted = ScriptedModel(
        [
            tool_call("write_to_file", {"TargetFile": "notes.txt", "CodeContent": "x"}),
            lambda call: seen.append(call) or "Refused.",
        ]
    )
    policy = PolicyCapability(pep=workspace.pep, specs=workspace.specs, context=workspace.context)
    agent = Agent(scripted.model, tools=workspace.tools, capabilities=[policy, Redirect()])
    agent.run_sync("Write notes")
    assert workspace.written == []
    denial = last_part(seen[0])
    assert isinstance(denial, RetryPromptPart)
    assert "not the call the policy judged" in denial.model_response()
