"""Fulfilling an ``explicit_approval`` obligation with approval records."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from jevqueue.approvals._record import ApprovalRecord
from jevqueue.errors import ConfigurationError
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
    """Fulfil the verdict's ``explicit_approval`` obligation with one of ``records``.

    A record fulfils it only if, in this order:

    1. it is an :class:`ApprovalRecord` — a string (such as ``"explicit_approval"``), a
       dict or anything else never counts;
    2. its ``action_digest`` equals ``action.digest`` exactly;
    3. it is fresh: ``issued_at - clock_skew <= now <= issued_at + freshness``, and
       ``now < expires_at`` when the record sets ``expires_at``;
    4. ``verifier(record, action)`` returns exactly ``True`` (no verifier: never);
    5. ``consumed.consume(...)`` accepts its ``approval_id`` — called only once steps 1-4
       passed, so a refused record is not burnt, and a used one is refused for good (the
       store decides whether "for good" outlives the process; the SQLite one does).

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
        when a record fulfilled it, the verdict with ``explicit_approval`` moved out of
        ``obligations`` and a reason naming the approval; otherwise the verdict with one
        added reason per refused record. Reasons never echo a record's contents beyond
        its validated identifiers.
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
    refusals: list[str] = []
    if not records:
        refusals.append(
            "explicit approval required: no approval record supplied; obtain one for "
            f"{action.digest} and retry"
        )
    for index, record in enumerate(records):
        problem = _refusal(
            record, action, verifier=verifier, now=moment, freshness=freshness, skew=clock_skew
        )
        label = _label(index, record)
        if problem is not None:
            refusals.append(f"{label} refused: {problem}")
            continue
        assert type(record) is ApprovalRecord
        if consumed is None:
            refusals.append(
                f"{label} refused: no consumed-approval store is configured, so single use "
                "cannot be guaranteed; give the PEP consumed_approvals"
            )
            continue
        try:
            first_use = consumed.consume(record.approval_id, record.action_digest)
        except Exception as error:  # fail closed: an unrecordable use is no use
            refusals.append(
                f"{label} refused: the consumed-approval store failed ({type(error).__name__})"
            )
            continue
        if first_use is not True:
            refusals.append(f"{label} refused: already used (approvals are single use)")
            continue
        remaining = tuple(name for name in verdict.obligations if name != EXPLICIT_APPROVAL)
        fulfilled = (
            f"explicit approval fulfilled by approval {record.approval_id} "
            f"from {record.approver_id}"
        )
        return dataclasses.replace(
            verdict, obligations=remaining, reasons=(*verdict.reasons, *refusals, fulfilled)
        )
    return dataclasses.replace(verdict, reasons=(*verdict.reasons, *refusals))


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
