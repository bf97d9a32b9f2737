from __future__ import annotations

import threading
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue.adapters import AntigravityAdapter, GenericAdapter
from jevqueue.approvals import ApprovalAuthority, MemoryConsumedApprovals, SignedApprovalVerifier
from jevqueue.errors import (
    ConfigurationError,
    InvalidContextError,
    InvalidToolArgumentsError,
    NonFiniteNumberError,
    PolicyDeniedError,
    UnfulfilledObligationError,
    UnregisteredToolError,
)
from jevqueue.policy import (
    PolicyEnforcementPoint,
    ToolSpec,
    VerdictKind,
    create_default_policy_decision_point,
    generic_registry,
)
from jevqueue.testing.recording_audit import RecordingAuditSink

from .conftest import WORKSPACE, context_mapping

# The adapter page's example, verbatim except for the package name.
SEED_EXAMPLE = """
from jevqueue import PolicyEnforcementPoint, create_default_policy_decision_point
from jevqueue.adapters import GenericAdapter


class AuditCollector:
    def __init__(self):
        self.events = []

    def log(self, event):
        self.events.append(event)


adapter = GenericAdapter(
    PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        audit_logger=AuditCollector(),
    )
)

allowed = adapter.intercept_tool_call(
    "write_to_file",
    {"TargetFile": "src/feature.py", "CodeContent": "value = 1\\n"},
    {
        "task_id": "task-42",
        "actor_id": "coding-agent",
        "workspace": "/workspace/project",
        "git_sha": "0123456789abcdef0123456789abcdef01234567",
        "environment": "local",
    },
)
"""


def test_seed_example_runs_verbatim() -> None:
    namespace: dict[str, Any] = {"__name__": "seed_example"}
    exec(compile(SEED_EXAMPLE, "seed_example.py", "exec"), namespace)
    assert namespace["allowed"] is True
    events = namespace["adapter"].pep.audit_logger.events
    assert len(events) == 1
    assert events[0]["result"] == "ALLOW"
    assert events[0]["tool"] == "write_to_file"
    assert events[0]["action_digest"].startswith("sha256:")


@pytest.fixture
def sink() -> RecordingAuditSink:
    return RecordingAuditSink()


@pytest.fixture
def adapter(sink: RecordingAuditSink) -> AntigravityAdapter:
    pep = PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=sink)
    return AntigravityAdapter(pep)


def test_repair_returns_false_and_exposes_the_proposal(adapter: AntigravityAdapter) -> None:
    arguments = {"TargetFile": "src/../lib/a.py", "CodeContent": "x"}
    assert adapter.intercept_tool_call("write_to_file", arguments, context_mapping()) is False
    verdict = adapter.last_verdict
    assert verdict is not None and verdict.kind is VerdictKind.REPAIR
    assert verdict.repaired is not None
    resubmitted = adapter.intercept_tool_call(
        verdict.repaired["tool"], dict(verdict.repaired["arguments"]), context_mapping()
    )
    assert resubmitted is True


def test_denial_raises_with_the_verdict(
    adapter: AntigravityAdapter, sink: RecordingAuditSink
) -> None:
    with pytest.raises(PolicyDeniedError) as caught:
        adapter.intercept_tool_call(
            "write_to_file", {"TargetFile": ".git/hooks/pre-commit"}, context_mapping()
        )
    assert caught.value.verdict.kind is VerdictKind.DENY
    assert adapter.last_verdict is caught.value.verdict
    assert sink.events[-1]["result"] == "DENY"


def test_unfulfilled_obligation_carries_the_digest(adapter: AntigravityAdapter) -> None:
    arguments = {"CommandLine": "pytest", "Cwd": WORKSPACE, "SafeToAutoRun": True}
    with pytest.raises(UnfulfilledObligationError) as caught:
        adapter.intercept_tool_call("run_command", arguments, context_mapping())
    assert adapter.last_action is not None
    assert caught.value.verdict.action_digest == adapter.last_action.digest


def test_the_seed_approval_flow_end_to_end() -> None:
    authority = ApprovalAuthority(Ed25519PrivateKey.generate(), "release-manager")
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        audit_logger=RecordingAuditSink(),
        approval_verifier=SignedApprovalVerifier({"release-manager": authority.public_key}),
        consumed_approvals=MemoryConsumedApprovals(),
    )
    adapter = GenericAdapter(pep)
    arguments = {"CommandLine": "make test", "Cwd": WORKSPACE}
    try:
        adapter.intercept_tool_call("run_command", arguments, context_mapping())
    except UnfulfilledObligationError as error:
        digest = error.verdict.action_digest
    else:  # pragma: no cover - the obligation must be raised
        pytest.fail("run_command ran without approval")
    record = authority.issue(digest)
    assert adapter.intercept_tool_call("run_command", arguments, context_mapping(), [record])
    with pytest.raises(UnfulfilledObligationError):
        adapter.intercept_tool_call("run_command", arguments, context_mapping(), [record])
    with pytest.raises(UnfulfilledObligationError):
        adapter.intercept_tool_call(
            "run_command", {**arguments, "CommandLine": "make deploy"}, context_mapping(), [record]
        )


