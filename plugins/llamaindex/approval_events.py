"""Approvals in LlamaIndex's own human-in-the-loop idiom: two workflow events.

A governed tool whose call needs an explicit approval (and was given no inline
``approver=``) writes an :class:`ApprovalRequiredEvent` (an ``InputRequiredEvent``) to the
workflow's event stream and waits, with ``ctx.wait_for_event``, for an
:class:`ApprovalResponseEvent` (a ``HumanResponseEvent``) whose ``action_digest`` is the
one it asked about::

    handler = agent.run(user_msg="clean the build folder")
    async for event in handler.stream_events():
        if isinstance(event, ApprovalRequiredEvent):
            record = authority.issue(event.action_digest)        # after a human said yes
            handler.ctx.send_event(ApprovalResponseEvent.approve(record))
            # or: handler.ctx.send_event(ApprovalResponseEvent.decline(event.action_digest))
    result = await handler

With ``InboxApprover(pause=True)`` the request is also filed in the approval inbox;
reviewers decide it there, and the run, restored with ``Context.from_dict`` in any process,
resumes from the stored decision with one line::

    handler.ctx.send_event(ApprovalResponseEvent.of(digest, approver.answer(digest)))

The event carries jevqueue's one approval request: ``event.request`` is
:meth:`ApprovalRequest.to_dict() <jevqueue.policy.ApprovalRequest.to_dict>`, and in the
process that paused, ``event.approval_request`` is the :class:`~jevqueue.policy.ApprovalRequest`
itself — what every plugin's approver is shown, so one approver serves the pause too
(:meth:`ApprovalResponseEvent.answer`). It also shows ``canonical_action``, the RFC 8785
text whose SHA-256 is ``action_digest``, so the approver sees exactly what the approval
authorises, and ``provenance``: where each argument came from (the user's request, or
which tool output), which the digest covers too. Both events hold JSON values only, so a
paused run survives ``handler.ctx.to_dict()`` and resumes with
``Context.from_dict(agent, data)`` in another process.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jevqueue.approvals import ApprovalRecord
from jevqueue.errors import (
    ApprovalExpiredError,
    ApprovalRequiredError,
    ConfigurationError,
    InvalidApprovalError,
)
from jevqueue.plugins.llamaindex._framework import HumanResponseEvent, InputRequiredEvent
from jevqueue.policy import Action, ApprovalRequest, Approver, Verdict, canonical_json
from jevqueue.policy._approval_request import approval_records
from pydantic import Field, PrivateAttr

__all__ = ["ApprovalRequest", "ApprovalRequiredEvent", "ApprovalResponseEvent"]


class ApprovalRequiredEvent(InputRequiredEvent):
    """A tool call waits for an explicit approval of exactly one action.

    Attributes:
        tool_name: The tool the model called.
        arguments: The call's arguments, as judged (canonical JSON values).
        action_digest: ``sha256:<hex>`` of the canonical action; an approval must carry it.
        canonical_action: The canonical JSON text whose SHA-256 is ``action_digest``.
        targets: The resolved paths the call touches.
        side_effects: The tool's declared side effects.
        context: The execution context the digest covers.
        obligations: What the policy asks for (``["explicit_approval"]``).
        reasons: Why, in the policy's words.
        policy_revision: The policy revision that decided.
        call_id: The model's id of the call, when the agent knows it.
        provenance: Where each argument came from (``request["provenance"]``): each
            value's label — ``user``, ``untrusted``, ``trusted``, ``unseen`` — its sources,
            and what a reviewer reads (``says``: "to came from the 'body' field of item 2
            of read_inbox's output (call c1), not from your request"); ``None`` when
            nothing the agent read is known. ``prefix`` shows the same lines.
        request: The core :class:`~jevqueue.policy.ApprovalRequest`, as ``to_dict()``.
    """

    tool_name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    action_digest: str
    canonical_action: str
    targets: list[str] = Field(default_factory=list)
    side_effects: list[str] = Field(default_factory=list)
    context: dict[str, Any] = Field(default_factory=dict)
    obligations: list[str] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list)
    policy_revision: str = ""
    call_id: str | None = None
    provenance: list[dict[str, Any]] | None = None
    request: dict[str, Any] = Field(default_factory=dict)
    _approval_request: ApprovalRequest | None = PrivateAttr(default=None)

    @property
    def approval_request(self) -> ApprovalRequest | None:
        """The core request, in the process that paused (``None`` once deserialized)."""
        return self._approval_request

    @classmethod
    def of(cls, request: ApprovalRequest) -> ApprovalRequiredEvent:
        """The event that carries ``request`` in the workflow's stream."""
        action, verdict = request.action, request.verdict
        document = action.digest_document()
        shown = request.to_dict()
        origins = request.provenance.describe() if request.provenance is not None else ""
        event = cls(
            prefix=(
                f"{request.tool} needs an explicit approval of action {request.action_digest}: "
                "answer with ApprovalResponseEvent.approve(record) or .decline(digest)"
                + (f"\nwhere the values came from:\n{origins}" if origins else "")
            ),
            tool_name=request.tool,
            arguments=dict(document["arguments"]),
            action_digest=request.action_digest,
            canonical_action=canonical_json(document).decode("utf-8"),
            targets=list(action.targets),
            side_effects=sorted(action.side_effects),
            context=action.context.as_dict(),
            obligations=list(verdict.obligations) if verdict is not None else [],
            reasons=list(request.reasons),
            policy_revision=verdict.policy_revision if verdict is not None else "",
            call_id=request.call_id,
            provenance=shown["provenance"],
            request=shown,
        )
        event._approval_request = request
        return event

    @classmethod
    def for_action(cls, action: Action, verdict: Verdict) -> ApprovalRequiredEvent:
        """The request for ``action``, whose ``verdict`` asks for an approval."""
        return cls.of(ApprovalRequest.of(action, verdict))


class ApprovalResponseEvent(HumanResponseEvent):
    """The answer to one :class:`ApprovalRequiredEvent`: approval records, or a decline.

    Build it with :meth:`approve`, :meth:`decline` or :meth:`answer`. The waiting tool
    accepts only the event whose ``action_digest`` is the one it asked about, and the PEP
    then accepts a record only if it is genuine, fresh, unused and bound to that same
    digest.

    Attributes:
        action_digest: The digest of the action this answer is about.
        record: The (first) approval record's ``to_dict()`` form, or ``None``.
        records: Further records' ``to_dict()`` forms, when several were given.
        declined: True when the approver said no (or nobody decided in time).
        expired: True when the call is declined because its request expired: nobody
            decided in time (the guard reports and audits it as expired, not declined).
        reason: Free text for a decline (shown to the model).
    """

    response: str = ""
    action_digest: str
    record: dict[str, Any] | None = None
    records: list[dict[str, Any]] = Field(default_factory=list)
    declined: bool = False
    expired: bool = False
    reason: str = ""

    @classmethod
    def approve(
        cls, record: ApprovalRecord | Mapping[str, Any], *more: ApprovalRecord | Mapping[str, Any]
    ) -> ApprovalResponseEvent:
        """An approval: ``record`` (and ``more``) from a trusted authority, bound to one digest.

        Raises:
            InvalidApprovalError: a record is not an approval record (or its dict form).
        """
        given = [_record(item) for item in (record, *more)]
        return cls(
            response="approved",
            action_digest=given[0].action_digest,
            record=given[0].to_dict(),
            records=[item.to_dict() for item in given[1:]],
        )

    @classmethod
    def decline(cls, action_digest: str, reason: str = "") -> ApprovalResponseEvent:
        """A refusal of the action with ``action_digest``; the call will not run."""
        return cls(response="declined", action_digest=action_digest, declined=True, reason=reason)

    @classmethod
    def of(cls, action_digest: str, answer: Any) -> ApprovalResponseEvent:
        """The event that carries a stored decision to the call waiting on ``action_digest``:
        what ``InboxApprover.answer(action_digest)`` returns.

        Records approve (the guard checks each against the call's digest); an
        :class:`~jevqueue.errors.ApprovalExpiredError` declines as expired; any other
        :class:`~jevqueue.errors.ApprovalDeclinedError` declines with its message.

        Raises:
            ApproverAnswerError: ``answer`` is neither records nor a declined error.
            InvalidApprovalError: a record is malformed.
        """
        if isinstance(answer, ApprovalExpiredError):
            return cls(
                response="expired",
                action_digest=action_digest,
                declined=True,
                expired=True,
                reason=str(answer),
            )
        if isinstance(answer, ApprovalRequiredError):
            return cls.decline(action_digest, str(answer))
        given = approval_records(answer)
        if not given:
            return cls.decline(action_digest, "the approver gave no approval record")
        return cls(
            response="approved",
            action_digest=action_digest,
            record=given[0].to_dict(),
            records=[item.to_dict() for item in given[1:]],
        )

    @classmethod
    def answer(cls, request: ApprovalRequiredEvent, approver: Approver) -> ApprovalResponseEvent:
        """Ask a plain ``approver`` (the same one any plugin takes as ``approver=``) about
        ``request`` and turn what it says into the answer: its records, or a decline when
        it raises :class:`~jevqueue.errors.ApprovalDeclinedError` or gives none.

        Raises:
            ConfigurationError: the event was deserialized (ask in the process that paused,
                or approve with a record for ``request.action_digest``).
            ApproverAnswerError: the approver returned something that is not records.
            Exception: whatever else the approver raises, unchanged.
        """
        core = request.approval_request
        if core is None:
            raise ConfigurationError(
                "this ApprovalRequiredEvent was deserialized and no longer holds the "
                "ApprovalRequest: answer it with ApprovalResponseEvent.approve(record) for "
                "event.action_digest, or .decline(event.action_digest, reason)"
            )
        try:
            given = approval_records(approver(core))
        except ApprovalRequiredError as declined:
            return cls.decline(request.action_digest, str(declined))
        if not given:
            return cls.decline(request.action_digest, "the approver gave no approval record")
        return cls.approve(*given)

    def approval_records(self) -> tuple[ApprovalRecord, ...]:
        """The records this answer offers, read back (none for a decline).

        Raises:
            InvalidApprovalError: a record is malformed.
        """
        if self.declined or self.record is None:
            return ()
        return tuple(ApprovalRecord.from_dict(item) for item in (self.record, *self.records))

    def record_dicts(self) -> list[dict[str, Any]]:
        """The records as given (dicts), for the guard to read (none for a decline)."""
        if self.declined or self.record is None:
            return []
        return [self.record, *self.records]


def _record(record: ApprovalRecord | Mapping[str, Any]) -> ApprovalRecord:
    if isinstance(record, Mapping):
        record = ApprovalRecord.from_dict(record)
    if not isinstance(record, ApprovalRecord):
        raise InvalidApprovalError(
            f"approve() takes an ApprovalRecord or its to_dict() form, not {type(record).__name__}"
        )
    return record
