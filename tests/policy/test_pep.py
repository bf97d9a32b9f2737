from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue.approvals import (
    ApprovalAuthority,
    ApprovalRecord,
    MemoryConsumedApprovals,
    SignedApprovalVerifier,
    SQLiteConsumedApprovals,
)
from jevqueue.errors import (
    AuditWriteError,
    ConfigurationError,
    PolicyDeniedError,
    UnfulfilledObligationError,
)
from jevqueue.policy import (
    Action,
    FunctionRule,
    PolicyEnforcementPoint,
    RuleBasedPolicyDecisionPoint,
    Verdict,
    VerdictKind,
    create_default_policy_decision_point,
    generic_registry,
)
from jevqueue.testing.recording_audit import RecordingAuditSink

from .conftest import WORKSPACE, context_mapping

REGISTRY = generic_registry()
EVENT_KEYS = {
    "decision_id",
    "action_digest",
    "result",
    "reasons",
    "obligations",
    "policy_revision",
    "task_id",
    "actor_id",
    "environment",
    "tool",
    "timestamp",
}


def write_action(path: str = "src/a.py") -> Action:
    return Action.build(
        REGISTRY, "write_to_file", {"TargetFile": path, "CodeContent": "x"}, context_mapping()
    )


def command_action(command: str = "make test") -> Action:
    return Action.build(
        REGISTRY, "run_command", {"CommandLine": command, "Cwd": WORKSPACE}, context_mapping()
    )


@pytest.fixture
def sink() -> RecordingAuditSink:
    return RecordingAuditSink()


@pytest.fixture
def authority() -> ApprovalAuthority:
    return ApprovalAuthority(Ed25519PrivateKey.generate(), "alice")


@pytest.fixture
def verifier(authority: ApprovalAuthority) -> SignedApprovalVerifier:
    return SignedApprovalVerifier({"alice": authority.public_key})


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # The default consumed-approval store lives under JEVQUEUE_STATE_DIR.
    monkeypatch.setenv("JEVQUEUE_STATE_DIR", str(tmp_path / "state"))
    yield


def test_every_evaluation_is_audited_with_a_unique_id(sink: RecordingAuditSink) -> None:
    pep = PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=sink)
    action = write_action()
    first = pep.evaluate(action)
    second = pep.evaluate(action)
    assert first.kind is second.kind is VerdictKind.ALLOW
    assert len(sink.events) == 2
    for event in sink.events:
        assert set(event) >= EVENT_KEYS
        assert event["action_digest"] == action.digest
        assert event["result"] == "ALLOW"
        assert event["task_id"] == "task-42"
        assert event["policy_revision"] == pep.revision
    assert sink.events[0]["decision_id"] != sink.events[1]["decision_id"]


def test_seed_style_logger_with_log_only_works() -> None:
    class Collector:
        def __init__(self) -> None:
            self.events: list[Any] = []

        def log(self, event: Any) -> None:
            self.events.append(event)

    collector = Collector()
    pep = PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=collector)
    pep.evaluate(write_action("../x"))
    assert len(collector.events) == 1
    assert collector.events[0]["result"] == "DENY"


def test_logger_without_a_write_method_is_refused() -> None:
    with pytest.raises(ConfigurationError):
        PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=object())


def test_audit_failure_denies(sink: RecordingAuditSink) -> None:
    pep = PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=sink)
    sink.fail_with(OSError("disk full"))
    verdict = pep.evaluate(write_action())
    assert verdict.kind is VerdictKind.DENY
    assert verdict.rule_ids == ("jevqueue.pep.audit",)
    with pytest.raises(PolicyDeniedError) as caught:
        pep.enforce(write_action())
    assert isinstance(caught.value.__cause__, AuditWriteError)
    assert caught.value.verdict.action_digest == write_action().digest
    sink.fail_with(None)
    assert pep.enforce(write_action()).kind is VerdictKind.ALLOW


class ExplodingPDP:
    revision = "test-revision"

    def evaluate(self, action: Action) -> Verdict:
        raise RuntimeError(f"crash while reading {action.arguments['CodeContent']}")


