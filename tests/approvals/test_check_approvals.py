"""check_approvals: digest-bound, fresh, verified, single use — and nothing else counts."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue.approvals import (
    CLOCK_SKEW,
    DEFAULT_FRESHNESS,
    ApprovalAuthority,
    ApprovalRecord,
    MemoryConsumedApprovals,
    SignedApprovalVerifier,
    check_approvals,
)
from jevqueue.errors import ConfigurationError
from jevqueue.policy import Action, ApprovalQuorum, Verdict, VerdictKind


@pytest.fixture
def check(
    verdict: Verdict,
    action: Action,
    verifier: SignedApprovalVerifier,
    consumed: MemoryConsumedApprovals,
    now: datetime,
) -> Callable[..., Verdict]:
    def run(*records: object, **overrides: object) -> Verdict:
        options: dict[str, object] = {"verifier": verifier, "consumed": consumed, "now": now}
        options.update(overrides)
        return check_approvals(verdict, action, records, **options)  # type: ignore[arg-type]

    return run


def fulfilled(result: Verdict) -> bool:
    return result.kind is VerdictKind.ALLOW_WITH_OBLIGATIONS and result.allowed


def test_a_matching_fresh_signed_record_fulfils_the_obligation(
    check: Callable[..., Verdict], authority: ApprovalAuthority, action: Action, now: datetime
) -> None:
    record = authority.issue(action.digest, now=now)
    result = check(record)
    assert fulfilled(result)
    assert result.obligations == ()
    assert result.action_digest == action.digest
    assert any(record.approval_id in reason for reason in result.reasons)


def test_a_verdict_without_the_obligation_is_returned_unchanged(
    action: Action, verifier: SignedApprovalVerifier, consumed: MemoryConsumedApprovals
) -> None:
    for verdict in (Verdict.allow("fine"), Verdict.deny("no")):
        assert check_approvals(verdict, action, (), verifier=verifier, consumed=consumed) is verdict
    other = Verdict.allow_with_obligations(["notify_owner"], "tell them")
    assert check_approvals(other, action, (), verifier=verifier, consumed=consumed) is other


def test_other_obligations_stay_when_approval_is_fulfilled(
    action: Action,
    authority: ApprovalAuthority,
    verifier: SignedApprovalVerifier,
    consumed: MemoryConsumedApprovals,
    now: datetime,
) -> None:
    verdict = dataclasses.replace(
        Verdict.allow_with_obligations(["explicit_approval", "notify_owner"], "both"),
        action_digest=action.digest,
    )
    result = check_approvals(
        verdict,
        action,
        [authority.issue(action.digest, now=now)],
        verifier=verifier,
        consumed=consumed,
        now=now,
    )
    assert result.obligations == ("notify_owner",)
    assert not result.allowed


def test_no_records_leaves_it_unfulfilled_and_says_what_to_do(
    check: Callable[..., Verdict], action: Action
) -> None:
    result = check()
    assert not result.allowed
    assert result.obligations == ("explicit_approval",)
    assert any(action.digest in reason for reason in result.reasons)


@pytest.mark.parametrize(
    "raw",
    ["explicit_approval", "approved", {"approval_id": "apr-1"}, None, 1, b"explicit_approval"],
    ids=["obligation-name", "word", "dict", "none", "int", "bytes"],
)
def test_anything_but_an_approval_record_never_counts(
    check: Callable[..., Verdict], raw: object
) -> None:
    result = check(raw)
    assert not result.allowed
    assert any("not an ApprovalRecord" in reason for reason in result.reasons)


def test_refusals_never_echo_what_was_passed(check: Callable[..., Verdict]) -> None:
    secret = "sk-live-THIS-IS-A-SECRET-TOKEN"
    result = check(secret, {"token": secret})
    assert not result.allowed
    assert all(secret not in reason for reason in result.reasons)


def test_a_record_for_another_action_is_refused(
    check: Callable[..., Verdict],
    authority: ApprovalAuthority,
    make_action: Callable[[str], Action],
    now: datetime,
) -> None:
    other = make_action("rm -rf build")
    result = check(authority.issue(other.digest, now=now))
    assert not result.allowed
    assert any("another action" in reason for reason in result.reasons)


def test_an_expired_record_is_refused(
    check: Callable[..., Verdict], authority: ApprovalAuthority, action: Action, now: datetime
) -> None:
    record = authority.issue(
        action.digest, now=now - timedelta(minutes=2), ttl=timedelta(minutes=1)
    )
    result = check(record)
    assert not result.allowed
    assert any("expired" in reason for reason in result.reasons)


def test_a_stale_record_is_refused_even_without_expiry(
    check: Callable[..., Verdict], action: Action, now: datetime
) -> None:
    key = Ed25519PrivateKey.generate()
    authority = ApprovalAuthority(key, "alice@example.com", ttl=None)
    verifier = SignedApprovalVerifier({"alice@example.com": key.public_key()})
    old = authority.issue(action.digest, now=now - DEFAULT_FRESHNESS - timedelta(seconds=1))
    result = check(old, verifier=verifier)
    assert not result.allowed
    assert any("stale" in reason for reason in result.reasons)
    edge = authority.issue(action.digest, now=now - DEFAULT_FRESHNESS)
    assert check(edge, verifier=verifier).allowed


def test_future_dated_records_beyond_the_skew_are_refused(
    check: Callable[..., Verdict], authority: ApprovalAuthority, action: Action, now: datetime
) -> None:
    ahead = authority.issue(action.digest, now=now + CLOCK_SKEW + timedelta(seconds=1))
    result = check(ahead)
    assert not result.allowed
    assert any("future" in reason for reason in result.reasons)


def test_clock_skew_within_tolerance_is_accepted(
    check: Callable[..., Verdict], authority: ApprovalAuthority, action: Action, now: datetime
) -> None:
    slightly_ahead = authority.issue(action.digest, now=now + CLOCK_SKEW - timedelta(seconds=1))
    assert check(slightly_ahead).allowed


def test_windows_are_configurable(
    check: Callable[..., Verdict], authority: ApprovalAuthority, action: Action, now: datetime
) -> None:
    record = authority.issue(action.digest, now=now - timedelta(minutes=2))
    result = check(record, freshness=timedelta(minutes=1))
    assert not result.allowed
    assert any("1 min" in reason for reason in result.reasons)


def test_a_replayed_record_is_refused(
    check: Callable[..., Verdict], authority: ApprovalAuthority, action: Action, now: datetime
) -> None:
    record = authority.issue(action.digest, now=now)
    assert check(record).allowed
    again = check(record)
    assert not again.allowed
    assert any("already used" in reason for reason in again.reasons)


def test_the_same_record_twice_in_one_call_is_used_once(
    check: Callable[..., Verdict],
    authority: ApprovalAuthority,
    action: Action,
    consumed: MemoryConsumedApprovals,
    now: datetime,
) -> None:
    record = authority.issue(action.digest, now=now)
    assert check(record, record).allowed
    assert record.approval_id in consumed
    assert not check(record).allowed


def test_a_refused_record_is_not_burnt(
    check: Callable[..., Verdict],
    authority: ApprovalAuthority,
    action: Action,
    consumed: MemoryConsumedApprovals,
    now: datetime,
) -> None:
    record = authority.issue(action.digest, now=now)
    assert not check(record, verifier=None).allowed
    assert record.approval_id not in consumed
    assert check(record).allowed


def test_without_a_verifier_nothing_is_fulfilled(
    check: Callable[..., Verdict], authority: ApprovalAuthority, action: Action, now: datetime
) -> None:
    result = check(authority.issue(action.digest, now=now), verifier=None)
    assert not result.allowed
    assert any("no approval verifier" in reason for reason in result.reasons)


def test_without_a_consumed_store_nothing_is_fulfilled(
    check: Callable[..., Verdict], authority: ApprovalAuthority, action: Action, now: datetime
) -> None:
    result = check(authority.issue(action.digest, now=now), consumed=None)
    assert not result.allowed
    assert any("consumed-approval store" in reason for reason in result.reasons)


def test_an_unsigned_record_is_refused_by_the_signed_verifier(
    check: Callable[..., Verdict], action: Action, now: datetime
) -> None:
    unsigned = ApprovalRecord("apr-1", action.digest, "alice@example.com", now)
    result = check(unsigned)
    assert not result.allowed
    assert any("not accepted" in reason for reason in result.reasons)


def test_a_forged_signature_is_refused(
    check: Callable[..., Verdict], action: Action, now: datetime
) -> None:
    impostor = ApprovalAuthority(Ed25519PrivateKey.generate(), "alice@example.com")
    result = check(impostor.issue(action.digest, now=now))
    assert not result.allowed
    garbage = dataclasses.replace(
        impostor.issue(action.digest, now=now), signature=base64.b64encode(b"x" * 64).decode()
    )
    assert not check(garbage).allowed


def test_an_untrusted_approver_is_refused_even_with_a_valid_signature(
    check: Callable[..., Verdict], action: Action, now: datetime
) -> None:
    mallory = ApprovalAuthority(Ed25519PrivateKey.generate(), "mallory")
    result = check(mallory.issue(action.digest, now=now))
    assert not result.allowed


@pytest.mark.parametrize(
    "change",
    [
        {"approval_id": "apr-fresh-id"},
        {"approver_id": "bob"},
        {"issued_at": "2026-01-31T12:00:05Z"},
        {"expires_at": "2026-01-31T13:00:00Z"},
        {"expires_at": None},
    ],
    ids=lambda change: next(iter(change)),
)
def test_every_signed_field_is_tamper_evident(
    check: Callable[..., Verdict],
    authority: ApprovalAuthority,
    action: Action,
    now: datetime,
    change: dict[str, object],
) -> None:
    genuine = authority.issue(action.digest, now=now)
    assert authority.approver_id == "alice@example.com"
    tampered = dataclasses.replace(genuine, **change)  # type: ignore[arg-type]
    assert not check(tampered).allowed
    assert check(genuine).allowed


def test_a_digest_swapped_onto_another_action_is_refused(
    check: Callable[..., Verdict],
    authority: ApprovalAuthority,
    make_action: Callable[[str], Action],
    action: Action,
    now: datetime,
) -> None:
    genuine = authority.issue(make_action("echo hi").digest, now=now)
    swapped = dataclasses.replace(genuine, action_digest=action.digest)
    result = check(swapped)
    assert not result.allowed
    assert any("not accepted" in reason for reason in result.reasons)


class _Raising:
    def __call__(self, record: ApprovalRecord, action: Action) -> bool:
        raise RuntimeError("verifier backend down")


class _Truthy:
    def __call__(self, record: ApprovalRecord, action: Action) -> bool:
        return "yes"  # type: ignore[return-value]


def test_a_verifier_that_raises_or_answers_vaguely_refuses(
    check: Callable[..., Verdict], action: Action, now: datetime
) -> None:
    record = ApprovalRecord("apr-1", action.digest, "alice@example.com", now)
    result = check(record, verifier=_Raising())
    assert not result.allowed
    assert any("verifier failed (RuntimeError)" in reason for reason in result.reasons)
    assert all("backend down" not in reason for reason in result.reasons)
    assert not check(record, verifier=_Truthy()).allowed


class _BrokenStore:
    def consume(self, approval_id: str, action_digest: str) -> bool:
        raise OSError("disk full")


def test_a_failing_consumed_store_refuses(
    check: Callable[..., Verdict], authority: ApprovalAuthority, action: Action, now: datetime
) -> None:
    result = check(authority.issue(action.digest, now=now), consumed=_BrokenStore())
    assert not result.allowed
    assert any("store failed" in reason for reason in result.reasons)


def test_one_good_record_among_bad_ones_fulfils(
    check: Callable[..., Verdict], authority: ApprovalAuthority, action: Action, now: datetime
) -> None:
    good = authority.issue(action.digest, now=now)
    result = check("explicit_approval", good)
    assert result.allowed
    assert any("#0" in reason for reason in result.reasons)


def test_a_verdict_for_another_action_is_never_fulfilled(
    authority: ApprovalAuthority,
    verifier: SignedApprovalVerifier,
    consumed: MemoryConsumedApprovals,
    make_action: Callable[[str], Action],
    verdict: Verdict,
    now: datetime,
) -> None:
    other = make_action("curl evil")
    result = check_approvals(
        verdict,
        other,
        [authority.issue(other.digest, now=now)],
        verifier=verifier,
        consumed=consumed,
        now=now,
    )
    assert not result.allowed


def test_a_naive_now_is_a_configuration_error(check: Callable[..., Verdict], now: datetime) -> None:
    with pytest.raises(ConfigurationError, match="timezone-aware"):
        check(now=now.replace(tzinfo=None))


def test_a_bare_string_is_judged_whole_not_per_character(
    verdict: Verdict,
    action: Action,
    verifier: SignedApprovalVerifier,
    consumed: MemoryConsumedApprovals,
) -> None:
    result = check_approvals(
        verdict, action, "explicit_approval", verifier=verifier, consumed=consumed
    )
    assert not result.allowed
    assert sum("not an ApprovalRecord" in reason for reason in result.reasons) == 1


def test_a_subclass_cannot_stand_in_for_a_record(
    check: Callable[..., Verdict], authority: ApprovalAuthority, action: Action, now: datetime
) -> None:
    genuine = authority.issue(action.digest, now=now)

    class Lenient(ApprovalRecord):
        pass

    impostor = Lenient(**genuine.to_dict())
    result = check(impostor)
    assert not result.allowed
    assert any("not an ApprovalRecord" in reason for reason in result.reasons)


# --- quorums: M distinct approvers of a group -------------------------------------------

_NAMES = ("alice", "bob", "carol", "dave")


def _quorum_setup(
    action: Action, quorum: ApprovalQuorum
) -> tuple[Verdict, dict[str, ApprovalAuthority], SignedApprovalVerifier]:
    people = {name: ApprovalAuthority(Ed25519PrivateKey.generate(), name) for name in _NAMES}
    verifier = SignedApprovalVerifier({name: each.public_key for name, each in people.items()})
    verdict = Verdict.allow_with_obligations(
        ["explicit_approval"], "two of ops", quorum=quorum
    ).bound(action.digest, "")
    return verdict, people, verifier


OPS = ApprovalQuorum.of_group("ops", ["alice", "bob", "carol"], 2)


def test_a_quorum_counts_distinct_members_and_consumes_only_when_met(
    action: Action, now: datetime
) -> None:
    verdict, people, verifier = _quorum_setup(action, OPS)
    consumed = MemoryConsumedApprovals()
    alice = people["alice"].issue(action.digest, now=now)
    options = {"verifier": verifier, "consumed": consumed, "now": now}
    once = check_approvals(verdict, action, [alice], **options)  # type: ignore[arg-type]
    assert not once.allowed
    assert once.reasons[-1] == (
        "explicit approval unmet: 2 approvals from ops (alice, bob, carol) needed; have alice"
    )
    twice = check_approvals(  # type: ignore[arg-type]
        verdict, action, [alice, people["alice"].issue(action.digest, now=now)], **options
    )
    assert not twice.allowed  # one member twice is one member
    bob = people["bob"].issue(action.digest, now=now)
    done = check_approvals(verdict, action, [alice, bob], **options)  # type: ignore[arg-type]
    assert done.allowed and done.quorums == (OPS,)
    assert consumed.consume(alice.approval_id, action.digest) is False  # both were used
    assert consumed.consume(bob.approval_id, action.digest) is False


def test_a_consumed_store_failing_midway_refuses_the_quorum(action: Action, now: datetime) -> None:
    verdict, people, verifier = _quorum_setup(action, OPS)
    records = [people[name].issue(action.digest, now=now) for name in ("alice", "bob")]
    result = check_approvals(
        verdict, action, records, verifier=verifier, consumed=_BrokenStore(), now=now
    )
    assert not result.allowed and "explicit_approval" in result.obligations
    assert any("store failed (OSError)" in reason for reason in result.reasons)


def test_an_already_used_member_record_does_not_count(action: Action, now: datetime) -> None:
    verdict, people, verifier = _quorum_setup(action, OPS)
    consumed = MemoryConsumedApprovals()
    alice, bob, carol = (
        people[name].issue(action.digest, now=now) for name in ("alice", "bob", "carol")
    )
    consumed.consume(alice.approval_id, action.digest)
    options = {"verifier": verifier, "consumed": consumed, "now": now}
    result = check_approvals(verdict, action, [alice, bob], **options)  # type: ignore[arg-type]
    assert not result.allowed and any("already used" in r for r in result.reasons)
    assert "needed; have bob" in result.reasons[-1]
    three = check_approvals(  # type: ignore[arg-type]
        verdict, action, [alice, people["bob"].issue(action.digest, now=now), carol], **options
    )
    assert three.allowed  # alice's used record is skipped; bob and carol make two


def test_an_attempt_that_cannot_succeed_burns_none_of_its_fresh_records(
    action: Action, now: datetime
) -> None:
    verdict, people, verifier = _quorum_setup(action, OPS)
    consumed = MemoryConsumedApprovals()
    alice, bob = (people[name].issue(action.digest, now=now) for name in ("alice", "bob"))
    consumed.consume(bob.approval_id, action.digest)  # bob's record was used already
    options = {"verifier": verifier, "consumed": consumed, "now": now}
    failed = check_approvals(verdict, action, [alice, bob], **options)  # type: ignore[arg-type]
    assert not failed.allowed and "needed; have alice" in failed.reasons[-1]
    assert alice.approval_id not in consumed  # still usable once a second approval comes
    carol = people["carol"].issue(action.digest, now=now)
    assert check_approvals(verdict, action, [alice, carol], **options).allowed  # type: ignore[arg-type]


def test_a_record_from_the_requester_is_refused(action: Action, now: datetime) -> None:
    actor = action.context.actor_id
    itself = ApprovalAuthority(Ed25519PrivateKey.generate(), actor)
    verdict = Verdict.allow_with_obligations(["explicit_approval"], "x").bound(action.digest, "")
    result = check_approvals(
        verdict,
        action,
        [itself.issue(action.digest, now=now)],
        verifier=SignedApprovalVerifier({actor: itself.public_key}),
        consumed=MemoryConsumedApprovals(),
        now=now,
    )
    assert not result.allowed
    assert any("a requester never approves its own call" in r for r in result.reasons)
