"""What a paused run resumes with: the reviewers' decision, read back from the approval inbox.

A framework that pauses a run for an approval (LangGraph's ``interrupt()``, LlamaIndex's
``ApprovalRequiredEvent``, Pydantic AI's deferred tool calls) resumes it later, perhaps
in another process, with the answer to the request the guard filed
(``InboxApprover(pause=True)``). :func:`inbox_answer` reads that answer for one action
digest, from the newest request filed for it:

* **approved** — the reviewers' signed records (the PEP still verifies each one: they are
  not trusted because they came from the inbox);
* **denied**, or **withdrawn** — an :class:`~jevqueue.errors.ApprovalDeclinedError` whose
  message carries the reviewer's reason;
* **expired**, nobody decided — an :class:`~jevqueue.errors.ApprovalExpiredError` (a
  kind of declined error that the guard reports and audits as expired);

each *returned*, not raised, since each is what the run resumes with. A request still
pending, or a digest the inbox never held, raises: resuming before anybody decided is a
mistake to see, not a decline.

:func:`settled` is the one reading of a request that is no longer pending; the waiting
:class:`~jevqueue.approvals.InboxApprover` answers with it too.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from jevqueue.approvals._inbox import ApprovalInbox, open_inbox
from jevqueue.approvals._inbox_request import InboxRequest, InboxState
from jevqueue.approvals._record import DIGEST_PATTERN, format_timestamp
from jevqueue.errors import (
    ApprovalDeclinedError,
    ApprovalExpiredError,
    ApprovalPendingError,
    UnknownRequestError,
)

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.approvals._record import ApprovalRecord
    from jevqueue.policy._verdict import Verdict

__all__ = ["SEARCHED_REQUESTS", "filed_request", "inbox_answer", "settled"]

SEARCHED_REQUESTS = 500
"""How many of the newest requests a look-up by action digest reads."""

_ANY_CALL: Any = object()


def inbox_answer(
    inbox: ApprovalInbox | str | os.PathLike[str] | None, action_digest: str
) -> tuple[ApprovalRecord, ...] | ApprovalDeclinedError:
    """The answer to resume a paused run with, from the newest request for ``action_digest``.

    Args:
        inbox: The inbox the request was filed in (an :class:`ApprovalInbox`, a SQLite
            path, a ``postgresql://`` URL, or ``None`` for the default inbox).
        action_digest: The paused call's ``action_digest`` (``sha256:<64 hex>``), as its
            pause shows it.

    Returns:
        The reviewers' signed records when the request was approved; an
        :class:`~jevqueue.errors.ApprovalDeclinedError` with the reviewer's reason when
        it was denied or withdrawn; an :class:`~jevqueue.errors.ApprovalExpiredError`
        when it expired with nobody deciding.

    Raises:
        UnknownRequestError: ``action_digest`` is not a digest, or no request among the
            inbox's newest :data:`SEARCHED_REQUESTS` was filed for it.
        ApprovalPendingError: the request is still pending: nobody decided it yet.
        InboxError: the inbox cannot be read.
    """
    digest = _digest(action_digest)
    store = open_inbox(inbox)
    try:
        current = filed_request(store, digest)
    finally:
        if store is not inbox:
            store.close()
    if current is None:
        raise UnknownRequestError(
            f"the approval inbox {store.where} holds no request for action {digest} among "
            f"its newest {SEARCHED_REQUESTS}: resume with the digest the paused run shows, "
            "from the inbox it filed its request in (`jevqueue approvals list --all` lists "
            "them)"
        )
    if current.state is InboxState.PENDING:
        short = current.request_id[:12]
        raise ApprovalPendingError(
            f"approval request {current.request_id} for action {digest} is still pending: "
            f"nobody has decided it (it expires at {format_timestamp(current.expires_at)}). "
            "Resume the run once a reviewer decided it: `jevqueue approvals approve "
            f"{short} --key KEY` or `jevqueue approvals deny {short} --reason ...`",
            request_id=current.request_id,
        )
    try:
        return settled(current)
    except ApprovalDeclinedError as refusal:
        return refusal


def filed_request(
    inbox: ApprovalInbox,
    action_digest: str,
    *,
    call_id: str | None = _ANY_CALL,
    states: Iterable[InboxState] | None = None,
) -> InboxRequest | None:
    """The newest request filed for ``action_digest`` (and, when given, for ``call_id``)
    whose state is in ``states`` (``None``: any), among the newest
    :data:`SEARCHED_REQUESTS`; ``None`` when there is none.

    A damaged request among those read is skipped (and logged once, see
    :meth:`ApprovalInbox.requests`): it is never read as a decision, and it does not stop
    the look-up of the others.

    Raises:
        InboxError: the inbox cannot be read.
    """
    wanted = None if states is None else tuple(states)
    for request in inbox.requests(wanted, limit=SEARCHED_REQUESTS):
        if request.action_digest != action_digest:
            continue
        if call_id is _ANY_CALL or request.requester.call_id == call_id:
            return request
    return None


def settled(current: InboxRequest, verdict: Verdict | None = None) -> tuple[ApprovalRecord, ...]:
    """The records of an approved request; the typed refusal of any other outcome.

    Args:
        current: A request that is no longer pending.
        verdict: The pending verdict the refusal carries, when known.

    Raises:
        ApprovalDeclinedError: it was denied (with the reviewer's reason) or withdrawn.
        ApprovalExpiredError: nobody decided before it expired (or it is still pending).
    """
    where = f"approval request {current.request_id}"
    if current.state is InboxState.APPROVED:
        return current.records
    if current.state is InboxState.DENIED:
        denial = current.denial
        who, why = (denial.reviewer, denial.reason) if denial else ("a reviewer", "")
        raise ApprovalDeclinedError(f"{who} denied it ({where}): {why}", verdict)
    if current.state is InboxState.CANCELLED:
        raise ApprovalDeclinedError(f"{where} was withdrawn before anybody approved it", verdict)
    raise ApprovalExpiredError(
        f"nobody decided within {_duration(current.expires_at - current.created_at)} "
        f"({where} expired); the call was not approved: ask again, or have a reviewer "
        "watch `jevqueue approvals watch`",
        verdict,
    )


def _digest(value: Any) -> str:
    if type(value) is not str or not DIGEST_PATTERN.fullmatch(value):
        raise UnknownRequestError(
            f"{value!r} is not an action digest (sha256:<64 hex>): give the action_digest "
            "of the paused call, as its pause shows it"
        )
    return value


def _duration(span: timedelta) -> str:
    seconds = span.total_seconds()
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)} min"
    return f"{seconds:g} s"
