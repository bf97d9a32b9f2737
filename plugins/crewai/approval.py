"""Approvals for CrewAI tool calls: the core's one approval API, under its older names.

The tool guard shows an approver the core :class:`~jevqueue.policy.ApprovalRequest` and
passes it as ``approver=`` (see :class:`~jevqueue.policy.Approver`). This module keeps the
names the plugin shipped before that API existed, each deprecated for one release:

* :class:`ConsoleApproval` — :class:`~jevqueue.policy.ConsoleApprover`;
* :class:`AuthorityApproval` — :class:`~jevqueue.policy.AuthorityApprover`;
* ``ApprovalCallback`` — :class:`~jevqueue.policy.Approver`;
* ``ApprovalRequest`` — :class:`~jevqueue.policy.ApprovalRequest` itself.

To decline with a reason the agent reads, raise
:class:`~jevqueue.errors.ApprovalDeclinedError`.
"""

from __future__ import annotations

import warnings
from typing import Any

from jevqueue.policy import ApprovalRequest, Approver, AuthorityApprover, ConsoleApprover

__all__ = [
    "ApprovalCallback",
    "ApprovalRequest",
    "AuthorityApproval",
    "ConsoleApproval",
]

ApprovalCallback = Approver
"""Deprecated name of :class:`jevqueue.policy.Approver`."""


def _deprecated(old: str, new: str) -> None:
    warnings.warn(
        f"jevqueue.plugins.crewai.{old} is deprecated: use jevqueue.policy.{new} "
        "(passed as approver=...)",
        DeprecationWarning,
        stacklevel=3,
    )


class ConsoleApproval(ConsoleApprover):
    """Deprecated: :class:`jevqueue.policy.ConsoleApprover` under its older name."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _deprecated("ConsoleApproval", "ConsoleApprover")
        super().__init__(*args, **kwargs)


class AuthorityApproval(AuthorityApprover):
    """Deprecated: :class:`jevqueue.policy.AuthorityApprover` under its older name."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _deprecated("AuthorityApproval", "AuthorityApprover")
        super().__init__(*args, **kwargs)
