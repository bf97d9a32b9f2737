"""The capability as a thin adapter of the guard: resolved paths, approvals, routes refused.

Each test here would fail on the plugin before the guard (d37f3e0^): the tool was handed
the path as the model wrote it, Pydantic AI's plain approval was reported as a record that
"does not authorise", output functions ran unjudged, and ``approvals=`` was the keyword.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jevqueue import (
    ConfigurationError,
)
from jevqueue.errors import ApprovalDeclinedError
from jevqueue.plugins.pydantic_ai import (
    ApprovalRequest,
    Judgement,
    PolicyCapability,
    approval_results,
    tool_spec,
)
from jevqueue.plugins.pydantic_ai.testing import ScriptedModel, tool_call
from jevqueue.policy import ApprovalRequest as CoreApprovalRequest
from jevqueue.policy import Judgement as CoreJudgement
from pydantic import BaseModel
from pydantic_ai import (
    Agent,
    DeferredToolRequests,
    DeferredToolResults,
    NativeOutput,
    PromptedOutput,
    TextOutput,
    Tool,
    ToolApproved,
    ToolOutput,
)
from pydantic_ai.messages import RetryPromptPart, ToolReturnPart
from pydantic_ai_kit import SignedPolicy


class Files:
    """A tool that really writes files, a shell tool that needs approval, the default policy."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.commands: list[str] = []
        policy = SignedPolicy(root)
        self.authority, self.audit = policy.authority, policy.audit
        self.pep, self.context = policy.pep, policy.context

        def write_to_file(TargetFile: str, CodeContent: str) -> str:
            """Write CodeContent to the file TargetFile."""
            with open(TargetFile, "w", encoding="utf-8") as handle:
                handle.write(CodeContent)
            return "written"

        def run_command(CommandLine: str, Cwd: str | None = None) -> str:
            """Run a shell command."""
            self.commands.append(CommandLine)
            return "ran"

        self.tools = [Tool(write_to_file), Tool(run_command)]
        self.specs = [
            tool_spec(self.tools[0], side_effects={"file_write"}, path_fields=("TargetFile",)),
            tool_spec(
                self.tools[1],
                side_effects={"shell_command"},
                cwd_field="Cwd",
                required_path_fields=(),
            ),
        ]

    def policy(self, **options: Any) -> PolicyCapability:
        return PolicyCapability(pep=self.pep, specs=self.specs, context=self.context, **options)

    def agent(self, scripted: ScriptedModel, **options: Any) -> Agent[None, Any]:
        return Agent(
            scripted.model,
            tools=self.tools,
            output_type=[str, DeferredToolRequests],
            capabilities=[self.policy(**options)],
        )


@pytest.fixture
def files(tmp_path: Path) -> Files:
    root = tmp_path / "workspace"
    root.mkdir()
    return Files(root)


