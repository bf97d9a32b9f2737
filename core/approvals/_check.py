"""Fulfilling an ``explicit_approval`` obligation with approval records."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from jevqueue.approvals._record import ApprovalRecord
from jevqueue.errors import ConfigurationError
from jevqueue.policy._approval_quorum import (
    ApprovalQuorum,
    describe_quorums,
    effective_quorums,
    no_record_reason,
)
from jevqueue.policy._verdict import VerdictKind

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.approvals._consumed import ConsumedApprovalStore
    from jevqueue.approvals._verifier import ApprovalVerifier
    from jevqueue.policy._action import Action
    from jevqueue.policy._verdict import Verdict

__all__ = ["CLOCK_SKEW", "DEFAULT_FRESHNESS", "EXPLICIT_APPROVAL", "check_approvals"]

EXPLICIT_APPROVAL = "explicit_approval"
"""The obligation an approval record fulfils."""

DEFAULT_FRESHNESS = timedelta(seconds=300)
"""How long after ``issued_at`` an approval may still be used."""

CLOCK_SKEW = timedelta(seconds=30)
"""How far ``issued_at`` may lie in the future (the approver's clock runs ahead)."""


def check_approvals(
    verdict: Verdict,
    action: Action,
    records: Sequence[Any],
    *,
    verifier: ApprovalVerifier | None,
    consumed: ConsumedApprovalStore | None,
    now: datetime | None = None,
    freshness: timedelta = DEFAULT_FRESHNESS,
    clock_skew: timedelta = CLOCK_SKEW,
) -> Verdict:
    """Fulfil the verdict's ``explicit_approval`` obligation with ``records``.

    The obligation is fulfilled when every quorum of the verdict
    (:attr:`~jevqueue.policy.Verdict.quorums`; none named: one approval from anyone the
    verifier trusts) is met by distinct approvers, each with a record that is valid on
    its own. A record is valid only if, in this order:

    1. it is an :class:`ApprovalRecord` — a string (such as ``"explicit_approval"``), a
       dict or anything else never counts;
    2. its ``action_digest`` equals ``action.digest`` exactly;
    3. it is fresh: ``issued_at - clock_skew <= now <= issued_at + freshness``, and
       ``now < expires_at`` when the record sets ``expires_at``;
    4. its ``approver_id`` is not the action context's ``actor_id``: a requester never
       approves its own call;
    5. ``verifier(record, action)`` returns exactly ``True`` (no verifier: never).

    A valid record counts when its approver belongs to a quorum that still needs
    approvals (a record from outside every named group, or a second one from an approver
    already counted, does not). Records the store already holds as used (``record_id in
    consumed``, for the stores that can tell) are set aside first; only once the rest can
    meet every quorum is each counted record consumed (``consumed.consume(...)``; a
    refused record is never burnt). Should a record turn out used at that moment (another
    process used it in between) or the store fail, the approval is refused and the
    records consumed before it in this attempt stay consumed: an approval is spent
    rather than ever counted twice (fail closed). The store decides whether "used"
    outlives the process; the SQLite one does.

    Args:
        verdict: the PDP's verdict for ``action``.
        action: the action being judged.
        records: the approval records the caller supplied.
        verifier: the PEP's approval verifier.
        consumed: the PEP's consumed-approval store (``None``: nothing is fulfilled).
        now: the current time (aware); defaults to the system clock in UTC.
        freshness: how long after ``issued_at`` a record may be used.
        clock_skew: how far in the future ``issued_at`` may lie.

    Returns:
        The verdict unchanged when it carries no ``explicit_approval`` obligation. Else,
        when the records fulfilled it, the verdict with ``explicit_approval`` moved out of
        ``obligations`` and a reason naming the approvals; otherwise the verdict with one
        added reason per refused record and one per unmet quorum, saying what is missing.
        Reasons never echo a record's contents beyond its validated identifiers.
    """
    if verdict.kind is not VerdictKind.ALLOW_WITH_OBLIGATIONS:
        return verdict
    if EXPLICIT_APPROVAL not in verdict.obligations:
        return verdict
    moment = datetime.now(timezone.utc) if now is None else now
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ConfigurationError("check_approvals(now=...) must be a timezone-aware datetime")
    if verdict.action_digest and verdict.action_digest != action.digest:
        # The verdict was made for another action: nothing about it can be fulfilled here.
        return dataclasses.replace(
            verdict,
            reasons=(*verdict.reasons, "explicit approval refused: verdict and action differ"),
        )
    if isinstance(records, str | bytes | Mapping) or records is None:
        # A bare string is a sequence of characters, not of records: judge it whole.
        records = () if records is None else (records,)
    quorums = effective_quorums(verdict.quorums)
    if not records:
        return dataclasses.replace(
            verdict, reasons=(*verdict.reasons, no_record_reason(verdict.quorums, action.digest))
        )
    refusals: list[str] = []
    valid: list[tuple[str, ApprovalRecord]] = []
    for index, record in enumerate(records):
        label = _label(index, record)
        problem = _refusal(
            record,
            action,
            verifier=verifier,
            now=moment,
            freshness=freshness,
            skew=clock_skew,
        )
        if problem is not None:
            refusals.append(f"{label} refused: {problem}")
            continue
        assert type(record) is ApprovalRecord
        if not any(quorum.admits(record.approver_id) for quorum in quorums):
            refusals.append(
                f"{label} does not count: {record.approver_id} is not among the approvers "
                f"the policy names ({_groups(quorums)})"
            )
            continue
        valid.append((label, record))
    if not _reachable(quorums, {record.approver_id for _, record in valid}):
        # Nothing is consumed: the valid records stay usable once the rest are obtained.
        missing = _missing(quorums, [record for _, record in valid])
        return dataclasses.replace(verdict, reasons=(*verdict.reasons, *refusals, *missing))
    if consumed is None:
        refusals.append(
            "explicit approval refused: no consumed-approval store is configured, so single "
            "use cannot be guaranteed; give the PEP consumed_approvals"
        )
        return dataclasses.replace(verdict, reasons=(*verdict.reasons, *refusals))
    # Records the store already knows as used are set aside before anything is consumed,
    # so that an attempt that cannot succeed burns none of the fresh ones beside them.
    fresh = []
    for label, record in valid:
        if _known_used(consumed, record.approval_id):
            refusals.append(f"{label} refused: already used (approvals are single use)")
        else:
            fresh.append((label, record))
    valid = fresh
    if not _reachable(quorums, {record.approver_id for _, record in valid}):
        missing = _missing(quorums, [record for _, record in valid])
        return dataclasses.replace(verdict, reasons=(*verdict.reasons, *refusals, *missing))
    needed = [quorum.count for quorum in quorums]
    counted: list[ApprovalRecord] = []
    for label, record in valid:
        approver = record.approver_id
        if any(earlier.approver_id == approver for earlier in counted):
            refusals.append(f"{label} does not count: {approver} is already counted once")
            continue
        useful = [
            place
            for place, quorum in enumerate(quorums)
            if needed[place] > 0 and quorum.admits(approver)
        ]
        if not useful:
            continue  # every quorum it belongs to is met already: not consumed
        try:
            first_use = consumed.consume(record.approval_id, record.action_digest)
        except Exception as error:  # fail closed: an unrecordable use is no use
            refusals.append(
                f"{label} refused: the consumed-approval store failed ({type(error).__name__})"
            )
            return dataclasses.replace(verdict, reasons=(*verdict.reasons, *refusals))
        if first_use is not True:
            refusals.append(f"{label} refused: already used (approvals are single use)")
            continue
        counted.append(record)
        for place in useful:
            needed[place] -= 1
        if not any(needed):
            break
    if any(needed):
        missing = _missing(quorums, counted)
        return dataclasses.replace(verdict, reasons=(*verdict.reasons, *refusals, *missing))
    remaining = tuple(name for name in verdict.obligations if name != EXPLICIT_APPROVAL)
    return dataclasses.replace(
        verdict,
        obligations=remaining,
        reasons=(*verdict.reasons, *refusals, _fulfilled(verdict, counted)),
    )


def _known_used(consumed: ConsumedApprovalStore, approval_id: str) -> bool:
    """Whether a store that can tell (``in``) already holds ``approval_id``; a store that
    cannot, or fails to, answers at ``consume`` instead."""
    if not hasattr(consumed, "__contains__"):
        return False
    try:
        return approval_id in consumed
    except Exception:  # the consume below fails closed on its own
        return False


def _reachable(quorums: tuple[ApprovalQuorum, ...], approvers: set[str]) -> bool:
    return all(
        sum(1 for approver in approvers if quorum.admits(approver)) >= quorum.count
        for quorum in quorums
    )


def _missing(quorums: tuple[ApprovalQuorum, ...], counted: list[ApprovalRecord]) -> list[str]:
    """One reason per unmet quorum: what it needs, and whom it has."""
    reasons = []
    for quorum in quorums:
        have = sorted({r.approver_id for r in counted if quorum.admits(r.approver_id)})
        if len(have) < quorum.count:
            reasons.append(
                f"explicit approval unmet: {quorum.describe()} needed; have "
                f"{', '.join(have) if have else 'none'}"
            )
    return reasons


def _fulfilled(verdict: Verdict, counted: list[ApprovalRecord]) -> str:
    if len(counted) == 1 and not verdict.quorums:
        only = counted[0]
        return f"explicit approval fulfilled by approval {only.approval_id} from {only.approver_id}"
    given = ", ".join(f"{record.approval_id} from {record.approver_id}" for record in counted)
    return f"explicit approval fulfilled by approvals {given} ({describe_quorums(verdict.quorums)})"


def _groups(quorums: tuple[ApprovalQuorum, ...]) -> str:
    return "; ".join(
        f"{quorum.group}: {', '.join(sorted(quorum.approvers))}"
        for quorum in quorums
        if quorum.group is not None and quorum.approvers is not None
    )


def _label(index: int, record: Any) -> str:
    if type(record) is ApprovalRecord:
        return f"approval record #{index} ({record.approval_id})"
    return f"approval record #{index}"


def _refusal(
    record: Any,
    action: Action,
    *,
    verifier: ApprovalVerifier | None,
    now: datetime,
    freshness: timedelta,
    skew: timedelta,
) -> str | None:
    if type(record) is not ApprovalRecord:  # a subclass could override what gets signed
        return (
            f"a {type(record).__name__} is not an ApprovalRecord; only an issued "
            "ApprovalRecord can satisfy explicit approval"
        )
    if record.action_digest != action.digest:
        return f"it approves another action, not {action.digest}"
    if record.issued_at > now + skew:
        return "issued in the future beyond the tolerated clock skew"
    if now > record.issued_at + freshness:
        return f"stale: issued more than {_minutes(freshness)} ago; obtain a fresh approval"
    if record.expires_at is not None and now >= record.expires_at:
        return "expired; obtain a fresh approval"
    if record.approver_id == action.context.actor_id:
        return (
            f"{record.approver_id} is the actor that asks: a requester never approves its "
            "own call; another approver must"
        )
    if verifier is None:
        return "no approval verifier is configured on the PEP, so no approval can be trusted"
    try:
        accepted = verifier(record, action)
    except Exception as error:  # fail closed: a verifier that cannot decide says no
        return f"the approval verifier failed ({type(error).__name__})"
    if accepted is not True:
        return "not accepted by the approval verifier (bad signature or untrusted approver)"
    return None


def _minutes(window: timedelta) -> str:
    seconds = int(window.total_seconds())
    return f"{seconds // 60} min" if seconds % 60 == 0 else f"{seconds} s"