class WrongTypePDP:
    revision = "test-revision"

    def evaluate(self, action: Action) -> Any:
        return "ALLOW"


@pytest.mark.parametrize("pdp", [ExplodingPDP(), WrongTypePDP()])
def test_a_failing_pdp_denies_and_is_audited(pdp: Any, sink: RecordingAuditSink) -> None:
    pep = PolicyEnforcementPoint(pdp, audit_logger=sink)
    verdict = pep.evaluate(write_action())
    assert verdict.kind is VerdictKind.DENY
    assert verdict.rule_ids == ("jevqueue.pep.fail_closed",)
    assert verdict.policy_revision == "test-revision"
    assert "crash while reading" not in " ".join(verdict.reasons)
    assert [event["result"] for event in sink.events] == ["DENY"]
    with pytest.raises(PolicyDeniedError):
        pep.enforce(write_action())


def test_pdp_must_have_evaluate() -> None:
    with pytest.raises(ConfigurationError):
        PolicyEnforcementPoint(object())  # type: ignore[arg-type]


def test_enforce_outcomes() -> None:
    pep = PolicyEnforcementPoint(create_default_policy_decision_point())
    assert pep.enforce(write_action()).allowed
    repaired = pep.enforce(write_action("src/../b.py"))
    assert repaired.kind is VerdictKind.REPAIR and not repaired.allowed
    with pytest.raises(PolicyDeniedError, match="outside the workspace"):
        pep.enforce(write_action("../b.py"))
    action = command_action()
    with pytest.raises(UnfulfilledObligationError) as caught:
        pep.enforce(action)
    assert caught.value.verdict.action_digest == action.digest
    assert caught.value.verdict.obligations == ("explicit_approval",)


@pytest.mark.parametrize(
    "records",
    [
        (),
        ("explicit_approval",),
        "explicit_approval",
        ({"approval_id": "x", "action_digest": "sha256:" + "0" * 64},),
        (None,),
    ],
)
def test_without_a_verifier_nothing_fulfils_an_approval(
    records: Any, authority: ApprovalAuthority
) -> None:
    pep = PolicyEnforcementPoint(create_default_policy_decision_point())
    action = command_action()
    with pytest.raises(UnfulfilledObligationError):
        pep.enforce(action, records)
    signed = authority.issue(action.digest)
    with pytest.raises(UnfulfilledObligationError):
        pep.enforce(action, [signed])


def test_raw_strings_never_fulfil_even_with_a_verifier(
    verifier: SignedApprovalVerifier,
) -> None:
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        approval_verifier=verifier,
        consumed_approvals=MemoryConsumedApprovals(),
    )
    for records in ("explicit_approval", ["explicit_approval"], [command_action().digest]):
        with pytest.raises(UnfulfilledObligationError):
            pep.enforce(command_action(), records)


def test_signed_approval_fulfils_once(
    authority: ApprovalAuthority, verifier: SignedApprovalVerifier, sink: RecordingAuditSink
) -> None:
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        audit_logger=sink,
        approval_verifier=verifier,
        consumed_approvals=MemoryConsumedApprovals(),
    )
    action = command_action()
    with pytest.raises(UnfulfilledObligationError) as caught:
        pep.enforce(action)
    record = authority.issue(caught.value.verdict.action_digest)
    verdict = pep.enforce(action, [record])
    assert verdict.allowed
    assert verdict.kind is VerdictKind.ALLOW_WITH_OBLIGATIONS and verdict.obligations == ()
    with pytest.raises(UnfulfilledObligationError):
        pep.enforce(action, [record])
    assert [event["result"] for event in sink.events] == ["ALLOW_WITH_OBLIGATIONS"] * 3


def test_approval_for_another_action_does_not_fit(
    authority: ApprovalAuthority, verifier: SignedApprovalVerifier
) -> None:
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        approval_verifier=verifier,
        consumed_approvals=MemoryConsumedApprovals(),
    )
    record = authority.issue(command_action("make test").digest)
    with pytest.raises(UnfulfilledObligationError):
        pep.enforce(command_action("make deploy"), [record])
    other_workspace = Action.build(
        REGISTRY,
        "run_command",
        {"CommandLine": "make test", "Cwd": "/workspace/other"},
        context_mapping(workspace="/workspace/other"),
    )
    with pytest.raises(UnfulfilledObligationError):
        pep.enforce(other_workspace, [record])


