"""The rule: one small judgement about an action.

The default rules and the rules loaded from policy files are all :class:`Rule`\\ s. A
rule has a stable ``rule_id`` and one method, :meth:`Rule.evaluate`, which returns a
:class:`~jevqueue.policy.Verdict` or ``None`` for "no opinion". The policy decision point
combines the opinions (DENY wins; see :mod:`jevqueue.policy._pdp`). A rule that raises makes the
decision a DENY: rules fail closed.

A rule reads the action's registry facts (``side_effects``, ``targets``, ``cwd``,
``spec``) and its context. It must not trust what the arguments say *about* the call
(a ``"SafeToAutoRun": true`` or ``"is_harmless": true`` is the agent's claim, not a fact).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.policy._action import Action
    from jevqueue.policy._verdict import Verdict

__all__ = ["FunctionRule", "Rule"]


@runtime_checkable
class Rule(Protocol):
    """A judgement about one action.

    Implement ``rule_id`` (a stable, dotted identifier such as
    ``"acme.no_friday_deploys"``; it appears in verdicts, audit records and the policy
    revision) and :meth:`evaluate`.
    """

    @property
    def rule_id(self) -> str:
        """The rule's stable identifier (a plain class attribute satisfies this)."""
        ...

    def evaluate(self, action: Action) -> Verdict | None:
        """Return a verdict about ``action``, or ``None`` to express no opinion.

        Reasons must not echo argument values: name the field and the category.
        """
        ...


@dataclass(frozen=True)
class FunctionRule:
    """A rule made from a plain function.

    Example::

        def no_prod_writes(action):
            if action.context.environment == "prod" and "file_write" in action.side_effects:
                return Verdict.deny("writes are not allowed in prod")
            return None

        rule = FunctionRule("acme.no_prod_writes", no_prod_writes)
    """

    rule_id: str
    function: Callable[[Action], Verdict | None]

    def evaluate(self, action: Action) -> Verdict | None:
        """Call the function."""
        return self.function(action)
