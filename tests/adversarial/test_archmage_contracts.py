"""archmage-ai 2.0's contract tests (PEP, generic and Antigravity adapters, digests, the PDP,
adversarial paths), restated against jevqueue's API.

Each test keeps the contract archmage's test checks; where jevqueue is deliberately
stricter, the test asserts jevqueue's behaviour and says so (see "Migrating from
archmage-ai" in docs/policy.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from attack_harness import Sandbox
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue.adapters import AntigravityAdapter, GenericAdapter
from jevqueue.approvals import ApprovalAuthority
from jevqueue.errors import (
    ArgumentsTooLargeError,
    InvalidContextError,
    InvalidToolArgumentsError,
    NonCanonicalArgumentsError,
    PolicyDeniedError,
    UnfulfilledObligationError,
    UnregisteredToolError,
)
from jevqueue.policy import (
    Action,
    FunctionRule,
    PolicyEnforcementPoint,
    RuleBasedPolicyDecisionPoint,
    Verdict,
    VerdictKind,
    antigravity_registry,
    create_default_policy_decision_point,
    generic_registry,
)
from jevqueue.testing.recording_audit import RecordingAuditSink


def _write(target: str, content: Any = "value = 1\n") -> dict[str, Any]:
    return {"TargetFile": target, "CodeContent": content}


def _pep(*rules: Any, audit: RecordingAuditSink | None = None) -> PolicyEnforcementPoint:
    return PolicyEnforcementPoint(
        RuleBasedPolicyDecisionPoint(rules),
        audit_logger=audit if audit is not None else RecordingAuditSink(),
    )


def _action(sandbox: Sandbox, tool: str = "write_to_file", **arguments: Any) -> Action:
    return Action.build(
        antigravity_registry(), tool, arguments or _write("src/a.py"), sandbox.context()
    )


# --- the PEP (archmage tests/test_pep.py) ---------------------------------------------------


def test_enforce_deny_raises_with_the_rule_id(sandbox: Sandbox) -> None:
    pep = _pep(FunctionRule("test.deny", lambda a: Verdict.deny("no", rule_ids=("test.deny",))))
    with pytest.raises(PolicyDeniedError) as raised:
        pep.enforce(_action(sandbox))
    assert raised.value.verdict.rule_ids == ("test.deny",)
    assert isinstance(raised.value, PermissionError)


def test_enforce_repair_returns_the_proposal_and_does_not_allow(sandbox: Sandbox) -> None:
    # archmage raises RepairRequiredError or calls a repair handler; jevqueue returns the
    # REPAIR verdict (not allowed) with the proposal to resubmit: deliberately different.
    pep = _pep(
        FunctionRule(
            "test.repair", lambda a: Verdict.repair("write_to_file", _write("src/b.py"), "fix it")
        )
    )
    verdict = pep.enforce(_action(sandbox))
    assert verdict.kind is VerdictKind.REPAIR and not verdict.allowed
    assert verdict.repaired is not None and verdict.repaired["tool"] == "write_to_file"


def test_an_unmet_obligation_raises_naming_it(sandbox: Sandbox) -> None:
    rule = FunctionRule(
        "test.obligation",
        lambda a: Verdict.allow_with_obligations(("explicit_approval",), "review it"),
    )
    with pytest.raises(UnfulfilledObligationError, match="explicit_approval"):
        _pep(rule).enforce(_action(sandbox))


def test_naming_an_obligation_never_fulfils_it(sandbox: Sandbox) -> None:
    # archmage accepts acknowledged_obligations=[...] for its soft obligations and refuses
    # it for explicit_approval; jevqueue has only explicit_approval, and a raw string
    # offered as an approval record never counts.
    rule = FunctionRule(
        "test.approval",
        lambda a: Verdict.allow_with_obligations(("explicit_approval",), "approve it"),
    )
    pep = PolicyEnforcementPoint(
        RuleBasedPolicyDecisionPoint([rule]),
        audit_logger=RecordingAuditSink(),
        approval_verifier=lambda record, action: True,
    )
    with pytest.raises(UnfulfilledObligationError):
        pep.enforce(_action(sandbox), ["explicit_approval"])


def test_evaluate_returns_the_authoritative_audited_verdict(sandbox: Sandbox) -> None:
    audit = RecordingAuditSink()
    rule = FunctionRule(
        "test.obligation",
        lambda a: Verdict.allow_with_obligations(
            ("explicit_approval",), "review it", rule_ids=("test.obligation",)
        ),
    )
    verdict = _pep(rule, audit=audit).evaluate(_action(sandbox))
    assert verdict.kind is VerdictKind.ALLOW_WITH_OBLIGATIONS and not verdict.allowed
    assert verdict.rule_ids == ("test.obligation",)
    assert audit.events[-1]["result"] == "ALLOW_WITH_OBLIGATIONS"


def test_an_approval_is_digest_bound_verified_and_single_use(
    pep: PolicyEnforcementPoint, authority: ApprovalAuthority, sandbox: Sandbox
) -> None:
    action = _action(sandbox, "run_command", CommandLine="pytest -q", Cwd=str(sandbox.workspace))
    other = _action(sandbox, "run_command", CommandLine="make", Cwd=str(sandbox.workspace))
    record = authority.issue(action.digest)
    with pytest.raises(UnfulfilledObligationError):
        pep.enforce(other, [record])  # bound to another digest
    assert pep.enforce(action, [record]).allowed
    with pytest.raises(UnfulfilledObligationError):
        pep.enforce(action, [record])  # used once
    untrusted = ApprovalAuthority(Ed25519PrivateKey.generate(), "mallory@example.com")
    with pytest.raises(UnfulfilledObligationError):
        pep.enforce(action, [untrusted.issue(action.digest)])


# --- the generic adapter (archmage tests/test_generic_adapter.py) ----------------------------


@pytest.fixture
def generic(sandbox: Sandbox) -> tuple[GenericAdapter, RecordingAuditSink]:
    audit = RecordingAuditSink()
    pep = PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=audit)
    return GenericAdapter(pep), audit


def test_a_registered_write_declares_its_file_effect(generic: Any, sandbox: Sandbox) -> None:
    adapter, _ = generic
    assert adapter.intercept_tool_call("write_to_file", _write("src/main.py"), sandbox.context())
    assert adapter.last_action.side_effects == frozenset({"file_write"})


def test_a_registered_command_declares_its_shell_effect(generic: Any, sandbox: Sandbox) -> None:
    adapter, _ = generic
    arguments = {"Cwd": str(sandbox.workspace), "CommandLine": "python -m pytest"}
    with pytest.raises(UnfulfilledObligationError):  # stricter: shell needs an approval
        adapter.intercept_tool_call("run_command", arguments, sandbox.context())
    assert adapter.last_action.side_effects == frozenset({"shell_command"})


def test_an_unregistered_tool_fails_closed_as_a_value_error(generic: Any, sandbox: Sandbox) -> None:
    adapter, audit = generic
    with pytest.raises(ValueError, match="not registered") as raised:
        adapter.intercept_tool_call("unknown_tool", {}, sandbox.context())
    assert isinstance(raised.value, UnregisteredToolError)
    assert audit.events[-1]["allowed"] is False


def test_a_missing_target_fails_closed_naming_the_field(generic: Any, sandbox: Sandbox) -> None:
    adapter, _ = generic
    with pytest.raises(ValueError, match="TargetFile"):
        adapter.intercept_tool_call("write_to_file", {"CodeContent": "x"}, sandbox.context())


def test_a_payload_that_is_not_json_fails_closed(generic: Any, sandbox: Sandbox) -> None:
    adapter, _ = generic
    with pytest.raises(ValueError) as raised:
        adapter.intercept_tool_call("write_to_file", _write("a.bin", b"secret"), sandbox.context())
    assert isinstance(raised.value, NonCanonicalArgumentsError)
    assert isinstance(raised.value, TypeError)


# --- the Antigravity adapter (archmage tests/test_antigravity_adapter.py) ---------------------


@pytest.fixture
def antigravity() -> AntigravityAdapter:
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(), audit_logger=RecordingAuditSink()
    )
    return AntigravityAdapter(pep)


def test_a_write_in_bounds_is_allowed(antigravity: AntigravityAdapter, sandbox: Sandbox) -> None:
    assert antigravity.intercept_tool_call("write_to_file", _write("src/x.py"), sandbox.context())


def test_a_write_out_of_bounds_is_denied(antigravity: AntigravityAdapter, sandbox: Sandbox) -> None:
    with pytest.raises(PolicyDeniedError):
        antigravity.intercept_tool_call("write_to_file", _write("/etc/passwd"), sandbox.context())


def test_a_multi_replace_is_judged_on_its_target(
    antigravity: AntigravityAdapter, sandbox: Sandbox
) -> None:
    chunks = [
        {
            "TargetContent": "1",
            "ReplacementContent": "2",
            "StartLine": 1,
            "EndLine": 1,
            "AllowMultiple": False,
        }
    ]
    arguments = {"TargetFile": "src/app.py", "ReplacementChunks": chunks}
    assert antigravity.intercept_tool_call(
        "multi_replace_file_content", arguments, sandbox.context()
    )
    with pytest.raises(PolicyDeniedError):
        antigravity.intercept_tool_call(
            "multi_replace_file_content",
            {**arguments, "TargetFile": "../x.py"},
            sandbox.context(),
        )


def test_a_missing_context_is_rejected_before_evaluation(
    antigravity: AntigravityAdapter, sandbox: Sandbox
) -> None:
    context = sandbox.context()
    del context["git_sha"]
    with pytest.raises(InvalidContextError):
        antigravity.intercept_tool_call("write_to_file", _write("src/x.py"), context)


def test_an_oversized_payload_is_rejected_before_evaluation(
    antigravity: AntigravityAdapter, sandbox: Sandbox
) -> None:
    with pytest.raises(ArgumentsTooLargeError):
        antigravity.intercept_tool_call(
            "write_to_file", _write("src/x.py", "x" * (2 << 20)), sandbox.context()
        )


def test_a_registered_tool_requires_its_path_field(
    antigravity: AntigravityAdapter, sandbox: Sandbox
) -> None:
    with pytest.raises(InvalidToolArgumentsError, match="AbsolutePath"):
        antigravity.intercept_tool_call("view_file", {}, sandbox.context())


# --- digests (archmage tests/test_domain.py) --------------------------------------------------


def test_the_digest_is_stable_and_ignores_key_order(sandbox: Sandbox) -> None:
    first = Action.build(
        generic_registry(),
        "write_to_file",
        {"TargetFile": "a", "CodeContent": "b"},
        sandbox.context(),
    )
    again = Action.build(
        generic_registry(),
        "write_to_file",
        {"CodeContent": "b", "TargetFile": "a"},
        sandbox.context(),
    )
    assert first.digest == again.digest and first.digest.startswith("sha256:")


@pytest.mark.parametrize("value", [b"x", {1, 2}, (1, 2), float("nan"), object()])
def test_the_digest_refuses_values_without_one_json_spelling(sandbox: Sandbox, value: Any) -> None:
    with pytest.raises(NonCanonicalArgumentsError):
        Action.build(generic_registry(), "write_to_file", _write("a", value), sandbox.context())


# --- the PDP (archmage tests/test_integration.py) ---------------------------------------------


def test_deny_wins_over_every_other_opinion(sandbox: Sandbox) -> None:
    pep = _pep(
        FunctionRule("a.allow", lambda a: Verdict.allow("fine")),
        FunctionRule(
            "b.obligation",
            lambda a: Verdict.allow_with_obligations(("explicit_approval",), "approve"),
        ),
        FunctionRule("c.deny", lambda a: Verdict.deny("no", rule_ids=("c.deny",))),
    )
    assert pep.evaluate(_action(sandbox)).kind is VerdictKind.DENY


def test_a_crashing_rule_fails_closed(sandbox: Sandbox) -> None:
    def crash(action: Action) -> Verdict:
        raise RuntimeError("boom")

    verdict = _pep(FunctionRule("crash", crash)).evaluate(_action(sandbox))
    assert verdict.kind is VerdictKind.DENY and "jevqueue.pdp.fail_closed" in verdict.rule_ids


# --- adversarial paths (archmage tests/test_adversarial.py) -----------------------------------


@pytest.mark.parametrize(
    "target",
    ["../../etc/passwd", "src/../../outside/x", "../ws-evil/x"],
    ids=["traversal", "traversal-after-dir", "prefix-collision"],
)
def test_escapes_are_denied(antigravity: AntigravityAdapter, sandbox: Sandbox, target: str) -> None:
    with pytest.raises(PolicyDeniedError):
        antigravity.intercept_tool_call("write_to_file", _write(target), sandbox.context())


def test_a_symlink_escape_is_denied(antigravity: AntigravityAdapter, sandbox: Sandbox) -> None:
    (sandbox.workspace / "out").symlink_to(sandbox.outside)
    with pytest.raises(PolicyDeniedError):
        antigravity.intercept_tool_call("write_to_file", _write("out/x.py"), sandbox.context())
    assert sorted(p.name for p in Path(sandbox.outside).iterdir()) == ["sentinel.txt"]
