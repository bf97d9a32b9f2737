"""The generic adapter: a native tool call in, a boolean (or a typed error) out."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jevqueue.errors import ConfigurationError, UsageError
from jevqueue.policy._action import Action
from jevqueue.policy._pep import PolicyEnforcementPoint, _signal
from jevqueue.policy._registry import ToolRegistry, generic_registry

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.policy._context import ExecutionContext
    from jevqueue.policy._verdict import Verdict

__all__ = ["GenericAdapter"]

# This thread's latest (action, verdict); one attribute, so each update is one write.
_NO_STATE: tuple[None, None] = (None, None)


class GenericAdapter:
    """Judges native tool calls with a PEP, against a fail-closed registry.

    Args:
        pep: the policy enforcement point.
        registry: the tools this adapter accepts; defaults to
            :func:`jevqueue.policy.generic_registry` (``write_to_file``, ``run_command``).

    Example::

        adapter = GenericAdapter(PolicyEnforcementPoint(create_default_policy_decision_point()))
        if adapter.intercept_tool_call("write_to_file", arguments, context):
            run_the_tool()
    """

    def __init__(
        self, pep: PolicyEnforcementPoint, *, registry: ToolRegistry | None = None
    ) -> None:
        if not isinstance(pep, PolicyEnforcementPoint):
            # Not merely "has enforce()": refusals are audited through the PEP's
            # audit_rejection, and a look-alike without it would fail on bad input.
            raise ConfigurationError(
                f"pep must be a jevqueue PolicyEnforcementPoint, not {type(pep).__name__}: "
                "build one with PolicyEnforcementPoint(create_default_policy_decision_point())"
            )
        if registry is not None and not isinstance(registry, ToolRegistry):
            raise ConfigurationError(
                f"registry must be a ToolRegistry, not {type(registry).__name__}"
            )
        self.pep = pep
        self.registry = registry if registry is not None else generic_registry()
        self._local = threading.local()

    @property
    def last_verdict(self) -> Verdict | None:
        """The verdict of this thread's latest call (the repaired proposal lives here)."""
        state: tuple[Action | None, Verdict | None] = getattr(self._local, "state", _NO_STATE)
        return state[1]

    @property
    def last_action(self) -> Action | None:
        """The action of this thread's latest call that got past validation."""
        state: tuple[Action | None, Verdict | None] = getattr(self._local, "state", _NO_STATE)
        return state[0]

    def build_action(
        self,
        tool_name: str,
        arguments: Mapping[str, Any],
        context: ExecutionContext | Mapping[str, Any],
    ) -> Action:
        """Validate the call and return its canonical action; input errors are audited.

        Raises:
            UsageError: the context, tool name or arguments are invalid (a typed subclass).
        """
        try:
            action = Action.build(self.registry, tool_name, arguments, context)
        except BaseException as error:
            self._local.state = _NO_STATE
            if isinstance(error, UsageError):
                self.pep.audit_rejection(tool_name, context, error)
            raise
        # One thread-local write: this thread's action, and no verdict yet.
        self._local.state = (action, None)
        return action

    def intercept_tool_call(
        self,
        tool_name: str,
        arguments: Mapping[str, Any],
        context: ExecutionContext | Mapping[str, Any],
        approval_records: Sequence[Any] = (),
    ) -> bool:
        """Judge one call; True means it may run now.

        Args:
            tool_name: the exact tool name.
            arguments: the tool's arguments (canonical JSON values only).
            context: an ExecutionContext or a mapping with ``task_id``, ``actor_id``,
                ``workspace``, ``git_sha`` and optionally ``environment``.
            approval_records: ApprovalRecords for an ``explicit_approval`` obligation.

        Returns:
            True for ALLOW or a fulfilled ALLOW_WITH_OBLIGATIONS. False for REPAIR: resubmit
            ``adapter.last_verdict.repaired``.

        Raises:
            PolicyDeniedError: the policy denied the call.
            UnfulfilledObligationError: an obligation is unmet; ``.verdict.action_digest``
                is what to approve.
            UsageError: the context, tool name or arguments are invalid (typed subclass).
        """
        action = self.build_action(tool_name, arguments, context)
        pep = self.pep
        if type(pep) is PolicyEnforcementPoint and "enforce" not in pep.__dict__:
            # PolicyEnforcementPoint.enforce, unrolled: the verdict is kept before the
            # error is raised, so the error leaves through one frame fewer.
            verdict, audit_error = pep._decide(action, approval_records)
            self._local.state = (action, verdict)
            signal = _signal(action, verdict)
            if signal is not None:
                raise signal from audit_error
            return verdict.allowed
        try:
            verdict = pep.enforce(action, approval_records)
        except Exception as error:
            self._local.state = (action, getattr(error, "verdict", None))
            raise
        self._local.state = (action, verdict)
        return verdict.allowed

    def check(
        self,
        tool_name: str,
        arguments: Mapping[str, Any],
        context: ExecutionContext | Mapping[str, Any],
        approval_records: Sequence[Any] = (),
    ) -> Verdict:
        """Judge one call and return the verdict instead of raising for policy outcomes.

        The call may run only if ``verdict.allowed``. A fulfilled approval is consumed
        here, exactly as in :meth:`intercept_tool_call`.

        Raises:
            UsageError: the context, tool name or arguments are invalid (typed subclass).
        """
        action = self.build_action(tool_name, arguments, context)
        verdict = self.pep.evaluate(action, approval_records)
        self._local.state = (action, verdict)
        return verdict
