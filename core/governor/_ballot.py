"""The extension point that scores tools against the conversation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["Ballot"]


@runtime_checkable
class Ballot(Protocol):
    """Scores every offered tool against the conversation; one method to implement.

    Tool descriptions are the ballot: they are the choice criteria, verbatim. A ballot
    reads the conversation (oldest first, OpenAI message form) and the tools (either
    OpenAI shape, as the host returned them) and returns tool name to a score in
    ``[0, 1]``. A tool it leaves out scores 0. The governor turns the scores into a path
    with its :class:`~jevqueue.governor.Thresholds`; a name that is not an offered tool,
    or a score outside ``[0, 1]``, fails the decision.

    ``score`` runs on every turn: keep it cheap, and cache whatever depends only on the
    toolset (``tools`` is rebuilt by the host each turn, so cache by content, not identity).

    A ballot may carry the thresholds calibrated for its scores as a ``thresholds``
    attribute (a :class:`~jevqueue.governor.Thresholds`); a governor built with it and
    no thresholds of its own uses them. The shipped ballots all do.

    Example:
        >>> class KeywordBallot:
        ...     def score(self, messages, tools):
        ...         text = messages[-1]["content"].lower()
        ...         return {t["name"]: float(t["name"] in text) for t in tools}
    """

    def score(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> Mapping[str, float]:
        """Score each tool for the newest turn of ``messages``.

        Args:
            messages: The conversation, oldest first. Read it, never mutate it.
            tools: The tools offered this turn, in either OpenAI shape.

        Returns:
            Tool name to a score in ``[0, 1]``; missing tools score 0.
        """
        ...