def test_untrusted_or_stale_approvals_are_refused(verifier: SignedApprovalVerifier) -> None:
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        approval_verifier=verifier,
        consumed_approvals=MemoryConsumedApprovals(),
    )
    action = command_action()
    mallory = ApprovalAuthority(Ed25519PrivateKey.generate(), "alice")
    with pytest.raises(UnfulfilledObligationError):
        pep.enforce(action, [mallory.issue(action.digest)])
    alice_unsigned = ApprovalRecord("apr-1", action.digest, "alice", "2020-01-01T00:00:00Z")
    with pytest.raises(UnfulfilledObligationError):
        pep.enforce(action, [alice_unsigned])


def test_replay_is_refused_after_a_restart(
    tmp_path: Path, authority: ApprovalAuthority, verifier: SignedApprovalVerifier
) -> None:
    store = tmp_path / "consumed.sqlite3"
    action = command_action()
    record = authority.issue(action.digest, ttl=timedelta(minutes=5))
    first = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        approval_verifier=verifier,
        consumed_approvals=SQLiteConsumedApprovals(store),
    )
    assert first.enforce(action, [record]).allowed
    restarted = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        approval_verifier=verifier,
        consumed_approvals=SQLiteConsumedApprovals(store),
    )
    with pytest.raises(UnfulfilledObligationError):
        restarted.enforce(action, [record])


def test_default_consumed_store_is_durable(
    tmp_path: Path, authority: ApprovalAuthority, verifier: SignedApprovalVerifier
) -> None:
    action = command_action()
    record = authority.issue(action.digest)
    pep = PolicyEnforcementPoint(create_default_policy_decision_point(), approval_verifier=verifier)
    assert isinstance(pep.consumed_approvals, SQLiteConsumedApprovals)
    assert pep.enforce(action, [record]).allowed
    again = PolicyEnforcementPoint(
        create_default_policy_decision_point(), approval_verifier=verifier
    )
    with pytest.raises(UnfulfilledObligationError):
        again.enforce(action, [record])
    assert (tmp_path / "state" / "consumed-approvals.sqlite3").exists()


def test_approvals_cannot_relax_a_denial(
    authority: ApprovalAuthority, verifier: SignedApprovalVerifier
) -> None:
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        approval_verifier=verifier,
        consumed_approvals=MemoryConsumedApprovals(),
    )
    action = Action.build(
        REGISTRY, "run_command", {"CommandLine": "ls", "Cwd": "/tmp"}, context_mapping()
    )
    with pytest.raises(PolicyDeniedError):
        pep.enforce(action, [authority.issue(action.digest)])


def test_other_obligations_stay_unmet(
    authority: ApprovalAuthority, verifier: SignedApprovalVerifier
) -> None:
    review = FunctionRule(
        "acme.review", lambda _a: Verdict.allow_with_obligations(["code_review"], "review it")
    )
    pep = PolicyEnforcementPoint(
        RuleBasedPolicyDecisionPoint([review]),
        approval_verifier=verifier,
        consumed_approvals=MemoryConsumedApprovals(),
    )
    action = write_action()
    with pytest.raises(UnfulfilledObligationError) as caught:
        pep.enforce(action, [authority.issue(action.digest)])
    assert caught.value.verdict.obligations == ("code_review",)


def test_a_failing_verifier_leaves_the_obligation_unmet(authority: ApprovalAuthority) -> None:
    def broken(record: Any, action: Any) -> bool:
        raise RuntimeError("verifier down")

    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        approval_verifier=broken,
        consumed_approvals=MemoryConsumedApprovals(),
    )
    action = command_action()
    with pytest.raises(UnfulfilledObligationError):
        pep.enforce(action, [authority.issue(action.digest)])


