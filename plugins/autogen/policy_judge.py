"""The fail-closed check every governed AutoGen tool call passes before it runs.

Both worlds share it: classic AutoGen's :class:`~.classic_policy.PolicyCapability` and
:func:`~.classic_tool.governed_tool`, and AgentChat's
:class:`~.agentchat_workbench.PolicyWorkbench`. For one call :class:`PolicyJudge`:

1. builds the canonical :class:`~jevqueue.policy.Action` from the registry and context
   (an unregistered tool, non-canonical or schema-breaking arguments: refused, audited);
2. asks the PEP (``enforce``), which audits every decision;
3. on an unmet ``explicit_approval`` obligation, asks the approval function (plain or
   ``async``) for records bound to the action digest and asks the PEP again with them;
   with no approval function the call is denied with a message saying how to add one;
4. treats a ``REPAIR`` verdict as a refusal that shows the repaired proposal.

:meth:`PolicyJudge.judge` and :meth:`PolicyJudge.ajudge` never raise an ``Exception``:
whatever goes wrong inside the check becomes a denial. An allowed call carries the
arguments to run it with: a private copy of what was judged, with each path field (and
the working-directory field) replaced by the resolved absolute path the policy judged.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from jevqueue.errors import (
    ApprovalRequiredError,
    ConfigurationError,
    JevError,
    PolicyDeniedError,
    UnfulfilledObligationError,
)
from jevqueue.plugins.autogen.approval import (
    ApprovalFunc,
    ApprovalRequest,
    approval_records,
    check_approval_func,
)
from jevqueue.policy import (
    Action,
    ExecutionContext,
    ToolRegistry,
    ToolSpec,
    VerdictKind,
    registry_from_specs,
)

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.policy import PolicyEnforcementPoint, Verdict

__all__ = ["CallJudgement", "PolicyJudge"]


@dataclass(frozen=True)
class CallJudgement:
    """What the judge decided for one call.

    Attributes:
        tool: The tool called.
        allowed: True when the call may run.
        message: The text the model sees instead of a result; ``""`` when allowed.
        arguments: The arguments to run the call with (read-only): what was judged,
            with path fields as resolved. Empty when refused.
        call_id: The framework's id of the call, when it has one.
        verdict: The PEP's final verdict, when the PEP was reached.
        action_digest: The canonical action's digest, when the action could be built.
        approval_requested: The digest shown to the approval function, if one was asked.
        error: ``repr`` of the failure that made the check fail closed, if any.
    """

    tool: str
    allowed: bool
    message: str = ""
    arguments: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    call_id: str | None = None
    verdict: Verdict | None = None
    action_digest: str | None = None
    approval_requested: str | None = None
    error: str | None = None

    def run_arguments(self) -> dict[str, Any]:
        """A fresh, mutable copy of :attr:`arguments` for one execution of the tool."""
        return _copy(self.arguments)


@dataclass
class _Pending:
    """A call the PEP answered with an unmet obligation: it waits for the approver."""

    action: Action
    verdict: Verdict
    arguments: dict[str, Any]
    call_id: str | None


class PolicyJudge:
    """Judge AutoGen tool calls with the PEP before they run; refuse on any doubt.

    Args:
        pep: The policy enforcement point (it audits every decision).
        specs: The tools' declarations (:func:`~jevqueue.plugins.autogen.tool_spec`). A
            tool without one is refused.
        context: The execution context (an ``ExecutionContext`` or a mapping of its
            fields); validated now, so a bad context fails here, not on the first call.
        approval: Who approves calls that need an explicit approval: a callable
            ``(ApprovalRequest) -> ApprovalRecord(s) | None``, plain or ``async``. Without
            one, such calls are denied.
        approval_hint: How the message of that denial tells the user to add an approver.
        history: How many judgements :attr:`judgements` keeps.

    Raises:
        ConfigurationError: ``pep`` is not a PEP, ``specs`` holds something other than a
            ``ToolSpec`` or names a tool twice, or ``approval`` is not callable.
        InvalidContextError: ``context`` is incomplete or ambient.
    """

    def __init__(
        self,
        pep: PolicyEnforcementPoint,
        *,
        specs: Iterable[ToolSpec] | ToolRegistry,
        context: ExecutionContext | Mapping[str, Any],
        approval: ApprovalFunc | None = None,
        approval_hint: str = "approval=",
        history: int = 1000,
    ) -> None:
        if not callable(getattr(pep, "enforce", None)):
            raise ConfigurationError(
                "a jevqueue PolicyEnforcementPoint is needed (an object with enforce(action, "
                f"approval_records)); got {type(pep).__name__}"
            )
        self.pep = pep
        self.registry = registry_from_specs(specs, owner="jevqueue.plugins.autogen")
        self.context = ExecutionContext.coerce(context)
        self.approval = check_approval_func(approval, approval_hint.rstrip("="))
        self.approval_hint = approval_hint
        self.judgements: deque[CallJudgement] = deque(maxlen=history)
        self._lock = threading.Lock()

    @property
    def last(self) -> CallJudgement | None:
        """The most recent judgement, or ``None`` before the first call."""
        with self._lock:
            return self.judgements[-1] if self.judgements else None

    def declared(self, name: str) -> bool:
        """True when ``name`` has a spec."""
        return name in self.registry

    # --- the two entry points -----------------------------------------------------

    def judge(self, tool: str, arguments: Any, call_id: str | None = None) -> CallJudgement:
        """Decide one call, asking a plain approval function when one is needed.

        Never raises an ``Exception``. An ``async`` approval function cannot be awaited
        here: the call is denied with a message saying to run the chat asynchronously.
        """
        try:
            first = self._first(tool, arguments, call_id)
            if isinstance(first, _Pending):
                answer = self._ask(first)
                if inspect.isawaitable(answer):
                    _close(answer)
                    raise ConfigurationError(
                        "the approval function is async and this chat is synchronous: run the "
                        "chat asynchronously (a_initiate_chat, a_run), or give a plain function"
                    )
                outcome = self._second(first, answer)
            else:
                outcome = first
        except Exception as exc:  # fail closed: a failed check is a denial
            outcome = self._failed(tool, call_id, exc)
        return self._keep(outcome)

    async def ajudge(self, tool: str, arguments: Any, call_id: str | None = None) -> CallJudgement:
        """Decide one call, awaiting the approval function when it is ``async``."""
        try:
            first = self._first(tool, arguments, call_id)
            if isinstance(first, _Pending):
                answer = self._ask(first)
                if inspect.isawaitable(answer):
                    try:
                        answer = await answer
                    except ApprovalRequiredError as refused:
                        answer = refused
                outcome = self._second(first, answer)
            else:
                outcome = first
        except Exception as exc:
            outcome = self._failed(tool, call_id, exc)
        return self._keep(outcome)

    # --- the steps --------------------------------------------------------------------

    def _first(self, tool: str, arguments: Any, call_id: str | None) -> CallJudgement | _Pending:
        name = str(tool)
        args = _plain(arguments)
        try:
            action = Action.build(self.registry, name, args, self.context)
        except JevError as rejected:
            self._audit_rejection(name, rejected)
            return CallJudgement(
                tool=name,
                allowed=False,
                call_id=call_id,
                message=(
                    f"jevqueue denied the call to {name!r}: it was refused before evaluation: "
                    f"{rejected}. The call was not run"
                ),
                error=repr(rejected),
            )
        try:
            verdict = self.pep.enforce(action, ())
        except UnfulfilledObligationError as pending:
            return _Pending(action, pending.verdict, args, call_id)
        except PolicyDeniedError as denied:
            return _denied(action, call_id, denied.verdict, None, _reasons(denied.verdict))
        return self._settled(action, args, call_id, verdict, None)

    def _ask(self, pending: _Pending) -> Any:
        if self.approval is None:
            return ApprovalRequiredError(
                f"it needs an explicit approval of action {pending.action.digest} and no "
                f"approver is configured: pass {self.approval_hint}<a callable that returns "
                "ApprovalRecord(s) for the digest it is shown>",
                pending.verdict,
            )
        request = ApprovalRequest(pending.action, pending.verdict, pending.call_id)
        try:
            return self.approval(request)
        except ApprovalRequiredError as refused:
            return refused

    def _second(self, pending: _Pending, answer: Any) -> CallJudgement:
        action, call_id = pending.action, pending.call_id
        asked = action.digest if self.approval is not None else None
        if isinstance(answer, ApprovalRequiredError):
            why = str(answer) if self.approval is None else f"no approval: {answer}"
            return _denied(action, call_id, pending.verdict, asked, why)
        records = approval_records(answer)
        if not records:
            return _denied(
                action,
                call_id,
                pending.verdict,
                asked,
                f"it needs an explicit approval of action {action.digest} and the approver "
                "gave none",
            )
        try:
            verdict = self.pep.enforce(action, records)
        except UnfulfilledObligationError as still:
            return _denied(
                action,
                call_id,
                still.verdict,
                asked,
                f"the approval given does not authorise this exact action ({action.digest}): "
                + ("; ".join(still.verdict.reasons) or "it is for another action, stale, or used"),
            )
        except PolicyDeniedError as denied:
            return _denied(action, call_id, denied.verdict, asked, _reasons(denied.verdict))
        return self._settled(action, pending.arguments, call_id, verdict, asked)

    def _settled(
        self,
        action: Action,
        arguments: dict[str, Any],
        call_id: str | None,
        verdict: Verdict,
        asked: str | None,
    ) -> CallJudgement:
        if verdict.kind is VerdictKind.REPAIR:
            return _denied(
                action,
                call_id,
                verdict,
                asked,
                "the policy proposes a repaired call instead, which was not run: "
                f"{dict(verdict.repaired or {})!r}; make that call if it does what you need",
            )
        if not verdict.allowed:
            return _denied(action, call_id, verdict, asked, _reasons(verdict))
        return CallJudgement(
            tool=action.tool,
            allowed=True,
            arguments=MappingProxyType(_resolved(action, arguments)),
            call_id=call_id,
            verdict=verdict,
            action_digest=action.digest,
            approval_requested=asked,
        )

    def _failed(self, tool: Any, call_id: str | None, exc: Exception) -> CallJudgement:
        name = _safe_name(tool)
        with contextlib.suppress(Exception):  # refused either way; the PEP logs its failures
            self._audit_rejection(name, exc)
        return CallJudgement(
            tool=name,
            allowed=False,
            call_id=call_id,
            message=(
                f"jevqueue denied the call to {name!r}: the policy check could not complete "
                f"({type(exc).__name__}: {exc}). The call was not run"
            ),
            error=repr(exc),
        )

    def _keep(self, outcome: CallJudgement) -> CallJudgement:
        with self._lock:
            self.judgements.append(outcome)
        return outcome

    def _audit_rejection(self, name: str, error: BaseException) -> None:
        audit = getattr(self.pep, "audit_rejection", None)
        if callable(audit):
            audit(name, self.context, error)


def _denied(
    action: Action,
    call_id: str | None,
    verdict: Verdict | None,
    asked: str | None,
    why: str,
) -> CallJudgement:
    return CallJudgement(
        tool=action.tool,
        allowed=False,
        call_id=call_id,
        message=f"jevqueue denied the call to {action.tool!r}: {why}. The call was not run",
        verdict=verdict,
        action_digest=action.digest,
        approval_requested=asked,
    )


def _reasons(verdict: Verdict) -> str:
    return "; ".join(verdict.reasons) or "the policy did not allow it"


def _plain(arguments: Any) -> dict[str, Any]:
    if arguments is None:
        return {}
    if not isinstance(arguments, Mapping):
        raise ConfigurationError(
            f"tool arguments must be a mapping of names to values, not {type(arguments).__name__}"
        )
    # The policy judges a private copy: nothing a rule does to it can change what runs.
    return _copy(arguments)


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _copy(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A private copy, as ``copy.deepcopy`` makes it; flat arguments need only one level."""
    for value in arguments.values():
        if type(value) not in _SCALARS:
            return copy.deepcopy(dict(arguments))
    return dict(arguments)


def _resolved(action: Action, arguments: dict[str, Any]) -> dict[str, Any]:
    """What the tool runs with: the judged arguments, each path as the policy resolved it."""
    run = _copy(arguments)
    for name, target in zip(action.target_fields, action.targets, strict=False):
        run[name] = target
    spec = action.spec
    if spec is not None and spec.cwd_field is not None and action.cwd is not None:
        run[spec.cwd_field] = action.cwd
    return run


def _safe_name(tool: Any) -> str:
    try:
        return str(tool)
    except Exception:
        return "<unnamed tool>"


def _close(awaitable: Any) -> None:
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()
