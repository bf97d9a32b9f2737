"""The record of one governed turn: which path it took, and why."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from jevqueue.governor._path import Path

__all__ = ["Decision"]

_NO_SCORES: Mapping[str, float] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Decision:
    """What the governor decided for one turn, and what the effect cost.

    ``Governor.decide`` returns it; ``Governor.step`` records the final one, with the
    effect's timing and any failure, in ``governor.last``.

    Attributes:
        path: Which of the nine paths the turn took.
        tool: The chosen (forced or statically called) tool, if any. On ``clarify``,
            ``risk_stop`` and ``delegate`` it is the top-scored tool, for the record.
        scores: Every offered tool's score, highest first (read-only).
        directive: The text appended (to a copy of the messages) for ``generate``; ``""``
            on every other path and on the passthrough.
        reason: The risk reason (``risk_stop``), the question (``clarify``), or a note on
            why the turn went this way (``prose``, ``delegate``, a rejected static payload).
        error: ``repr`` of the failure on ``error_*`` paths, or of an error raised by the
            effect (for example :class:`~jevqueue.errors.ProviderDisobeyedError`).
        provider_calls: Provider calls the turn made (0 or 1).
        timings: Seconds spent, under ``"decide"`` and, once the effect ran, ``"effect"``.
        arguments: The ``static_tool`` payload that was sent, else ``None``.
        called: The tools the provider called, as read back: on ``tool`` and ``prose``
            always, on ``delegate`` when the governor has a recorder (the model's own
            choice, the label calibration learns from); ``None`` where nothing was read.
        proposed: In shadow mode, the path the governor would have taken (the turn
            itself delegated); ``None`` otherwise.
        routable: True when the turn was routed by the scores (the newest message is
            the user's and tools were offered): only such turns are calibration labels.
    """

    path: Path
    tool: str | None = None
    scores: Mapping[str, float] = field(default_factory=lambda: _NO_SCORES)
    directive: str = ""
    reason: str | None = None
    error: str | None = None
    provider_calls: int = 0
    timings: Mapping[str, float] = field(default_factory=lambda: _NO_SCORES)
    arguments: Mapping[str, Any] | None = None
    called: tuple[str, ...] | None = None
    proposed: Path | None = None
    routable: bool = False

    @property
    def candidates(self) -> list[tuple[str, float]]:
        """``(tool, score)`` pairs, highest score first."""
        return list(self.scores.items())

    @property
    def top(self) -> tuple[str, float] | None:
        """The highest-scored tool and its score, or ``None`` when no tool was offered."""
        for item in self.scores.items():
            return item
        return None

    def evolve(self, **changes: Any) -> Decision:
        """A copy with ``changes`` applied (the record itself never changes)."""
        return replace(self, **changes)