def test_truthy_non_bool_verifier_is_not_trusted(authority: ApprovalAuthority) -> None:
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        approval_verifier=lambda record, action: "yes",
        consumed_approvals=MemoryConsumedApprovals(),
    )
    action = command_action()
    with pytest.raises(UnfulfilledObligationError):
        pep.enforce(action, [authority.issue(action.digest)])


@pytest.mark.parametrize(
    "answer",
    [
        lambda verdict, *_a, **_k: Verdict.allow("approved, trust me"),
        lambda verdict, *_a, **_k: Verdict.repair("write_to_file", {"TargetFile": "a"}, "r"),
        lambda verdict, *_a, **_k: Verdict.allow_with_obligations(["other"], "swap"),
        lambda verdict, *_a, **_k: "ALLOW",
    ],
)
def test_an_inconsistent_approval_check_leaves_the_obligation_unmet(
    answer: Any, monkeypatch: pytest.MonkeyPatch, authority: ApprovalAuthority
) -> None:
    monkeypatch.setattr("jevqueue.policy._pep._check_approvals", lambda: answer)
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        approval_verifier=lambda record, action: True,
        consumed_approvals=MemoryConsumedApprovals(),
    )
    action = command_action()
    with pytest.raises(UnfulfilledObligationError) as caught:
        pep.enforce(action, [authority.issue(action.digest)])
    assert caught.value.verdict.obligations == ("explicit_approval",)


def test_an_approval_check_may_deny(
    monkeypatch: pytest.MonkeyPatch, authority: ApprovalAuthority
) -> None:
    monkeypatch.setattr(
        "jevqueue.policy._pep._check_approvals", lambda: lambda *_a, **_k: Verdict.deny("forged")
    )
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        approval_verifier=lambda record, action: True,
        consumed_approvals=MemoryConsumedApprovals(),
    )
    action = command_action()
    with pytest.raises(PolicyDeniedError) as caught:
        pep.enforce(action, [authority.issue(action.digest)])
    assert caught.value.verdict.action_digest == action.digest


def test_decision_ids_are_uuid7() -> None:
    import uuid

    from jevqueue.policy import new_decision_id

    ids = [new_decision_id() for _ in range(1000)]
    assert len(set(ids)) == 1000
    parsed = uuid.UUID(ids[0])
    assert parsed.version == 7 and parsed.variant == uuid.RFC_4122


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_never_repeats_its_parents_decision_ids() -> None:
    from jevqueue.policy import new_decision_id

    new_decision_id()  # the pool now holds random bytes the child inherits
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        os.close(read)
        os.write(write, "\n".join(new_decision_id() for _ in range(100)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as stream:
        children = set(stream.read().split("\n"))
    os.waitpid(child, 0)
    parents = {new_decision_id() for _ in range(100)}
    assert len(children) == 100
    # Every id's random part is fresh: none is shared, not even in the random bits.
    assert not {i.replace("-", "")[12:] for i in children} & {
        i.replace("-", "")[12:] for i in parents
    }


def test_concurrent_decisions_are_each_audited(sink: RecordingAuditSink) -> None:
    import threading

    pep = PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=sink)
    actions = [write_action(f"src/file_{index}.py") for index in range(8)]

    def work(action: Action) -> None:
        for _ in range(25):
            assert pep.evaluate(action).allowed

    threads = [threading.Thread(target=work, args=(action,)) for action in actions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(sink.events) == 200
    assert len({event["decision_id"] for event in sink.events}) == 200


def test_rejections_are_audited_with_what_is_known(sink: RecordingAuditSink) -> None:
    from jevqueue.errors import UnregisteredToolError
    from jevqueue.policy import ExecutionContext

    pep = PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=sink)
    pep.audit_rejection(
        "nope", ExecutionContext.coerce(context_mapping()), UnregisteredToolError("nope")
    )
    pep.audit_rejection(["x"], {"task_id": 5, "actor_id": "a" * 1000}, ValueError())
    first, second = sink.events
    assert first["task_id"] == "task-42" and first["action_digest"] == ""
    assert first["reasons"] == ["refused before evaluation: UnregisteredToolError"]
    assert second["task_id"] == "" and second["tool"] == ""
    assert len(second["actor_id"]) <= 256
