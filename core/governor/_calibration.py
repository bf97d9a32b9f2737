"""Fit :class:`~jevqueue.governor.Thresholds` to labelled turns, with honest intervals.

A labelled turn (:class:`Observation`) is what the ballot said — the top tool, its score,
its lead over the runner-up — and which tools the turn really needed: the ground truth of
a benchmark, or, on a deployment's own traffic, the tools the model called on a turn the
governor delegated (``jevqueue calibrate``).

The rule maximises **coverage** (the share of turns that needed a tool which get forced)
subject to

* **precision among relevant turns** at least ``precision``: of the forced turns that
  needed a tool, the share whose forced tool is one it needed;
* **no-call turns forced** at most ``no_call_cap``: the share of turns that needed no tool
  which get forced anyway.

Pooled precision (forced-and-right over all forced) is not used: it moves with however
many no-call turns a data set happens to hold, so thresholds fitted to it do not transfer.
Then the ``floor`` is the highest one whose share of relevant turns sent to ``prose`` stays
within ``prose_budget`` at the upper end of its 95% Wilson interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from jevqueue.errors import UsageError
from jevqueue.governor._thresholds import Thresholds

__all__ = ["Fit", "Observation", "coverage_curve", "fit_thresholds", "wilson"]

# Leads are float differences; the governor counts a lead within this of the margin.
_LEAD_TOLERANCE = 1e-9
_FLOOR_STEP = 0.0005


def wilson(hits: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of ``hits / total`` (95% by default); (0, 1) when empty."""
    if total <= 0:
        return (0.0, 1.0)
    share = hits / total
    centre = share + z * z / (2 * total)
    spread = z * math.sqrt(share * (1 - share) / total + z * z / (4 * total * total))
    denominator = 1 + z * z / total
    return (max(0.0, (centre - spread) / denominator), min(1.0, (centre + spread) / denominator))


@dataclass(frozen=True)
class Observation:
    """One labelled turn.

    Attributes:
        top_tool: The ballot's highest-scored tool (``None`` when no tool was offered).
        top: Its score.
        lead: Its lead over the runner-up (the whole of ``top`` for a single tool).
        needed: The tools the turn needed; empty when it needed none.
        sufficient: Whether the top tool's required arguments looked supplied.
    """

    top_tool: str | None
    top: float
    lead: float
    needed: frozenset[str]
    sufficient: bool = True

    @property
    def relevant(self) -> bool:
        """True when the turn needed a tool."""
        return bool(self.needed)


@dataclass(frozen=True)
class Fit:
    """Fitted thresholds and what they do on the turns they were fitted to.

    Attributes:
        thresholds: The thresholds.
        relevant: Turns that needed a tool; ``no_call``: turns that needed none.
        forced_relevant: Relevant turns forced; ``correct``: of those, with a needed tool.
        forced_no_call: No-call turns forced.
        prosed_relevant: Relevant turns the floor sends to prose.
    """

    thresholds: Thresholds
    relevant: int
    no_call: int
    forced_relevant: int
    correct: int
    forced_no_call: int
    prosed_relevant: int

    @property
    def coverage(self) -> float:
        """Share of relevant turns forced."""
        return self.forced_relevant / self.relevant if self.relevant else 0.0

    @property
    def precision(self) -> float:
        """Share of forced relevant turns whose tool was needed."""
        return self.correct / self.forced_relevant if self.forced_relevant else float("nan")

    def summary(self) -> str:
        """Each figure with its 95% Wilson interval, one per line."""

        def line(label: str, hits: int, total: int) -> str:
            low, high = wilson(hits, total)
            share = hits / total if total else float("nan")
            return f"{label:<28}{share:6.3f}  [{low:.3f}, {high:.3f}]  ({hits}/{total})"

        return "\n".join(
            [
                line("coverage", self.forced_relevant, self.relevant),
                line("precision (relevant turns)", self.correct, self.forced_relevant),
                line("no-call turns forced", self.forced_no_call, self.no_call),
                line("relevant turns to prose", self.prosed_relevant, self.relevant),
            ]
        )


def _grid(step: float) -> list[float]:
    return [round(i * step, 6) for i in range(round(1 / step) + 1)]


