"""The AutoGen plugin's former names for the guard, kept importable for one release.

The tool-call half of both AutoGens is :class:`jevqueue.policy.Guard`:
:class:`~.classic_policy.PolicyCapability`, :func:`~.classic_tool.governed_tool` and
:class:`~.agentchat_workbench.PolicyWorkbench` each adapt one. ``CallJudgement`` is the
guard's :class:`~jevqueue.policy.Judgement`, ``ApprovalRequest`` the core one, and
``ApprovalFunc`` the core :class:`~jevqueue.policy.Approver`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jevqueue.policy import Approver, ExecutionContext, Guard, Judgement, ToolRegistry, ToolSpec
from jevqueue.policy._approval_request import deprecated_approver

__all__ = ["ApprovalFunc", "CallJudgement", "PolicyJudge"]

CallJudgement = Judgement
"""The guard's :class:`~jevqueue.policy.Judgement` (this plugin's former name)."""

ApprovalFunc = Approver
"""The core :class:`~jevqueue.policy.Approver` (this plugin's former name)."""


class PolicyJudge(Guard):
    """The guard, under this plugin's former name; prefer :class:`jevqueue.policy.Guard`.

    ``judge`` is the guard's one PEP judgement (it never asks the approver); ``check`` and
    ``acheck`` ask it, as ``judge`` and ``ajudge`` did before. ``approval=`` still works,
    with a ``DeprecationWarning``: pass ``approver=``.
    """

    def __init__(
        self,
        pep: Any,
        *,
        specs: Iterable[ToolSpec] | ToolRegistry,
        context: ExecutionContext | Mapping[str, Any],
        approver: Approver | None = None,
        approval: Approver | None = None,
        history: int = 1000,
    ) -> None:
        super().__init__(
            pep,
            specs=specs,
            context=context,
            approver=deprecated_approver(approver, "PolicyJudge", approval=approval),
            owner="PolicyJudge",
            history=history,
        )
