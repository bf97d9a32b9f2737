"""The CrewAI adapter of :class:`jevqueue.policy.Guard`: one check before every tool call.

:class:`ToolGuard` is the core guard with two CrewAI facts added, and nothing else:

* a call is named as CrewAI dispatches it (``sanitize_tool_name``), and
* a call of a tool the current turn did not offer is refused first (see :mod:`.turn`: the
  governed LLM records each turn's constraint; refusing a tool the model was not offered
  is the governor's half, so it is judged here before the policy is asked).

Everything else — the canonical action, the PEP, the approver and its
:class:`~jevqueue.policy.ApprovalRequest`, the refusal message the agent reads, the
arguments to run (paths resolved as judged), running them once — is the guard's. The two
enforcement forms write its :class:`~jevqueue.policy.Judgement` back in CrewAI's idiom:
the wrappers (:class:`~jevqueue.plugins.crewai.GovernedTool`) return a ``ToolFailure``,
the hooks (:class:`~jevqueue.plugins.crewai.GovernedToolHooks`) block the call and replace
CrewAI's generic text with the guard's message.

What the agent read — the crew task's words, each tool output, the id the model gave each
call — is recorded in the guard's transcript as :mod:`.transcript` describes, so each call
is judged with the provenance of its arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from crewai.utilities.string_utils import sanitize_tool_name
from jevqueue.plugins.crewai.transcript import CallIds, task_words, tool_results
from jevqueue.plugins.crewai.turn import ToolNotOfferedError, TurnScope
from jevqueue.policy import (
    ExecutionContext,
    Guard,
    Judgement,
    ToolRegistry,
    ToolSpec,
    Transcript,
    registry_from_specs,
)
from jevqueue.policy._approval_request import Approver, deprecated_approver

if TYPE_CHECKING:  # pragma: no cover
    from crewai.tools import BaseTool
    from jevqueue.plugins.crewai.governed_tool import GovernedTool
    from jevqueue.plugins.crewai.tool_hooks import GovernedToolHooks
    from jevqueue.policy import PolicyEnforcementPoint

__all__ = ["DENIAL_CODE", "GuardOutcome", "ToolGuard"]

DENIAL_CODE = "jevqueue_denied"
"""The ``ToolFailure.code`` a governed tool returns when a call is refused."""

GuardOutcome = Judgement
"""Deprecated name of :class:`jevqueue.policy.Judgement`, what the guard decided for a call.