def fit_thresholds(
    observations: Iterable[Observation],
    *,
    precision: float = 0.99,
    no_call_cap: float = 0.02,
    prose_budget: float = 0.02,
    sufficiency: bool = False,
    step: float = 0.01,
) -> Fit:
    """The highest-coverage thresholds that meet ``precision`` and ``no_call_cap``.

    Args:
        observations: The labelled turns.
        precision: The least precision among relevant turns.
        no_call_cap: The largest share of no-call turns that may be forced.
        prose_budget: The largest share of relevant turns the floor may send to prose, at
            the upper end of its 95% Wilson interval.
        sufficiency: Whether the governor checks argument sufficiency (a turn whose top
            tool lacks a required argument is then never forced).
        step: The grid step of ``confident`` and ``margin``.

    Returns:
        The fit. Ties prefer the higher ``confident``, then the larger ``margin``.

    Raises:
        UsageError: No turn needed a tool, or no thresholds meet the constraints.
    """
    turns: Sequence[Observation] = list(observations)
    relevant = sum(o.relevant for o in turns)
    no_call = len(turns) - relevant
    if not relevant:
        raise UsageError(
            "no observation needed a tool, so precision cannot be measured: record more "
            "turns (delegated turns on which the model called a tool are the labels)"
        )
    for name, value in (("precision", precision), ("no_call_cap", no_call_cap)):
        if not 0.0 <= value <= 1.0:
            raise UsageError(f"{name} must lie in [0, 1], got {value!r}")
    grid = _grid(step)
    best: tuple[float, float, float, int, int, int] | None = None
    for margin in grid[1:]:  # a margin of 0 would force one of two exactly tied tools
        eligible = sorted(
            (
                o
                for o in turns
                if o.top_tool is not None
                and o.lead >= margin - _LEAD_TOLERANCE
                and (o.sufficient or not sufficiency)
            ),
            key=lambda o: o.top,
            reverse=True,
        )
        forced = correct = forced_no_call = position = 0
        for confident in reversed(grid):
            while position < len(eligible) and eligible[position].top >= confident:
                o = eligible[position]
                if o.relevant:
                    forced += 1
                    correct += o.top_tool in o.needed
                else:
                    forced_no_call += 1
                position += 1
            if forced == 0 or correct / forced < precision:
                continue
            if no_call and forced_no_call / no_call > no_call_cap:
                continue
            key = (forced / relevant, confident, margin, forced, correct, forced_no_call)
            if best is None or key[:3] > best[:3]:
                best = key
    if best is None:
        raise UsageError(
            f"no thresholds reach a precision of {precision} among relevant turns with at most "
            f"{no_call_cap:.1%} of no-call turns forced: lower --target-precision, raise the "
            "cap, or record more turns"
        )
    _, confident, margin, forced, correct, forced_no_call = best
    floor = 0.0
    prosed_at_floor = 0
    fine = [round(i * _FLOOR_STEP, 6) for i in range(1, round(0.05 / _FLOOR_STEP))]
    for candidate in sorted({*fine, *grid}):
        if candidate > confident:
            break
        prosed = sum(o.relevant and o.top < candidate for o in turns)
        if wilson(prosed, relevant)[1] <= prose_budget:
            floor, prosed_at_floor = candidate, prosed
    return Fit(
        thresholds=Thresholds(confident=confident, margin=margin, floor=floor),
        relevant=relevant,
        no_call=no_call,
        forced_relevant=forced,
        correct=correct,
        forced_no_call=forced_no_call,
        prosed_relevant=prosed_at_floor,
    )


def coverage_curve(
    observations: Iterable[Observation], margin: float, *, step: float = 0.01
) -> list[tuple[float, float, float]]:
    """``(confident, coverage, precision among relevant turns)`` as ``confident`` falls.

    Points where nothing relevant is forced are left out.
    """
    turns = list(observations)
    relevant = sum(o.relevant for o in turns)
    points = []
    for confident in reversed(_grid(step)):
        forced = [
            o
            for o in turns
            if o.relevant
            and o.top_tool is not None
            and o.top >= confident
            and o.lead >= margin - _LEAD_TOLERANCE
        ]
        if forced and relevant:
            correct = sum(o.top_tool in o.needed for o in forced)
            points.append((confident, len(forced) / relevant, correct / len(forced)))
    return points
