"""The fail-closed check every governed CrewAI tool call passes before it runs.

:class:`ToolGuard` is shared by the two enforcement forms — the tool wrappers
(:class:`~jevqueue.plugins.crewai.GovernedTool`) and the hooks
(:class:`~jevqueue.plugins.crewai.GovernedToolHooks`). For one call it:

1. refuses a tool the current turn did not offer (see :mod:`.turn`);
2. builds the canonical :class:`~jevqueue.policy.Action` from the registry and context
   (an unregistered tool or non-canonical arguments is a refusal);
3. asks the PEP (``enforce``), which audits every decision;
4. on an unmet ``explicit_approval`` obligation, asks the approval callback for records
   bound to the action digest and asks the PEP again with them;
5. treats a ``REPAIR`` verdict as a refusal that shows the repaired proposal.

:meth:`ToolGuard.check` never raises an ``Exception``: whatever goes wrong inside the check
becomes a denial, so nothing of ours can fall into CrewAI's fail-open path for hooks.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from crewai.utilities.string_utils import sanitize_tool_name
from jevqueue.errors import (
    ApprovalRequiredError,
    ConfigurationError,
    JevError,
    PolicyDeniedError,
    UnfulfilledObligationError,
    UnregisteredToolError,
)
from jevqueue.plugins.crewai.approval import ApprovalCallback, ApprovalRequest, ConsoleApproval
from jevqueue.plugins.crewai.turn import ToolNotOfferedError, TurnScope
from jevqueue.policy import (
    Action,
    ExecutionContext,
    ToolRegistry,
    ToolSpec,
    VerdictKind,
    registry_from_specs,
)

if TYPE_CHECKING:  # pragma: no cover
    from crewai.tools import BaseTool
    from jevqueue.approvals import ApprovalRecord
    from jevqueue.plugins.crewai.governed_tool import GovernedTool
    from jevqueue.plugins.crewai.tool_hooks import GovernedToolHooks
    from jevqueue.policy import PolicyEnforcementPoint, Verdict

__all__ = ["DENIAL_CODE", "GuardOutcome", "ToolGuard"]

DENIAL_CODE = "jevqueue_denied"
"""The ``ToolFailure.code`` a governed tool returns when a call is refused."""


@dataclass(frozen=True)
class GuardOutcome:
    """What the guard decided for one call.

    Attributes:
        tool: The (sanitized) tool name called.
        arguments: The arguments as judged.
        allowed: True when the call may run.
        message: The text the agent sees instead of a result; ``""`` when allowed.
        verdict: The PEP's final verdict, when the PEP was reached.
        action_digest: The canonical action's digest, when the action could be built.
        approval_requested: The digest shown to the approval callback, if one was asked.
        error: ``repr`` of the failure that made the check fail closed, if any.
        run_arguments: For an allowed call, a fresh copy of what the tool must run with:
            the judged arguments, path fields holding the resolved absolute paths judged
            (see :meth:`jevqueue.policy.Action.arguments_to_run`).
    """

    tool: str
    arguments: Mapping[str, Any]
    allowed: bool
    message: str = ""
    verdict: Verdict | None = None
    action_digest: str | None = None
    approval_requested: str | None = None
    error: str | None = None
    run_arguments: Mapping[str, Any] | None = None


class ToolGuard:
    """Judge CrewAI tool calls with the PEP before they run; refuse on any doubt.

    Args:
        pep: The policy enforcement point (it audits every decision).
        specs: The tool declarations (side effects, path fields), one per tool: build each
            with :func:`~jevqueue.plugins.crewai.tool_spec` or read them with
            :func:`jevqueue.load_tools_file`. A tool that is not declared is refused.
        registry: Deprecated: the older spelling of ``specs`` (a ``ToolRegistry``).
        context: The execution context (an ``ExecutionContext`` or a mapping of its
            fields); validated now, so a bad context fails here, not on the first call.
        approvals: Who approves calls that need an explicit approval. Default:
            :class:`~jevqueue.plugins.crewai.ConsoleApproval` without an authority, which
            refuses with a message saying how to configure one.
        turn: The turn scope shared with a governed LLM (one per agent). A guard without
            a governed LLM keeps an empty scope and never refuses on turn grounds.
        history: How many outcomes :attr:`outcomes` keeps.

    Raises:
        ConfigurationError: ``pep`` has no ``enforce`` method, or ``specs`` is not a
            collection of ToolSpecs.
        InvalidContextError: ``context`` is incomplete or ambient.
    """

    def __init__(
        self,
        pep: PolicyEnforcementPoint,
        *,
        specs: Iterable[ToolSpec] | ToolRegistry = (),
        registry: ToolRegistry | None = None,
        context: ExecutionContext | Mapping[str, Any],
        approvals: ApprovalCallback | None = None,
        turn: TurnScope | None = None,
        history: int = 1000,
    ) -> None:
        if not callable(getattr(pep, "enforce", None)):
            raise ConfigurationError(
                "ToolGuard needs a PolicyEnforcementPoint (an object with enforce(action, "
                f"approval_records)); got {type(pep).__name__}"
            )
        self.pep = pep
        self.registry = registry_from_specs(specs, registry=registry, owner="ToolGuard")
        self.context = ExecutionContext.coerce(context)
        self.approvals: ApprovalCallback = approvals if approvals is not None else ConsoleApproval()
        self.turn = turn if turn is not None else TurnScope()
        self.outcomes: deque[GuardOutcome] = deque(maxlen=history)
        self.hooks_installed = False  # set by GovernedToolHooks.install(): every tool judged
        self._lock = threading.Lock()

    @property
    def last(self) -> GuardOutcome | None:
        """The most recent outcome, or ``None`` before the first call."""
        with self._lock:
            return self.outcomes[-1] if self.outcomes else None

    # --- the check ----------------------------------------------------------------

    def check(self, tool_name: str, arguments: Mapping[str, Any] | None) -> GuardOutcome:
        """Decide whether one call may run. Never raises an ``Exception``.

        Args:
            tool_name: The tool's name as CrewAI dispatches it (sanitized here again).
            arguments: The arguments the tool would run with.

        Returns:
            The outcome; when ``allowed`` is false, ``message`` is what the agent sees.
        """
        try:
            outcome = self._check(tool_name, arguments)
        except Exception as exc:  # fail closed: a failed check is a denial
            name = _safe_name(tool_name)
            # The call is refused either way; a failing audit write is the PEP's to log.
            with contextlib.suppress(Exception):
                self._audit_rejection(name, exc)
            outcome = GuardOutcome(
                tool=name,
                arguments=_safe_arguments(arguments),
                allowed=False,
                message=(
                    f"jevqueue denied the call to {name!r}: the policy check could not "
                    f"complete ({type(exc).__name__}: {exc}); the call was not run"
                ),
                error=repr(exc),
            )
        with self._lock:
            self.outcomes.append(outcome)
        return outcome

    def _check(self, tool_name: str, arguments: Mapping[str, Any] | None) -> GuardOutcome:
        name = sanitize_tool_name(str(tool_name))
        args = _plain(arguments)
        refusal = self.turn.refusal(name)
        if refusal is not None:
            self._audit_rejection(name, ToolNotOfferedError(refusal))
            return GuardOutcome(
                tool=name,
                arguments=args,
                allowed=False,
                message=f"jevqueue denied the call: {refusal}; the call was not run",
            )
        try:
            action = Action.build(self.registry, name, args, self.context)
        except JevError as rejected:
            self._audit_rejection(name, rejected)
            return GuardOutcome(
                tool=name,
                arguments=args,
                allowed=False,
                message=(
                    f"jevqueue denied the call to {name!r}: it was refused before evaluation: "
                    f"{rejected}; the call was not run"
                ),
                error=repr(rejected),
            )
        approval_requested: str | None = None
        try:
            verdict = self.pep.enforce(action, ())
        except UnfulfilledObligationError as pending:
            approval_requested = action.digest
            request = ApprovalRequest(action=action, verdict=pending.verdict)
            try:
                records = _records(self.approvals(request))
            except ApprovalRequiredError as refused:
                return self._denied(
                    action,
                    args,
                    pending.verdict,
                    approval_requested,
                    f"no approval: {refused}",
                )
            if not records:
                return self._denied(
                    action,
                    args,
                    pending.verdict,
                    approval_requested,
                    f"it needs an explicit approval of action {action.digest} and the "
                    "approver gave none",
                )
            try:
                verdict = self.pep.enforce(action, records)
            except UnfulfilledObligationError as still:
                return self._denied(
                    action,
                    args,
                    still.verdict,
                    approval_requested,
                    "the approval given does not authorise this exact action "
                    f"({action.digest}): "
                    + (
                        "; ".join(still.verdict.reasons)
                        or "it is for another action, stale, or used"
                    ),
                )
            except PolicyDeniedError as denied:
                return self._denied(
                    action,
                    args,
                    denied.verdict,
                    approval_requested,
                    "; ".join(denied.verdict.reasons) or "the policy denied it",
                )
        except PolicyDeniedError as denied:
            return self._denied(
                action,
                args,
                denied.verdict,
                None,
                "; ".join(denied.verdict.reasons) or "the policy denied it",
            )
        if verdict.kind is VerdictKind.REPAIR:
            return self._denied(
                action,
                args,
                verdict,
                approval_requested,
                "the policy proposes a repaired call instead, which was not run: "
                f"{dict(verdict.repaired or {})!r}; resubmit it if it does what you need",
            )
        if not verdict.allowed:
            return self._denied(
                action,
                args,
                verdict,
                approval_requested,
                "; ".join(verdict.reasons) or "the policy did not allow it",
            )
        return GuardOutcome(
            tool=name,
            arguments=args,
            allowed=True,
            verdict=verdict,
            action_digest=action.digest,
            approval_requested=approval_requested,
            run_arguments=action.arguments_to_run(args),
        )

    def _audit_rejection(self, name: str, error: BaseException) -> None:
        audit = getattr(self.pep, "audit_rejection", None)
        if callable(audit):
            audit(name, self.context, error)

    @staticmethod
    def _denied(
        action: Action,
        arguments: Mapping[str, Any],
        verdict: Verdict | None,
        approval_requested: str | None,
        why: str,
    ) -> GuardOutcome:
        return GuardOutcome(
            tool=action.tool,
            arguments=arguments,
            allowed=False,
            message=f"jevqueue denied the call to {action.tool!r}: {why}; the call was not run",
            verdict=verdict,
            action_digest=action.digest,
            approval_requested=approval_requested,
        )

    # --- the two enforcement forms ---------------------------------------------------

    def wrap(self, tools: Iterable[BaseTool]) -> list[GovernedTool]:
        """Wrap CrewAI tools (``BaseTool`` subclasses or ``@tool`` functions) in this guard.

        Raises:
            ConfigurationError: a tool has no declaration in ``specs``: it could never be
                judged, so it is refused now rather than on its first call.
        """
        from jevqueue.plugins.crewai.governed_tool import GovernedTool

        wrapped = [GovernedTool.wrap(tool, self) for tool in tools]
        missing = [
            tool.sanitized_name for tool in wrapped if not self._declares(tool.sanitized_name)
        ]
        if missing:
            # Refused now, as LangGraph's tool node refuses: never first when called.
            raise ConfigurationError(
                f"tools {missing} are not declared: declare each once with "
                "tool_spec(tool, side_effects=..., path_fields=...) and pass specs=[...] to the "
                "ToolGuard; an undeclared tool can never run"
            )
        return wrapped

    def _declares(self, name: str) -> bool:
        """Whether the registry holds ``name``; a registry that fails is judged per call."""
        try:
            self.registry.get(name)
        except UnregisteredToolError:
            return False
        except Exception:  # refused (fail closed) when called, with the failure audited
            return True
        return True

    def hooks(self) -> GovernedToolHooks:
        """The ``before_tool_call`` / ``after_tool_call`` form of this guard (not installed)."""
        from jevqueue.plugins.crewai.tool_hooks import GovernedToolHooks

        return GovernedToolHooks(self)


def _records(answer: Any) -> Sequence[ApprovalRecord]:
    if answer is None:
        return ()
    from jevqueue.approvals import ApprovalRecord

    if isinstance(answer, ApprovalRecord):
        return (answer,)
    records = tuple(answer)
    for record in records:
        if not isinstance(record, ApprovalRecord):
            raise ConfigurationError(
                "an approval callback must return ApprovalRecord(s) or None, not "
                f"{type(record).__name__}"
            )
    return records


def _plain(arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    if arguments is None:
        return {}
    if not isinstance(arguments, Mapping):
        raise ConfigurationError(
            f"tool arguments must be a mapping of names to values, not {type(arguments).__name__}"
        )
    # The policy judges a private copy: nothing it (or a rule) does to the arguments can
    # change the ones the tool runs with, which stay exactly as judged and digested.
    return copy.deepcopy(dict(arguments))


def _safe_name(tool_name: Any) -> str:
    try:
        return sanitize_tool_name(str(tool_name))
    except Exception:
        return "<unnamed tool>"


def _safe_arguments(arguments: Any) -> Mapping[str, Any]:
    try:
        return dict(arguments) if isinstance(arguments, Mapping) else {}
    except Exception:
        return {}