``run_arguments`` is now a method (a fresh copy per execution); the judged arguments are
``arguments`` (read-only) and the approval digest is ``approval_requested``."""


class ToolGuard(Guard):
    """Judge CrewAI tool calls with the PEP before they run; refuse on any doubt.

    Args:
        pep: The policy enforcement point (it audits every decision).
        specs: The tool declarations (side effects, path fields), one per tool: build each
            with :func:`~jevqueue.plugins.crewai.tool_spec` or read them with
            :func:`jevqueue.load_tools_file`. A tool that is not declared is refused.
        registry: Deprecated: the older spelling of ``specs`` (a ``ToolRegistry``).
        context: The execution context (an ``ExecutionContext`` or a mapping of its
            fields); validated now, so a bad context fails here, not on the first call.
        approver: Who approves calls that need an explicit approval: any
            :class:`~jevqueue.policy.Approver` (``AuthorityApprover``, ``ConsoleApprover``,
            or a callable, plain or ``async``) shown the core
            :class:`~jevqueue.policy.ApprovalRequest`. Without one such calls are refused
            with a message saying how to add one.
        approvals: Deprecated: the older keyword for ``approver``.
        turn: The turn scope shared with a governed LLM (one per agent). A guard without
            a governed LLM keeps an empty scope and never refuses on turn grounds.
        history: How many judgements :attr:`judgements` keeps.

    Raises:
        ConfigurationError: ``pep`` has no ``enforce`` method, ``specs`` is not a
            collection of ToolSpecs, or the approver is not callable (or given twice).
        InvalidContextError: ``context`` is incomplete or ambient.
    """

    def __init__(
        self,
        pep: PolicyEnforcementPoint,
        *,
        specs: Iterable[ToolSpec] | ToolRegistry = (),
        registry: ToolRegistry | None = None,
        context: ExecutionContext | Mapping[str, Any],
        approver: Approver | None = None,
        approvals: Approver | None = None,
        turn: TurnScope | None = None,
        history: int = 1000,
    ) -> None:
        approver = deprecated_approver(approver, "ToolGuard", approvals=approvals)
        super().__init__(
            pep,
            specs=registry_from_specs(specs, registry=registry, owner="ToolGuard"),
            context=context,
            approver=approver,
            owner="ToolGuard",
            history=history,
        )
        self.turn = turn if turn is not None else TurnScope()
        self.hooks_installed = False  # set by GovernedToolHooks: every tool call is judged
        self.call_ids = CallIds()

    def judge(
        self,
        tool: str,
        arguments: Any,
        call_id: str | None = None,
        *,
        records: Sequence[Any] = (),
        context: ExecutionContext | Mapping[str, Any] | None = None,
        transcript: Transcript | None = None,
    ) -> Judgement:
        """The guard's judgement, after refusing a tool the current turn did not offer.

        Never raises an ``Exception``.
        """
        try:
            name = sanitize_tool_name(str(tool))
            refusal = self.turn.refusal(name)
        except Exception:  # the guard refuses what cannot even be named
            name, refusal = tool, None
        if refusal is None:
            return super().judge(
                name, arguments, call_id, records=records, context=context, transcript=transcript
            )
        # Governor-side, so not the policy's to decide; audited as refused before evaluation.
        return self.refuse(
            name, ToolNotOfferedError(refusal), call_id, why=refusal, context=context
        )

    # --- what the agent read -----------------------------------------------------------

    def record_task(self, task: Any, crew: Any) -> None:
        """Record ``task``'s description and expected output as the user's words, when it
        is one of ``crew``'s own tasks (a delegated task is the delegating model's text).
        The governed LLM and the hooks call this for the task CrewAI runs."""
        for text in task_words(task, crew):
            self.record_user(text)

    def record_results(self, messages: Any) -> None:
        """Record each tool result of CrewAI's conversation ``messages`` under its call id
        (one this guard ran is already recorded, and kept once; one it refused holds the
        guard's own denial, not an output). The governed LLM calls this on every turn."""
        allowed = {j.call_id: j.allowed for j in list(self.judgements) if j.call_id}
        for tool, content, call_id in tool_results(messages):
            if allowed.get(call_id, True):
                self.record_output(tool, content, call_id)

    def expect_calls(self, response: Any) -> None:
        """Read the ids of the calls a model reply makes, for :meth:`claim_call_id` (the
        governed LLM calls this with every reply)."""
        self.call_ids.expect(response)

    def claim_call_id(self, tool: str, arguments: Any) -> str | None:
        """The id the model gave the call of ``tool`` with ``arguments`` in a recent reply
        (:class:`~.transcript.CallIds`), or ``None``: CrewAI hands a tool its arguments,
        not the call's id."""
        return self.call_ids.claim(tool, arguments)

    # --- the two enforcement forms ---------------------------------------------------

    def wrap(self, tools: Iterable[BaseTool]) -> list[GovernedTool]:
        """Wrap CrewAI tools (``BaseTool`` subclasses or ``@tool`` functions) in this guard.

        Raises:
            ConfigurationError: a tool has no declaration in ``specs``: it could never be
                judged, so it is refused now rather than on its first call.
        """
        from jevqueue.plugins.crewai.governed_tool import GovernedTool

        wrapped = [GovernedTool.wrap(tool, self) for tool in tools]
        self.require_declared((tool.sanitized_name for tool in wrapped), " to the ToolGuard")
        return wrapped

    def hooks(self) -> GovernedToolHooks:
        """The ``before_tool_call`` / ``after_tool_call`` form of this guard (not installed)."""
        from jevqueue.plugins.crewai.tool_hooks import GovernedToolHooks

        return GovernedToolHooks(self)