def test_the_tool_writes_the_path_the_policy_judged_not_the_one_in_the_cwd(
    files: Files, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # where a relative path as the model wrote it would land
    scripted = ScriptedModel(
        [
            tool_call("write_to_file", {"TargetFile": ".bashrc", "CodeContent": "alias x=y"}),
            tool_call("write_to_file", {"TargetFile": "todo.txt", "CodeContent": "a"}),
            "Done.",
        ]
    )
    assert files.agent(scripted).run_sync("Write my dotfile").output == "Done."
    assert (files.root / ".bashrc").read_text(encoding="utf-8") == "alias x=y"
    assert (files.root / "todo.txt").read_text(encoding="utf-8") == "a"
    assert list(elsewhere.iterdir()) == [], "a tool wrote where the policy never looked"


def test_pydantic_ai_own_approval_is_not_enough_and_the_model_is_told_how(files: Files) -> None:
    scripted = ScriptedModel([tool_call("run_command", {"CommandLine": "ls"}, call_id="c1")])
    paused = files.agent(scripted).run_sync("List the files")
    assert isinstance(paused.output, DeferredToolRequests)
    digest = paused.output.metadata["c1"]["action_digest"]
    for approval in (True, ToolApproved()):
        after = ScriptedModel(["Not run."])
        files.agent(after).run_sync(
            message_history=paused.all_messages(),
            deferred_tool_results=DeferredToolResults(approvals={"c1": approval}),
        )
        denial = after.requests[0].history[-1].parts[-1]
        assert isinstance(denial, RetryPromptPart)
        said = denial.model_response()
        assert "Pydantic AI's own approval" in said and "is not enough" in said, said
        assert "approval_results" in said and digest in said, said
        assert "does not authorise" not in said, said
    # approval_results with no record: said so, and still not run.
    after = ScriptedModel(["Not run."])
    files.agent(after).run_sync(
        message_history=paused.all_messages(),
        deferred_tool_results=approval_results(paused.output, None),
    )
    said = after.requests[0].history[-1].parts[-1].model_response()
    assert "the approval gave no record" in said and digest in said, said
    assert files.commands == []


def test_the_pause_carries_the_core_approval_request(files: Files) -> None:
    scripted = ScriptedModel(
        [tool_call("run_command", {"CommandLine": "ls"}, call_id="c1"), "Listed."]
    )
    policy = files.policy()
    agent = Agent(
        scripted.model,
        tools=files.tools,
        output_type=[str, DeferredToolRequests],
        capabilities=[policy],
    )
    paused = agent.run_sync("List the files")
    assert isinstance(paused.output, DeferredToolRequests)
    [request] = policy.approval_requests(paused.output)
    assert ApprovalRequest is CoreApprovalRequest and type(request) is CoreApprovalRequest
    assert request.tool == "run_command" and request.call_id == "c1"
    assert paused.output.metadata["c1"] == request.to_dict()
    # The dict `jevqueue approve` prints is read as the record it is.
    record = files.authority.issue(request.action_digest).to_dict()
    resumed = agent.run_sync(
        message_history=paused.all_messages(),
        deferred_tool_results=approval_results(paused.output, record),
    )
    assert resumed.output == "Listed." and files.commands == ["ls"]


def test_a_replayed_record_is_refused_as_already_used(files: Files) -> None:
    first = ScriptedModel([tool_call("run_command", {"CommandLine": "ls"}, call_id="c1")])
    paused = files.agent(first).run_sync("List the files")
    record = files.authority.issue(paused.output.metadata["c1"]["action_digest"])
    files.agent(ScriptedModel(["Listed."])).run_sync(
        message_history=paused.all_messages(),
        deferred_tool_results=approval_results(paused.output, [record]),
    )
    again = ScriptedModel(["Not again."])
    files.agent(again).run_sync(
        message_history=paused.all_messages(),
        deferred_tool_results=approval_results(paused.output, [record]),
    )
    assert files.commands == ["ls"]
    denial = again.requests[0].history[-1].parts[-1]
    assert isinstance(denial, RetryPromptPart) and "already used" in denial.model_response()


def test_approver_is_the_keyword_and_approvals_is_deprecated(files: Files) -> None:
    def approve(request: CoreApprovalRequest) -> Any:
        return files.authority.issue(request.action_digest)

    with pytest.warns(DeprecationWarning, match="approver="):
        old = files.policy(approvals=approve)
    assert old.approver is approve
    scripted = ScriptedModel([tool_call("run_command", {"CommandLine": "ls"}), "Listed."])
    agent = Agent(scripted.model, tools=files.tools, capabilities=[old])
    assert agent.run_sync("List").output == "Listed." and files.commands == ["ls"]
    with (
        pytest.raises(ConfigurationError, match="more than one keyword"),
        pytest.warns(DeprecationWarning),
    ):
        files.policy(approver=approve, approvals=approve)
    with pytest.raises(ConfigurationError, match="callable"):
        files.policy(approver="alice")


def test_an_async_approver_is_awaited(files: Files) -> None:
    shown: list[Any] = []

    async def approve(request: CoreApprovalRequest) -> Any:
        shown.append(request)
        return [files.authority.issue(request.action_digest)]

    scripted = ScriptedModel([tool_call("run_command", {"CommandLine": "ls"}), "Listed."])
    assert files.agent(scripted, approver=approve).run_sync("List").output == "Listed."
    assert files.commands == ["ls"] and type(shown[0]) is CoreApprovalRequest


@pytest.mark.parametrize(
    ("approver", "said"),
    [
        (
            lambda request: (_ for _ in ()).throw(ApprovalDeclinedError("not before the release")),
            "the approver declined: not before the release",
        ),
        (
            lambda request: (_ for _ in ()).throw(TimeoutError("the pager timed out")),
            "the approver failed (TimeoutError: the pager timed out)",
        ),
        (lambda request: True, "the approver returned True (bool)"),
    ],
    ids=["declined", "raised", "wrong answer"],
)
def test_the_model_reads_the_approvers_own_error(files: Files, approver: Any, said: str) -> None:
    scripted = ScriptedModel([tool_call("run_command", {"CommandLine": "ls"}), "Not run."])
    assert files.agent(scripted, approver=approver).run_sync("List").output == "Not run."
    assert files.commands == []
    denial = scripted.requests[-1].history[-1].parts[-1]
    assert isinstance(denial, RetryPromptPart) and said in denial.model_response()


def test_a_judgement_is_the_core_one(files: Files) -> None:
    judged = files.policy().judge("write_to_file", {"TargetFile": "a.txt", "CodeContent": ""})
    assert Judgement is CoreJudgement and type(judged) is CoreJudgement


class Report(BaseModel):
    text: str


def _save_report(text: str) -> str:
    """Save the report to disk."""
    _SAVED.append(text)
    return text


_SAVED: list[str] = []


@pytest.mark.parametrize(
    "output_type",
    [
        [_save_report],
        [str, _save_report],
        ToolOutput(_save_report),
        [ToolOutput(_save_report, name="save"), DeferredToolRequests],
        TextOutput(_save_report),
        NativeOutput(_save_report),
        PromptedOutput([Report, _save_report]),
    ],
    ids=[
        "list",
        "union with str",
        "ToolOutput",
        "named ToolOutput",
        "TextOutput",
        "Native",
        "Prompted",
    ],
)
def test_an_output_function_is_refused_when_the_agent_is_built(
    files: Files, output_type: Any
) -> None:
    with pytest.raises(ConfigurationError, match=r"output functions \['_save_report'\]"):
        Agent(
            ScriptedModel().model,
            tools=files.tools,
            output_type=output_type,
            capabilities=[files.policy()],
        )


def test_an_output_function_given_at_run_time_is_refused_before_it_runs(files: Files) -> None:
    _SAVED.clear()
    scripted = ScriptedModel([tool_call("final_result", {"text": "rm -rf /"})])
    agent = Agent(scripted.model, tools=files.tools, capabilities=[files.policy()])
    with pytest.raises(ConfigurationError, match="declared tool"):
        agent.run_sync("Report", output_type=[_save_report])
    assert _SAVED == []


def test_plain_output_types_are_accepted(files: Files) -> None:
    for output_type in (
        str,
        Report,
        [str, DeferredToolRequests],
        ToolOutput(Report),
        [Report, int],
    ):
        Agent(
            ScriptedModel().model,
            tools=files.tools,
            output_type=output_type,
            capabilities=[files.policy()],
        )
    scripted = ScriptedModel([tool_call("final_result", {"text": "fine"})])
    agent = Agent(scripted.model, output_type=Report, capabilities=[files.policy()])
    assert agent.run_sync("Report").output == Report(text="fine")


def test_each_call_of_a_batch_runs_once_when_the_run_resumes(files: Files) -> None:
    written = files.root / "batch.txt"
    calls = [
        tool_call("write_to_file", {"TargetFile": "batch.txt", "CodeContent": "once"}, call_id="a"),
        tool_call("run_command", {"CommandLine": "ls"}, call_id="b"),
    ]
    first = ScriptedModel([calls])
    agent = files.agent(first)
    paused = agent.run_sync("Write and list")
    assert isinstance(paused.output, DeferredToolRequests)
    assert written.read_text(encoding="utf-8") == "once" and files.commands == []
    written.write_text("changed", encoding="utf-8")  # a second run of the write would undo it
    digest = paused.output.metadata["b"]["action_digest"]
    done = ScriptedModel(["Done."])
    files.agent(done).run_sync(
        message_history=paused.all_messages(),
        deferred_tool_results=approval_results(paused.output, files.authority.issue(digest)),
    )
    assert written.read_text(encoding="utf-8") == "changed" and files.commands == ["ls"]
    returned = [
        part.tool_call_id
        for part in done.requests[0].history[-1].parts
        if isinstance(part, ToolReturnPart)
    ]
    assert sorted(returned) == ["a", "b"], "the model reads each call's result once"
