"""Approvals for AutoGen tool calls: one callable the user supplies, asked about one action.

When the policy answers a call with an ``explicit_approval`` obligation, the plugin builds
an :class:`ApprovalRequest` (the canonical action and its digest) and calls the approval
function with it. The function may be plain or ``async``; it returns the
:class:`~jevqueue.approvals.ApprovalRecord` (s) it obtained for exactly that digest, or
``None`` to decline. The plugin then asks the PEP again with those records, and the PEP
checks binding, freshness, signature and single use: a record for another action, a stale
one or a used one authorises nothing. To decline with a reason, raise
:class:`~jevqueue.errors.ApprovalRequiredError`; its message reaches the model.

There is no default approver. Without one, a call that needs an approval is denied with a
message that says how to configure one (``approval_func=`` in AgentChat, ``approval=`` in
classic AutoGen), so an unattended agent never hangs on a prompt and never runs the call.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from jevqueue.errors import ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.approvals import ApprovalRecord
    from jevqueue.policy import Action, Verdict

__all__ = ["ApprovalFunc", "ApprovalRequest", "approval_records", "check_approval_func"]

ApprovalAnswer = Union["ApprovalRecord", Iterable["ApprovalRecord"], None]
ApprovalFunc = Callable[["ApprovalRequest"], ApprovalAnswer | Awaitable[ApprovalAnswer]]
"""``(ApprovalRequest) -> ApprovalRecord | Iterable[ApprovalRecord] | None``, or ``async``."""


@dataclass(frozen=True)
class ApprovalRequest:
    """One call that needs an explicit approval before it may run.

    Attributes:
        action: The canonical action (tool, arguments, resolved targets, side effects,
            context) an approval must be bound to.
        verdict: The policy's verdict, with its reasons and obligations.
        call_id: The framework's id of the call, when it has one.
    """

    action: Action
    verdict: Verdict
    call_id: str | None = None

    @property
    def tool(self) -> str:
        """The tool called."""
        return self.action.tool

    @property
    def arguments(self) -> dict[str, Any]:
        """A copy of the call's arguments, as judged."""
        return dict(self.action.arguments)

    @property
    def action_digest(self) -> str:
        """The digest an approval record must name."""
        return self.action.digest

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the policy asks for an approval."""
        return tuple(self.verdict.reasons)


def check_approval_func(approval: Any, where: str) -> ApprovalFunc | None:
    """``approval`` when it is ``None`` or callable; a :class:`ConfigurationError` otherwise."""
    if approval is not None and not callable(approval):
        raise ConfigurationError(
            f"{where} must be a callable (ApprovalRequest) -> ApprovalRecord(s) | None, plain "
            f"or async, not {type(approval).__name__}"
        )
    return approval


def approval_records(answer: Any) -> tuple[ApprovalRecord, ...]:
    """The records an approval function returned, checked; ``()`` for ``None``.

    Raises:
        ConfigurationError: The function returned something other than records.
    """
    if answer is None:
        return ()
    if inspect.isawaitable(answer):
        raise ConfigurationError(
            "the approval function returned an awaitable where a synchronous chat needs "
            "records: give a plain function, or run the chat asynchronously"
        )
    from jevqueue.approvals import ApprovalRecord

    if isinstance(answer, ApprovalRecord):
        return (answer,)
    records = tuple(answer)
    for record in records:
        if not isinstance(record, ApprovalRecord):
            raise ConfigurationError(
                "an approval function must return ApprovalRecord(s) or None, not "
                f"{type(record).__name__}"
            )
    return records
