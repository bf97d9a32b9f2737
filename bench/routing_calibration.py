"""The calibration rule, the threshold rule and the measures of routing quality.

The calibration rule itself is the library's (``jevqueue.governor.fit_thresholds``, the
one ``jevqueue calibrate`` runs on a deployment's own records); this file adapts BFCL items
to it and measures the paths against their ground truth.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from bfcl_data import RoutingItem
from jevqueue.governor import Observation, Thresholds, fit_thresholds, wilson

LEAD_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Scored:
    """One item's ballot outcome, reduced to what the threshold rule reads."""

    item: RoutingItem
    top_tool: str | None
    top: float
    lead: float
    # Whether the top tool's required arguments look supplied (argument sufficiency).
    sufficient: bool = True


@dataclass(frozen=True)
class Routed:
    item: RoutingItem
    path: str
    tool: str | None


def scored_from(item: RoutingItem, scores: Mapping[str, float], sufficient: bool) -> Scored:
    ranked = sorted(scores.items(), key=lambda kv: kv[1], reverse=True)
    top_tool, top = ranked[0] if ranked else (None, 0.0)
    second = ranked[1][1] if len(ranked) > 1 else 0.0
    return Scored(item, top_tool, top, top - second, sufficient)


def rule(scored: Scored, thresholds: Thresholds, *, sufficiency: bool = False) -> Routed:
    """The governor's threshold rule (with argument sufficiency when asked)."""
    if scored.top_tool is not None and scored.top >= thresholds.confident:
        if scored.lead >= thresholds.margin - LEAD_TOLERANCE:
            if sufficiency and not scored.sufficient:
                return Routed(scored.item, "clarify", scored.top_tool)
            return Routed(scored.item, "tool", scored.top_tool)
        return Routed(scored.item, "clarify", None)
    if scored.top < thresholds.floor:
        return Routed(scored.item, "prose", None)
    return Routed(scored.item, "delegate", None)


@dataclass(frozen=True)
class Rate:
    hits: int
    total: int

    @property
    def value(self) -> float:
        return self.hits / self.total if self.total else float("nan")

    def interval(self) -> tuple[float, float]:
        return wilson(self.hits, self.total)

    def __str__(self) -> str:
        if not self.total:
            return "n/a"
        low, high = self.interval()
        return f"{self.value:.3f} [{low:.3f}, {high:.3f}] ({self.hits}/{self.total})"


@dataclass(frozen=True)
class Metrics:
    items: int
    coverage: Rate  # relevant turns forced
    precision: Rate  # forced relevant turns whose tool the ground truth calls
    no_call_forced: Rate  # no-call turns forced
    relevant_prose: Rate  # relevant turns sent to prose
    irrelevance_prose: Rate  # irrelevance items sent to prose
    no_call_prose: Rate  # no-call turns sent to prose
    missing_clarify: Rate  # miss_param no-call turns that took clarify
    missing_forced: Rate  # miss_param no-call turns that were forced
    paths: Mapping[str, int]


def missing_param_turn(item: RoutingItem) -> bool:
    """A multi_turn_miss_param turn whose ground truth asks for the missing argument."""
    return item.category == "multi_turn_miss_param" and not item.relevant


def metrics(routed: Iterable[Routed]) -> Metrics:
    rows = list(routed)
    relevant = [r for r in rows if r.item.relevant]
    forced_relevant = [r for r in relevant if r.path == "tool"]
    no_call = [r for r in rows if not r.item.relevant]
    irrelevance = [r for r in rows if r.item.category == "irrelevance"]
    missing = [r for r in rows if missing_param_turn(r.item)]
    return Metrics(
        items=len(rows),
        coverage=Rate(len(forced_relevant), len(relevant)),
        precision=Rate(
            sum(r.tool in r.item.expected for r in forced_relevant), len(forced_relevant)
        ),
        no_call_forced=Rate(sum(r.path == "tool" for r in no_call), len(no_call)),
        relevant_prose=Rate(sum(r.path == "prose" for r in relevant), len(relevant)),
        irrelevance_prose=Rate(sum(r.path == "prose" for r in irrelevance), len(irrelevance)),
        no_call_prose=Rate(sum(r.path == "prose" for r in no_call), len(no_call)),
        missing_clarify=Rate(sum(r.path == "clarify" for r in missing), len(missing)),
        missing_forced=Rate(sum(r.path == "tool" for r in missing), len(missing)),
        paths=dict(Counter(r.path for r in rows)),
    )


def _grid(step: float) -> list[float]:
    return [round(i * step, 6) for i in range(round(1 / step) + 1)]


def observation(s: Scored) -> Observation:
    return Observation(s.top_tool, s.top, s.lead, s.item.expected, s.sufficient)


def calibrate(
    scored: Sequence[Scored],
    *,
    precision: float,
    no_call_cap: float,
    prose_budget: float,
    sufficiency: bool = False,
) -> Thresholds:
    """The thresholds :func:`jevqueue.governor.fit_thresholds` picks on ``scored``."""
    return fit_thresholds(
        (observation(s) for s in scored),
        precision=precision,
        no_call_cap=no_call_cap,
        prose_budget=prose_budget,
        sufficiency=sufficiency,
    ).thresholds


def curve(
    scored: Sequence[Scored], margin: float, *, sufficiency: bool = False
) -> list[tuple[float, float, float]]:
    """(confident, coverage, precision among relevant) as ``confident`` sweeps 1 -> 0."""
    points = []
    for confident in reversed(_grid(0.01)):
        t = Thresholds(confident=confident, margin=margin, floor=0.0)
        m = metrics(rule(s, t, sufficiency=sufficiency) for s in scored)
        if m.precision.total:
            points.append((confident, m.coverage.value, m.precision.value))
    return points
