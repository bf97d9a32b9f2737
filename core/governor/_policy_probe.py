"""Asks the policy layer, before a tool is forced, whether any call of it could run.

DESIGN.md's ``risk_stop`` "when the policy layer would deny the only plausible call": a
forced call that the PEP is certain to deny costs a provider call and ends in a denial
anyway. :class:`PolicyProbe` answers "certain to be denied" only where the answer cannot
depend on the arguments:

* the tool is not in the PDP's registry (the PEP refuses unregistered tools), or
* the tool has no path and no working-directory field, its schema accepts an empty
  argument object, and the PDP denies that call: nothing the model could write would
  change the facts the rules judged (the tool, its side effects, the context).

Anything else — a tool the policy denies only for some paths, say — is left to the PEP at
call time. The probe asks the PDP directly, so it writes no audit record (no call was
proposed), and remembers each tool's answer for the governor's lifetime.
"""

from __future__ import annotations

import threading
from typing import Any

from jevqueue.errors import ConfigurationError, UnregisteredToolError, UsageError

__all__ = ["PolicyProbe"]


class PolicyProbe:
    """The governor's question to the policy layer.

    Args:
        pep: A :class:`~jevqueue.policy.PolicyEnforcementPoint` whose PDP was built with a
            ``registry`` (``create_default_policy_decision_point(registry=...)``).
        context: The :class:`~jevqueue.policy.ExecutionContext` (or a mapping of its
            fields) the calls would run in.

    Raises:
        ConfigurationError: ``pep`` has no PDP, the PDP has no registry, or ``context`` is
            missing or invalid.
    """

    def __init__(self, pep: Any, context: Any) -> None:
        from jevqueue.policy._context import ExecutionContext

        pdp = getattr(pep, "pdp", None)
        if pdp is None or not callable(getattr(pdp, "evaluate", None)):
            raise ConfigurationError(
                f"pep must be a jevqueue.PolicyEnforcementPoint, got a {type(pep).__name__}"
            )
        registry = getattr(pdp, "registry", None)
        if registry is None:
            raise ConfigurationError(
                "the PEP's decision point has no tool registry, so the governor cannot tell "
                "which tools the policy knows: build it with "
                "create_default_policy_decision_point(registry=ToolRegistry(specs))"
            )
        if context is None:
            raise ConfigurationError(
                "Governor(pep=...) needs context=ExecutionContext(...): the policy judges a "
                "call in its context"
            )
        try:
            self._context = (
                context
                if isinstance(context, ExecutionContext)
                else ExecutionContext.coerce(context)
            )
        except UsageError as exc:
            raise ConfigurationError(f"Governor context is invalid: {exc}") from exc
        self._pdp = pdp
        self._registry = registry
        self._answers: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def certain_denial(self, tool: str) -> str | None:
        """The reason every call of ``tool`` would be denied, or ``None`` when one might run."""
        with self._lock:
            if tool in self._answers:
                return self._answers[tool]
        answer = self._probe(tool)
        with self._lock:
            self._answers[tool] = answer
        return answer

    def _probe(self, tool: str) -> str | None:
        from jevqueue.policy._action import Action
        from jevqueue.policy._verdict import VerdictKind

        try:
            spec = self._registry.get(tool)
        except UnregisteredToolError:
            return (
                f"I can't do that here: the tool `{tool}` is not registered with the policy "
                "layer, so any call of it would be refused."
            )
        if spec.path_fields or spec.cwd_field:
            return None
        try:
            action = Action.build(self._registry, tool, {}, self._context)
        except UsageError:  # the schema needs arguments: the verdict could depend on them
            return None
        try:
            verdict = self._pdp.evaluate(action)
        except Exception:  # the PEP fails closed at call time; here, no certainty
            return None
        if verdict.kind is not VerdictKind.DENY:
            return None
        reasons = "; ".join(verdict.reasons) or "the policy denies it"
        return f"I can't do that here: the policy denies every call of `{tool}` ({reasons})."
