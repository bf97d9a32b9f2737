"""A risk rule that consults an outside service: the demo's way to make a decision fail.

Teams freeze deployments around releases and holidays; a rule that stops a deploy during
a freeze must ask the calendar that knows. When that calendar is unreachable the rule
raises, the decision fails, and the governor's ``on_error`` setting decides what happens.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jevqueue.governor._messages import is_user_turn, newest_user_text
from jevqueue.governor._risk_rules import RiskRule

__all__ = ["ChangeFreezeCalendar", "change_freeze"]


@dataclass
class ChangeFreezeCalendar:
    """The environments frozen right now, as a remote calendar would report them.

    Attributes:
        frozen: Environments no deploy may reach at the moment.
        reachable: False simulates an outage: every lookup raises ``ConnectionError``.
    """

    frozen: set[str] = field(default_factory=set)
    reachable: bool = True

    def is_frozen(self, environment: str) -> bool:
        """Whether ``environment`` is frozen now.

        Raises:
            ConnectionError: The calendar is unreachable.
        """
        if not self.reachable:
            raise ConnectionError(
                "change-freeze calendar unreachable: GET /freezes timed out after 2.0 s"
            )
        return environment in self.frozen


def change_freeze(
    calendar: ChangeFreezeCalendar, *, deploy_tool: str = "deploy_release"
) -> RiskRule:
    """Stop a deploy the user asks for while the target environment is frozen.

    Args:
        calendar: Where the freezes are looked up.
        deploy_tool: The tool that deploys.

    Returns:
        A risk rule; it raises when the calendar cannot be reached.
    """

    def rule(
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        scores: Mapping[str, float],
    ) -> str | None:
        # Only a deploy the user asks for now; the steps after a tool result are the
        # model's own follow-up.
        top = next(iter(scores), None)
        if not is_user_turn(messages) or top != deploy_tool or scores[top] <= 0.0:
            return None
        text = newest_user_text(messages).lower()
        for environment in ("production", "staging"):
            if environment in text and calendar.is_frozen(environment):
                return (
                    f"{environment} is in a change freeze, so the deploy was not started. "
                    "Ask the release manager to lift the freeze, then ask again."
                )
        return None

    rule.__name__ = "change_freeze"
    return rule
