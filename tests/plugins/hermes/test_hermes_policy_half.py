"""The tool-call half on Hermes' own tools, in a real ``AIAgent`` loop.

Hermes' ``write_file``, ``read_file`` and ``terminal`` run for real, declared with the specs
``docs/plugins/hermes.md`` shows (the block is read from the page and run here), with the
process's working directory elsewhere: what they touch is what the policy judged.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "run_agent",
    reason="Hermes Agent is not installed here: it runs in its own venv (make test builds it; "
    'pip install "jevqueue[hermes]")',
)

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hermes_kit import hermes_agent, register_tools
from jevqueue import ConfigurationError, ExecutionContext, PolicyEnforcementPoint
from jevqueue.approvals import ApprovalAuthority, MemoryConsumedApprovals, SignedApprovalVerifier
from jevqueue.errors import ApprovalDeclinedError
from jevqueue.plugins.hermes import HermesGovernance, PolicyGuard
from jevqueue.plugins.hermes.testing import RecordingChatServer, text_reply, tool_reply
from jevqueue.policy import ApprovalRequest, AuthorityApprover, create_default_policy_decision_point
from jevqueue.testing.conformance import ConformancePolicy, conformance_tools
from jevqueue.testing.recording_audit import RecordingAuditSink
from tools.registry import registry

pytestmark = pytest.mark.network_allowed

DOC = Path(__file__).resolve().parents[3] / "docs" / "plugins" / "hermes.md"


def doc_specs() -> list[Any]:
    """``HERMES_SPECS`` as the docs page builds it, against Hermes' registered tools."""
    blocks = re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.M | re.S)
    (block,) = [block for block in blocks if "HERMES_SPECS = [" in block]
    namespace: dict[str, Any] = {}
    exec(compile(block, f"{DOC}#HERMES_SPECS", "exec"), namespace)
    return list(namespace["HERMES_SPECS"])


class Policy:
    """The default policy decision point, with an approval authority it trusts."""

    def __init__(self, workspace: Path) -> None:
        key = Ed25519PrivateKey.generate()
        self.authority = ApprovalAuthority(key, "alice")
        self.audit = RecordingAuditSink()
        self.pep = PolicyEnforcementPoint(
            create_default_policy_decision_point(),
            audit_logger=self.audit,
            approval_verifier=SignedApprovalVerifier({"alice": key.public_key()}),
            consumed_approvals=MemoryConsumedApprovals(),
        )
        self.context = ExecutionContext(
            task_id="hermes", actor_id="tester", workspace=str(workspace), git_sha="0123456"
        )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    return root.resolve()


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The process's working directory (and home) is not the workspace."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.delenv("TERMINAL_CWD", raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(home)
    yield home.resolve()


def tool_messages(server: RecordingChatServer, request: int = 1) -> list[dict[str, Any]]:
    return [m for m in server.requests[request]["messages"] if m["role"] == "tool"]


def test_the_documented_specs_name_only_real_parameters_of_hermes_tools() -> None:
    specs = {spec.name: spec for spec in doc_specs()}
    toolsets = {"file": {"read_file", "write_file", "patch", "search_files"}}
    toolsets["terminal"] = {"terminal", "process"}
    for toolset, names in toolsets.items():
        agent = hermes_agent("http://127.0.0.1:9/v1", enabled_toolsets=[toolset])
        assert set(agent.valid_tool_names) == names, toolset
    assert set(specs) == {name for names in toolsets.values() for name in names}
    for name, spec in specs.items():
        parameters = registry.get_schema(name)["parameters"]["properties"]
        fields = {*spec.path_fields, *spec.required_path_fields}
        fields |= {field.split("/", 1)[0] for field in spec.content_fields}
        if spec.cwd_field:
            fields.add(spec.cwd_field)
        assert fields <= set(parameters), (name, fields - set(parameters))
        assert spec.schema == registry.get_schema(name)["parameters"], name
    terminal = specs["terminal"]
    assert terminal.cwd_field == "workdir" and terminal.required_path_fields == ()


