"""The PEP in front of every Hermes tool call: a ``pre_tool_call`` hook and an execution gate.

:class:`PolicyGuard` has two callbacks that work as a pair:

* :meth:`PolicyGuard.pre_tool_call` — Hermes' ``pre_tool_call`` hook, called before each
  tool call with its name and arguments. It builds the canonical
  :class:`~jevqueue.policy.Action` (an unregistered tool or non-canonical arguments is
  refused before evaluation), asks the PEP (audited), and answers
  ``{"action": "block", "message": ...}`` for a denial — the message is the tool result
  the model reads — or ``None`` to let the call through. A call that needs an explicit
  approval goes to the approval callback, which returns
  :class:`~jevqueue.ApprovalRecord` s bound to the action digest (or none: blocked). The
  allowed call's judged arguments are kept, keyed by its tool-call id.
* :meth:`PolicyGuard.tool_execution` — Hermes' ``tool_execution`` middleware, which wraps
  the tool itself. It runs the call only if the hook allowed exactly this call (same id,
  same name, same arguments), hands the tool a private copy of the judged arguments, and
  forgets the judgement, so each allowed call runs at most once. A call the hook never
  judged is refused.

Hermes swallows exceptions raised by hooks and middleware and then runs the tool anyway
(fail-open), so neither callback ever raises: any failure inside a check is a block.
Hermes' own human-approval gate (``{"action": "approve"}``) answers once / session /
always, which binds to no action digest; the guard does not use it.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jevqueue.approvals import ApprovalRecord
from jevqueue.errors import (
    ConfigurationError,
    JevError,
    PolicyDeniedError,
    UnfulfilledObligationError,
)
from jevqueue.policy import (
    Action,
    ExecutionContext,
    ToolSpec,
    Verdict,
    VerdictKind,
    registry_from_specs,
)

__all__ = ["ApprovalCallback", "ApprovalRequest", "GuardOutcome", "PolicyGuard"]


@dataclass(frozen=True)
class ApprovalRequest:
    """What the approver is shown: the canonical action, its digest and the verdict."""

    action: Action
    verdict: Verdict

    @property
    def action_digest(self) -> str:
        """The digest an approval record must be bound to."""
        return self.action.digest


ApprovalCallback = Callable[[ApprovalRequest], "ApprovalRecord | Iterable[ApprovalRecord] | None"]
"""Asked for a call that needs an explicit approval; returns records, or ``None`` to refuse."""


@dataclass(frozen=True)
class GuardOutcome:
    """What the guard decided for one call.

    Attributes:
        tool: The tool called.
        tool_call_id: The call's id.
        allowed: True when the call may run.
        message: The text the model sees instead of a result; ``""`` when allowed.
        action_digest: The action's digest, when the action could be built.
        approval_requested: The digest shown to the approver, if one was asked.
    """

    tool: str
    tool_call_id: str
    allowed: bool
    message: str = ""
    action_digest: str | None = None
    approval_requested: str | None = None


def _refusal_text(tool: str, why: str) -> str:
    return f"jevqueue denied the call to {tool!r}: {why}; the call was not run"


class PolicyGuard:
    """Judges every tool call of a Hermes agent with the PEP before it runs.

    Args:
        pep: The policy enforcement point (it audits every decision).
        specs: One declaration per tool (:func:`~jevqueue.plugins.hermes.tool_spec`).
        context: The execution context; validated now.
        approvals: Who approves calls that need an explicit approval. ``None`` refuses
            them, with a message naming the digest to approve.
        session_id: Judge only this Hermes session's calls; calls of every other session,
            a subagent's included, then run unjudged, so set it only when another guard
            covers them. ``None`` (the default) judges every call in the process.

    Attributes:
        outcomes: Every outcome, oldest first.

    Raises:
        ConfigurationError: ``pep`` has no ``enforce`` method, or a spec is not a ToolSpec.
        InvalidContextError: ``context`` is incomplete or ambient.
    """

    def __init__(
        self,
        *,
        pep: Any,
        specs: Iterable[ToolSpec],
        context: ExecutionContext | Mapping[str, Any],
        approvals: ApprovalCallback | None = None,
        session_id: str | None = None,
    ) -> None:
        if not callable(getattr(pep, "enforce", None)):
            raise ConfigurationError(
                "PolicyGuard needs a PolicyEnforcementPoint (an object with enforce(action, "
                f"approval_records)); got {type(pep).__name__}"
            )
        self.pep = pep
        self.registry = registry_from_specs(specs, owner=type(self).__name__)
        self.context = ExecutionContext.coerce(context)
        self.approvals = approvals
        self.session_id = session_id
        self.outcomes: list[GuardOutcome] = []
        self._judged: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def _mine(self, session_id: str) -> bool:
        return self.session_id is None or session_id == self.session_id

    # --- the hook -------------------------------------------------------------------

    def pre_tool_call(
        self,
        *,
        tool_name: str,
        args: Any,
        session_id: str = "",
        tool_call_id: str = "",
        **_: Any,
    ) -> dict[str, str] | None:
        """The ``pre_tool_call`` hook: ``None`` lets the call through, a dict blocks it."""
        if not self._mine(session_id):
            return None
        try:
            outcome, judged = self._check(str(tool_name), args, str(tool_call_id))
        except Exception as exc:  # fail closed: a failed check is a block
            outcome, judged = (
                GuardOutcome(
                    tool=str(tool_name),
                    tool_call_id=str(tool_call_id),
                    allowed=False,
                    message=_refusal_text(
                        str(tool_name),
                        f"the policy check could not complete ({type(exc).__name__}: {exc})",
                    ),
                ),
                None,
            )
        with self._lock:
            self.outcomes.append(outcome)
            if outcome.allowed and judged is not None:
                self._judged[(session_id, str(tool_call_id))] = (str(tool_name), judged)
        if outcome.allowed:
            return None
        return {"action": "block", "message": outcome.message}

    def _check(
        self, tool: str, args: Any, call_id: str
    ) -> tuple[GuardOutcome, dict[str, Any] | None]:
        if not isinstance(args, Mapping):
            raise ConfigurationError(f"tool arguments must be an object, not {type(args).__name__}")
        judged = copy.deepcopy(dict(args))
        try:
            action = Action.build(self.registry, tool, judged, self.context)
        except JevError as rejected:
            audit = getattr(self.pep, "audit_rejection", None)
            if callable(audit):
                audit(tool, self.context, rejected)
            why = f"it was refused before evaluation: {rejected}"
            return self._no(tool, call_id, why), None
        asked: str | None = None
        try:
            try:
                verdict = self.pep.enforce(action, ())
            except UnfulfilledObligationError as pending:
                asked = action.digest
                records = self._ask(ApprovalRequest(action, pending.verdict))
                if not records:
                    why = (
                        f"it needs an explicit approval of action {action.digest} and none "
                        "was given"
                    )
                    return self._no(tool, call_id, why, action.digest, asked), None
                verdict = self.pep.enforce(action, records)
        except UnfulfilledObligationError as still:
            why = "the approval given does not authorise this exact action " + (
                f"({action.digest}): " + ("; ".join(still.verdict.reasons) or "no match")
            )
            return self._no(tool, call_id, why, action.digest, asked), None
        except PolicyDeniedError as denied:
            why = "; ".join(denied.verdict.reasons) or "the policy denied it"
            return self._no(tool, call_id, why, action.digest, asked), None
        if verdict.kind is VerdictKind.REPAIR:
            why = (
                "the policy proposes a repaired call instead, which was not run: "
                f"{dict(verdict.repaired or {})!r}; resubmit it if it does what you need"
            )
            return self._no(tool, call_id, why, action.digest, asked), None
        if not verdict.allowed:
            why = "; ".join(verdict.reasons) or "the policy did not allow it"
            return self._no(tool, call_id, why, action.digest, asked), None
        outcome = GuardOutcome(
            tool=tool,
            tool_call_id=call_id,
            allowed=True,
            action_digest=action.digest,
            approval_requested=asked,
        )
        return outcome, copy.deepcopy(dict(action.arguments))

    def _ask(self, request: ApprovalRequest) -> Sequence[ApprovalRecord]:
        if self.approvals is None:
            return ()
        answer = self.approvals(request)
        if answer is None:
            return ()
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

    @staticmethod
    def _no(
        tool: str,
        call_id: str,
        why: str,
        digest: str | None = None,
        asked: str | None = None,
    ) -> GuardOutcome:
        return GuardOutcome(
            tool=tool,
            tool_call_id=call_id,
            allowed=False,
            message=_refusal_text(tool, why),
            action_digest=digest,
            approval_requested=asked,
        )

    # --- the execution gate ------------------------------------------------------------

    def tool_execution(
        self,
        *,
        tool_name: str,
        args: Any,
        next_call: Callable[[dict[str, Any]], Any],
        session_id: str = "",
        tool_call_id: str = "",
        **_: Any,
    ) -> Any:
        """The ``tool_execution`` middleware: run only what the hook allowed, as judged."""
        if not self._mine(session_id):
            return next_call(args)
        with self._lock:
            judged = self._judged.pop((session_id, str(tool_call_id)), None)
        if judged is None or judged[0] != tool_name or not _same(judged[1], args):
            return json.dumps(
                {
                    "error": _refusal_text(
                        str(tool_name),
                        "it was not the call the policy judged (unjudged, changed since, or "
                        "already run)",
                    )
                }
            )
        return next_call(copy.deepcopy(judged[1]))


def _same(judged: Mapping[str, Any], args: Any) -> bool:
    try:
        return json.dumps(judged, sort_keys=True) == json.dumps(args, sort_keys=True)
    except (TypeError, ValueError):
        return False