def test_the_record_jevqueue_approve_prints_is_read_as_the_record_it_is() -> None:
    # `jevqueue approve` prints the record as JSON; handed over as that dict it authorises
    # the call (its signature, binding and freshness checked like any record's).
    authority = ApprovalAuthority(Ed25519PrivateKey.generate(), "release-manager")
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        audit_logger=RecordingAuditSink(),
        approval_verifier=SignedApprovalVerifier({"release-manager": authority.public_key}),
        consumed_approvals=MemoryConsumedApprovals(),
    )
    adapter = GenericAdapter(pep)
    arguments = {"CommandLine": "make test", "Cwd": WORKSPACE}
    digest = adapter.check("run_command", arguments, context_mapping()).action_digest
    printed = authority.issue(digest).to_dict()
    assert adapter.intercept_tool_call("run_command", arguments, context_mapping(), [printed])
    with pytest.raises(UnfulfilledObligationError, match="already used"):
        adapter.intercept_tool_call("run_command", arguments, context_mapping(), [printed])


def test_generic_adapter_refuses_antigravity_only_tools() -> None:
    generic = GenericAdapter(PolicyEnforcementPoint(create_default_policy_decision_point()))
    with pytest.raises(UnregisteredToolError):
        generic.intercept_tool_call(
            "view_file", {"AbsolutePath": f"{WORKSPACE}/a"}, context_mapping()
        )


def test_antigravity_tools_are_judged(adapter: AntigravityAdapter) -> None:
    assert adapter.intercept_tool_call(
        "view_file", {"AbsolutePath": f"{WORKSPACE}/src/a.py", "StartLine": 1}, context_mapping()
    )
    chunks = [
        {
            "AllowMultiple": False,
            "TargetContent": "a = 1",
            "ReplacementContent": "a = 2",
            "StartLine": 1,
            "EndLine": 1,
        }
    ]
    assert adapter.intercept_tool_call(
        "multi_replace_file_content",
        {"TargetFile": "src/a.py", "ReplacementChunks": chunks, "Instruction": "bump"},
        context_mapping(),
    )
    with pytest.raises(PolicyDeniedError):
        adapter.intercept_tool_call("view_file", {"AbsolutePath": "/etc/shadow"}, context_mapping())


@pytest.mark.parametrize(
    ("tool", "arguments", "context", "error"),
    [
        ("delete_repo", {}, context_mapping(), UnregisteredToolError),
        ("write_to_file", {"TargetFile": 7}, context_mapping(), InvalidToolArgumentsError),
        (
            "write_to_file",
            {"TargetFile": "a", "x": float("nan")},
            context_mapping(),
            NonFiniteNumberError,
        ),
        (
            "write_to_file",
            {"TargetFile": "a"},
            context_mapping(git_sha="HEAD"),
            InvalidContextError,
        ),
        ("write_to_file", {"TargetFile": "a"}, context_mapping(workspace="/"), InvalidContextError),
    ],
)
def test_input_errors_raise_typed_and_are_audited_as_denials(
    adapter: AntigravityAdapter,
    sink: RecordingAuditSink,
    tool: str,
    arguments: dict[str, Any],
    context: dict[str, Any],
    error: type[Exception],
) -> None:
    with pytest.raises(error):
        adapter.intercept_tool_call(tool, arguments, context)
    assert adapter.last_verdict is None
    assert len(sink.events) == 1
    event = sink.events[0]
    assert event["result"] == "DENY"
    assert event["tool"] == tool
    assert error.__name__ in event["reasons"][0]


def test_check_returns_verdicts_instead_of_raising(adapter: AntigravityAdapter) -> None:
    assert adapter.check("write_to_file", {"TargetFile": "a.py"}, context_mapping()).allowed
    denied = adapter.check("write_to_file", {"TargetFile": "../a.py"}, context_mapping())
    assert denied.kind is VerdictKind.DENY
    obliged = adapter.check("run_command", {"CommandLine": "ls", "Cwd": "."}, context_mapping())
    assert obliged.kind is VerdictKind.ALLOW_WITH_OBLIGATIONS and not obliged.allowed


def test_custom_registry(sink: RecordingAuditSink) -> None:
    registry = generic_registry().register(
        ToolSpec("fetch", side_effects=frozenset({"network"}), content_fields=("body",))
    )
    pep = PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=sink)
    adapter = GenericAdapter(pep, registry=registry)
    assert adapter.intercept_tool_call(
        "fetch", {"url": "https://x", "body": "hi"}, context_mapping()
    )


def test_adapter_configuration_is_checked() -> None:
    with pytest.raises(ConfigurationError):
        GenericAdapter(object())  # type: ignore[arg-type]
    pep = PolicyEnforcementPoint(create_default_policy_decision_point())
    with pytest.raises(ConfigurationError):
        GenericAdapter(pep, registry={"write_to_file": None})  # type: ignore[arg-type]


def test_last_verdict_is_per_thread(adapter: AntigravityAdapter) -> None:
    adapter.intercept_tool_call("write_to_file", {"TargetFile": "a.py"}, context_mapping())
    seen: list[Any] = []
    worker = threading.Thread(target=lambda: seen.append(adapter.last_verdict))
    worker.start()
    worker.join()
    assert seen == [None]
    assert adapter.last_verdict is not None