def test_write_file_writes_the_path_the_policy_judged_not_one_in_the_process_cwd(
    workspace: Path, elsewhere: Path
) -> None:
    policy = Policy(workspace)
    steps = [
        tool_reply("write_file", {"path": ".bashrc", "content": "echo governed\n"}),
        text_reply("Written."),
    ]
    with RecordingChatServer(steps) as server:
        agent = hermes_agent(server.base_url, enabled_toolsets=["file"])
        with HermesGovernance(agent, pep=policy.pep, specs=doc_specs(), context=policy.context):
            agent.run_conversation("Add a line to .bashrc")
    server.assert_complete()
    (result,) = tool_messages(server)
    assert "error" not in json.loads(result["content"]), result
    assert (workspace / ".bashrc").read_text() == "echo governed\n"
    assert not (elsewhere / ".bashrc").exists(), "the write escaped to the process's cwd"
    assert policy.audit.results == ["ALLOW"]


def test_terminal_without_workdir_runs_in_the_workspace_once_approved(
    workspace: Path, elsewhere: Path
) -> None:
    policy = Policy(workspace)
    approver = AuthorityApprover(policy.authority)
    steps = [tool_reply("terminal", {"command": "pwd"}), text_reply("Done.")]
    with RecordingChatServer(steps) as server:
        agent = hermes_agent(server.base_url, enabled_toolsets=["terminal"])
        governance = HermesGovernance(
            agent, pep=policy.pep, specs=doc_specs(), context=policy.context, approver=approver
        )
        with governance:
            agent.run_conversation("Where am I?")
    server.assert_complete()
    (request,) = approver.requests
    assert type(request) is ApprovalRequest
    assert dict(request.arguments) == {"command": "pwd"}  # as the model wrote it, judged
    assert request.action.cwd == str(workspace)
    (result,) = tool_messages(server)
    output = json.loads(result["content"])
    assert output.get("exit_code") == 0, output
    assert output["output"].strip() == str(workspace), output


def test_a_parallel_batch_runs_each_call_once_through_hermes_nested_dispatch(
    workspace: Path, elsewhere: Path
) -> None:
    # Two reads are parallel-safe: Hermes runs them on its concurrent path, which passes each
    # registry tool through the tool_execution middleware twice (invoke_tool, then
    # handle_function_call). The inner pass belongs to the call the outer pass runs.
    (workspace / "a.txt").write_text("alpha\n")
    (workspace / "b.txt").write_text("beta\n")
    policy = Policy(workspace)
    steps = [
        tool_reply(("read_file", {"path": "a.txt"}), ("read_file", {"path": "b.txt"})),
        text_reply("Read both."),
    ]
    with RecordingChatServer(steps) as server:
        agent = hermes_agent(server.base_url, enabled_toolsets=["file"])
        with HermesGovernance(agent, pep=policy.pep, specs=doc_specs(), context=policy.context):
            agent.run_conversation("Read a.txt and b.txt")
    server.assert_complete()
    first, second = (json.loads(m["content"]) for m in tool_messages(server))
    assert "alpha" in first.get("content", ""), first
    assert "beta" in second.get("content", ""), second
    assert policy.audit.results == ["ALLOW", "ALLOW"]


def test_arguments_hermes_coerces_are_judged_as_the_tool_gets_them(
    workspace: Path, elsewhere: Path
) -> None:
    # Models write numbers as strings; Hermes coerces them by the tool's schema (on the
    # sequential path only after the hook). The policy judges what the tool gets.
    (workspace / "a.txt").write_text("alpha\nbeta\n")
    policy = Policy(workspace)
    steps = [tool_reply("read_file", {"path": "a.txt", "limit": "1"}), text_reply("Read.")]
    with RecordingChatServer(steps) as server:
        agent = hermes_agent(server.base_url, enabled_toolsets=["file"])
        with HermesGovernance(agent, pep=policy.pep, specs=doc_specs(), context=policy.context):
            agent.run_conversation("Read the first line of a.txt")
    server.assert_complete()
    (result,) = (json.loads(m["content"]) for m in tool_messages(server))
    assert "alpha" in result.get("content", "") and "beta" not in result["content"], result
    assert policy.audit.results == ["ALLOW"]


