"""Approvals in LlamaIndex's own human-in-the-loop idiom: two workflow events.

A governed tool whose call needs an explicit approval writes an
:class:`ApprovalRequiredEvent` (an ``InputRequiredEvent``) to the workflow's event stream
and waits, with ``ctx.wait_for_event``, for an :class:`ApprovalResponseEvent` (a
``HumanResponseEvent``) whose ``action_digest`` is the one it asked about::

    handler = agent.run(user_msg="clean the build folder")
    async for event in handler.stream_events():
        if isinstance(event, ApprovalRequiredEvent):
            record = authority.issue(event.action_digest)        # after a human said yes
            handler.ctx.send_event(ApprovalResponseEvent.approve(record))
            # or: handler.ctx.send_event(ApprovalResponseEvent.decline(event.action_digest))
    result = await handler

The request shows ``canonical_action``, the RFC 8785 text whose SHA-256 is
``action_digest``, so the approver sees exactly what the approval authorises. Both events
hold JSON values only, so a paused run survives ``handler.ctx.to_dict()`` and resumes
with ``Context.from_dict(agent, data)`` in another process.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jevqueue.approvals import ApprovalRecord
from jevqueue.errors import InvalidApprovalError
from jevqueue.plugins.llamaindex._framework import HumanResponseEvent, InputRequiredEvent
from jevqueue.policy import Action, Verdict, canonical_json
from pydantic import Field

__all__ = ["ApprovalRequiredEvent", "ApprovalResponseEvent"]


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

    @classmethod
    def for_action(
        cls, action: Action, verdict: Verdict | Mapping[str, Any]
    ) -> ApprovalRequiredEvent:
        """The request for ``action``, whose ``verdict`` asks for an approval."""
        document = action.digest_document()
        if isinstance(verdict, Verdict):
            obligations, reasons, revision = (
                list(verdict.obligations),
                list(verdict.reasons),
                verdict.policy_revision,
            )
        else:
            obligations = list(verdict.get("obligations") or ())
            reasons = list(verdict.get("reasons") or ())
            revision = str(verdict.get("policy_revision") or "")
        return cls(
            prefix=(
                f"{action.tool} needs an explicit approval of action {action.digest}: "
                "answer with ApprovalResponseEvent.approve(record) or .decline(digest)"
            ),
            tool_name=action.tool,
            arguments=dict(document["arguments"]),
            action_digest=action.digest,
            canonical_action=canonical_json(document).decode("utf-8"),
            targets=list(action.targets),
            side_effects=sorted(action.side_effects),
            context=action.context.as_dict(),
            obligations=obligations,
            reasons=reasons,
            policy_revision=revision,
        )


class ApprovalResponseEvent(HumanResponseEvent):
    """The answer to one :class:`ApprovalRequiredEvent`: an approval record, or a decline.

    Build it with :meth:`approve` or :meth:`decline`. The waiting tool accepts only the
    event whose ``action_digest`` is the one it asked about, and the PEP then accepts the
    record only if it is genuine, fresh, unused and bound to that same digest.

    Attributes:
        action_digest: The digest of the action this answer is about.
        record: The approval record's ``to_dict()`` form, or ``None`` for a decline.
        declined: True when the approver said no.
        reason: Free text for a decline (shown to the model).
    """

    response: str = ""
    action_digest: str
    record: dict[str, Any] | None = None
    declined: bool = False
    reason: str = ""

    @classmethod
    def approve(cls, record: ApprovalRecord | Mapping[str, Any]) -> ApprovalResponseEvent:
        """An approval: ``record`` from a trusted authority, bound to one digest.

        Raises:
            InvalidApprovalError: ``record`` is not an approval record (or its dict form).
        """
        if isinstance(record, Mapping):
            record = ApprovalRecord.from_dict(record)
        if not isinstance(record, ApprovalRecord):
            raise InvalidApprovalError(
                f"approve() takes an ApprovalRecord or its to_dict() form, not "
                f"{type(record).__name__}"
            )
        return cls(response="approved", action_digest=record.action_digest, record=record.to_dict())

    @classmethod
    def decline(cls, action_digest: str, reason: str = "") -> ApprovalResponseEvent:
        """A refusal of the action with ``action_digest``; the call will not run."""
        return cls(response="declined", action_digest=action_digest, declined=True, reason=reason)

    def approval_records(self) -> tuple[ApprovalRecord, ...]:
        """The record this answer offers, read back (none for a decline).

        Raises:
            InvalidApprovalError: The record is malformed.
        """
        if self.declined or self.record is None:
            return ()
        return (ApprovalRecord.from_dict(self.record),)
