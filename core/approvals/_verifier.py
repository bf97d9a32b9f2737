"""The extension point that decides whether an approval record is genuine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.approvals._record import ApprovalRecord
    from jevqueue.policy._action import Action

__all__ = ["ApprovalVerifier"]


@runtime_checkable
class ApprovalVerifier(Protocol):
    """Says whether a record really comes from someone allowed to approve ``action``.

    One method. Return ``True`` only when the record is authentic and its approver may
    approve this action; anything else — ``False``, a truthy non-bool, an exception — is a
    refusal. Digest binding, freshness and single use are checked by
    :func:`~jevqueue.approvals.check_approvals` whatever the verifier says.
    :class:`~jevqueue.approvals.SignedApprovalVerifier` is the shipped implementation.
    """

    def __call__(self, record: ApprovalRecord, action: Action) -> bool:
        """Return ``True`` if ``record`` is an authentic approval of ``action``."""
        ...