class Conformance:
    """The suite's tools and policy, on the test toolset."""

    def __init__(self, workspace: Path) -> None:
        self.tools = conformance_tools()
        self.specs = register_tools(self.tools)
        key = Ed25519PrivateKey.generate()
        self.authority = ApprovalAuthority(key, "alice")
        self.audit = RecordingAuditSink()
        self.pep = PolicyEnforcementPoint(
            ConformancePolicy(),
            audit_logger=self.audit,
            approval_verifier=SignedApprovalVerifier({"alice": key.public_key()}),
            consumed_approvals=MemoryConsumedApprovals(),
        )
        self.context = ExecutionContext(
            task_id="hermes", actor_id="tester", workspace=str(workspace), git_sha="0123456"
        )

    def tool(self, name: str) -> Any:
        return next(tool for tool in self.tools if tool.name == name)


def run_command_with(suite: Conformance, approver: Any) -> str:
    steps = [tool_reply("run_command", {"command": "ls"}), text_reply("Not run.")]
    with RecordingChatServer(steps) as server:
        agent = hermes_agent(server.base_url)
        governance = HermesGovernance(
            agent, pep=suite.pep, specs=suite.specs, context=suite.context, approver=approver
        )
        with governance:
            agent.run_conversation("List the files")
    (message,) = tool_messages(server)
    return str(json.loads(message["content"])["error"])


def test_an_approver_that_fails_or_declines_is_reported_to_the_model(workspace: Path) -> None:
    suite = Conformance(workspace)

    def broken(request: ApprovalRequest) -> Any:
        raise RuntimeError("the pager service is unreachable")

    def declining(request: ApprovalRequest) -> Any:
        raise ApprovalDeclinedError("not during the freeze")

    def yes(request: ApprovalRequest) -> Any:
        return True  # a bare "yes" cannot be verified

    failed = run_command_with(suite, broken)
    assert "RuntimeError: the pager service is unreachable" in failed, failed
    declined = run_command_with(suite, declining)
    assert "the approver declined: not during the freeze" in declined, declined
    wrong = run_command_with(suite, yes)
    assert "the approver returned True" in wrong, wrong
    assert suite.tool("run_command").calls == []


def test_the_old_approvals_keyword_still_works_with_a_warning(workspace: Path) -> None:
    suite = Conformance(workspace)
    approver = AuthorityApprover(suite.authority)
    steps = [tool_reply("run_command", {"command": "ls"}), text_reply("Listed.")]
    with RecordingChatServer(steps) as server:
        agent = hermes_agent(server.base_url)
        with pytest.warns(DeprecationWarning, match="approver="):
            governance = HermesGovernance(
                agent, pep=suite.pep, specs=suite.specs, context=suite.context, approvals=approver
            )
        with governance:
            agent.run_conversation("List the files")
        with (
            pytest.raises(ConfigurationError, match="more than one keyword"),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore", DeprecationWarning)
            HermesGovernance(
                agent,
                pep=suite.pep,
                specs=suite.specs,
                context=suite.context,
                approver=approver,
                approvals=approver,
            )
    assert suite.tool("run_command").calls == [{"command": "ls"}]
    with pytest.warns(DeprecationWarning, match="approver="):
        guard = PolicyGuard(
            pep=suite.pep, specs=suite.specs, context=suite.context, approvals=approver
        )
    assert guard.approver is approver


def test_a_call_id_the_server_repeats_in_a_later_message_runs_again(workspace: Path) -> None:
    # Some servers number calls per message; the same id in a later message is a new call.
    suite = Conformance(workspace)

    def weather(city: str) -> dict[str, Any]:
        reply = tool_reply("get_weather", {"city": city})
        reply["tool_calls"][0]["id"] = "call_0"
        return reply

    steps = [weather("Lisbon"), weather("Lisbon"), text_reply("Sunny, twice.")]
    with RecordingChatServer(steps) as server:
        agent = hermes_agent(server.base_url)
        with HermesGovernance(agent, pep=suite.pep, specs=suite.specs, context=suite.context):
            agent.run_conversation("What is the weather in Lisbon? Check twice.")
    server.assert_complete()
    assert suite.tool("get_weather").calls == [{"city": "Lisbon"}, {"city": "Lisbon"}]
