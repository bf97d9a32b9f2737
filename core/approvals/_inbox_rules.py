"""The rules every approval inbox enforces on a decision, and what each refusal says.

A store checks them while it holds the request locked (SQLite: one ``BEGIN IMMEDIATE``
transaction; PostgreSQL: the ``decide_approval_request`` function, under a row lock), so
two reviewers deciding at once are judged one after the other. The SQLite store runs
:func:`refusal_code` in Python; the PostgreSQL function runs the same rules in SQL and
answers the same codes. Either way :func:`refusal` turns a code into the typed error.

In order:

``unknown``   no request has the id;
``closed``    it is no longer pending — approved, denied, cancelled, or expired (``now``
              at or past ``expires_at``): nothing is decided after that;
``self``      the reviewer is the requester's actor approving its own request;
``outsider``  the reviewer approves but is in no approver group the request's quorums
              name (a denial is anyone's to give);
``twice``     the reviewer already decided it (one decision per reviewer);
``digest``    the approval record names another digest than the request's.

(The PostgreSQL function also answers ``approver`` — a record signed in another name —
and ``malformed``; the Python side refuses both before it asks.)

Then: a denial makes it ``denied``; approvals that meet every quorum stored with the
request (:class:`~jevqueue.policy.ApprovalQuorum`: M distinct reviewers of a group, or of
anyone when it names none) make it ``approved``; otherwise it stays ``pending``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from jevqueue.approvals._inbox_request import InboxDecision, InboxRequest, InboxState
from jevqueue.errors import (
    DecisionRefusedError,
    DigestMismatchError,
    DuplicateDecisionError,
    NotAnApproverError,
    RequestClosedError,
    SelfApprovalError,
    UnknownRequestError,
)
from jevqueue.policy._approval_quorum import ApprovalQuorum, describe_quorums, quorums_met

__all__ = ["next_state", "refusal", "refusal_code"]


def refusal_code(request: InboxRequest, decision: InboxDecision, now: datetime) -> str | None:
    """The code of the first rule ``decision`` breaks on ``request`` at ``now``, or None."""
    if request.state is not InboxState.PENDING or now >= request.expires_at:
        return "closed"
    if decision.approve and decision.reviewer == request.requester.actor_id:
        return "self"
    if decision.approve and not any(quorum.admits(decision.reviewer) for quorum in request.quorums):
        return "outsider"
    if any(earlier.reviewer == decision.reviewer for earlier in request.decisions):
        return "twice"
    if decision.approve and (
        decision.record is None or decision.record.action_digest != request.action_digest
    ):
        return "digest"
    return None


def next_state(quorums: Sequence[ApprovalQuorum], decisions: Sequence[InboxDecision]) -> InboxState:
    """The state ``decisions`` lead to: a denial ends it; approvals by distinct reviewers
    that meet every quorum settle it."""
    if any(not decision.approve for decision in decisions):
        return InboxState.DENIED
    if quorums_met(quorums, (decision.reviewer for decision in decisions)):
        return InboxState.APPROVED
    return InboxState.PENDING


def refusal(
    code: str,
    request_id: str,
    *,
    reviewer: str = "",
    state: str = "",
    digest: str = "",
    quorums: Sequence[ApprovalQuorum] = (),
) -> UnknownRequestError | DecisionRefusedError:
    """The typed error for a refusal ``code``; the message says what to do."""
    if code == "unknown":
        return UnknownRequestError(
            f"no approval request {request_id} in the inbox: list the pending ones with "
            "`jevqueue approvals list` (or --all) and copy the id"
        )
    if code == "closed":
        if state == InboxState.EXPIRED.value:
            why = "it expired before anybody decided"
            then = "the agent's call was refused as expired; it must ask again"
        else:
            why = f"it is already {state or 'decided'}"
            then = "nothing more can be decided on it"
        return RequestClosedError(
            f"approval request {request_id} cannot be decided: {why}; {then}",
            request_id=request_id,
            state=state,
        )
    if code == "self":
        return SelfApprovalError(
            f"{reviewer} filed approval request {request_id} and cannot approve it: a "
            "requester never approves itself; another reviewer must decide",
            request_id=request_id,
        )
    if code == "outsider":
        return NotAnApproverError(
            f"{reviewer} may not approve request {request_id}: it needs "
            f"{describe_quorums(quorums)}, and {reviewer} is in none of those groups; one of "
            "the approvers named must approve (a reviewer outside them may still deny)",
            request_id=request_id,
        )
    if code == "twice":
        return DuplicateDecisionError(
            f"{reviewer} already decided approval request {request_id}: each reviewer "
            "decides once; another reviewer must give any further approval",
            request_id=request_id,
        )
    if code == "digest":
        return DigestMismatchError(
            f"the approval does not name the action of request {request_id} "
            f"({digest or 'its digest'}): sign an approval for exactly that digest "
            "(`jevqueue approvals approve` does)",
            request_id=request_id,
        )
    if code == "approver":
        return DecisionRefusedError(
            f"the approval of request {request_id} is not signed in the name of {reviewer}: "
            "the reviewer is the record's approver_id; sign with the reviewer's own key",
            request_id=request_id,
        )
    return DecisionRefusedError(
        f"the approval inbox refused the decision on {request_id} ({code}): a denial needs "
        "a reason and no record, an approval a record signed for the request",
        request_id=request_id,
    )
