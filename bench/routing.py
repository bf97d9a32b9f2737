"""Routing quality of the governor on the Berkeley Function Calling Leaderboard data.

Every user turn of the bfcl categories ``simple_python``, ``multiple``,
``parallel_multiple``, ``irrelevance`` and ``multi_turn_*`` (see ``bench/bfcl_data.py``;
the ``live_*`` categories are never read) is routed, and the paths are compared with the
ground truth:

* coverage: the share of relevant turns (the ground truth calls a tool) routed to ``tool``;
* precision: the share of forced routes whose tool the ground truth calls on that turn
  (``strict``: the tool is the turn's *first* call);
* irrelevance to prose: the share of ``irrelevance`` items that took ``prose``;
* relevant to prose: the share of relevant turns wrongly sent to ``prose``.

``--calibrate`` searches the thresholds on one half of the scenarios (a stable hash of the
item, multi-turn scenarios kept whole across their categories) and reports the other half:
the highest coverage with a forced-route precision of at least ``--precision`` (0.99),
then the highest ``floor`` that sends at most ``--prose-budget`` (1%) of relevant turns to
prose (at the upper end of the share's 95% Wilson interval). Without it, the shipped
default thresholds are measured.

Run::

    .venv/bin/python bench/routing.py              # defaults, every split, via Governor.decide
    .venv/bin/python bench/routing.py --calibrate  # grid search on "calibrate", report "heldout"
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bfcl_data
from bfcl_data import RoutingItem
from jevqueue.governor import LexicalBallot, Thresholds

# The governor counts a lead within this of the margin as reaching it (float differences).
LEAD_TOLERANCE = 1e-9
# The floor is searched in steps of this below 0.05, in the main grid's steps above.
FLOOR_STEP = 0.0005


@dataclass(frozen=True)
class Scored:
    """One item's ballot outcome, reduced to what the threshold rule reads."""

    item: RoutingItem
    top_tool: str | None
    top: float
    lead: float


@dataclass(frozen=True)
class Routed:
    item: RoutingItem
    path: str
    tool: str | None


def score_items(items: Sequence[RoutingItem], ballot: LexicalBallot) -> list[Scored]:
    """Score every item once; the threshold rule can then be replayed for any thresholds."""
    out: list[Scored] = []
    for item in items:
        scores = ballot.score(item.messages, item.tools)
        ranked = sorted(scores.items(), key=lambda kv: kv[1], reverse=True)
        top_tool, top = ranked[0] if ranked else (None, 0.0)
        second = ranked[1][1] if len(ranked) > 1 else 0.0
        out.append(Scored(item, top_tool, top, top - second))
    return out


def rule(scored: Scored, thresholds: Thresholds) -> Routed:
    """The governor's threshold rule (DESIGN.md, "Public names the contract fixes")."""
    if scored.top_tool is not None and scored.top >= thresholds.confident:
        if scored.lead >= thresholds.margin - LEAD_TOLERANCE:
            return Routed(scored.item, "tool", scored.top_tool)
        return Routed(scored.item, "clarify", None)
    if scored.top < thresholds.floor:
        return Routed(scored.item, "prose", None)
    return Routed(scored.item, "delegate", None)


@dataclass(frozen=True)
class Metrics:
    items: int
    relevant: int
    forced: int
    coverage: float
    precision: float
    strict_precision: float
    irrelevance_prose: float
    relevant_prose: float
    no_call_forced: float
    paths: Mapping[str, int]


def _share(part: int, whole: int) -> float:
    return part / whole if whole else float("nan")


def metrics(routed: Iterable[Routed]) -> Metrics:
    rows = list(routed)
    relevant = [r for r in rows if r.item.relevant]
    forced = [r for r in rows if r.path == "tool"]
    irrelevance = [r for r in rows if r.item.category == "irrelevance"]
    no_call = [r for r in rows if not r.item.relevant]
    return Metrics(
        items=len(rows),
        relevant=len(relevant),
        forced=len(forced),
        coverage=_share(sum(r.path == "tool" for r in relevant), len(relevant)),
        precision=_share(sum(r.tool in r.item.expected for r in forced), len(forced)),
        strict_precision=_share(sum(r.tool == r.item.first_expected for r in forced), len(forced)),
        irrelevance_prose=_share(sum(r.path == "prose" for r in irrelevance), len(irrelevance)),
        relevant_prose=_share(sum(r.path == "prose" for r in relevant), len(relevant)),
        no_call_forced=_share(sum(r.path == "tool" for r in no_call), len(no_call)),
        paths=dict(Counter(r.path for r in rows)),
    )


def calibrate(
    scored: Sequence[Scored], *, precision: float, prose_budget: float, step: float = 0.01
) -> tuple[Thresholds, float, float]:
    """Highest-coverage (confident, margin) with precision >= ``precision``, then the floor.

    Returns:
        The thresholds, and their coverage and precision on ``scored``.
    """
    grid = [round(i * step, 6) for i in range(round(1 / step) + 1)]
    relevant = sum(s.item.relevant for s in scored)
    best: tuple[float, float, float, float, float] | None = None  # coverage, prec, -c, c, m
    # A margin of 0 would force one of two tools that tie exactly: require a lead.
    for margin in grid[1:]:
        eligible = sorted(
            (s for s in scored if s.top_tool is not None and s.lead >= margin - LEAD_TOLERANCE),
            key=lambda s: s.top,
            reverse=True,
        )
        forced = hits = covered = 0
        position = 0
        # Sweep `confident` downwards: an item is forced once confident <= its top score.
        for confident in reversed(grid):
            while position < len(eligible) and eligible[position].top >= confident:
                s = eligible[position]
                forced += 1
                hits += s.top_tool in s.item.expected
                covered += s.item.relevant
                position += 1
            if forced == 0 or hits / forced < precision:
                continue
            coverage = covered / relevant if relevant else 0.0
            # Ties: prefer the more cautious (higher) confident, then the larger margin.
            key = (coverage, hits / forced, confident, margin)
            if best is None or key > best[:4]:
                best = (coverage, hits / forced, confident, margin, 0.0)
    if best is None:
        raise SystemExit(f"no thresholds reach a forced-route precision of {precision}")
    coverage, prec, confident, margin, _ = best
    # The floor: the highest one whose share of wrongly-prosed relevant turns stays within
    # budget even at the upper end of its 95 % confidence interval (the point estimate
    # alone, chosen at the edge of the budget, overshoots it on unseen turns). Low scores
    # are finely grained (an earlier message lifts a score to at most 0.05), so the grid
    # is finer there.
    floor = 0.0
    fine = [round(i * FLOOR_STEP, 6) for i in range(1, round(0.05 / FLOOR_STEP))]
    for candidate in sorted({*fine, *grid}):
        if candidate > confident:
            break
        prosed = sum(s.item.relevant and s.top < candidate for s in scored)
        if relevant and wilson_upper(prosed, relevant) <= prose_budget:
            floor = candidate
    return Thresholds(confident=confident, margin=margin, floor=floor), coverage, prec


def wilson_upper(hits: int, total: int, z: float = 1.96) -> float:
    """The upper end of the Wilson score interval of ``hits / total`` (95 % by default)."""
    if total == 0:
        return 1.0
    share = hits / total
    centre = share + z * z / (2 * total)
    spread = z * math.sqrt(share * (1 - share) / total + z * z / (4 * total * total))
    return (centre + spread) / (1 + z * z / total)


def floor_table(scored: Sequence[Scored], floors: Sequence[float]) -> None:
    """What each floor would send to prose: irrelevance items and relevant turns."""
    relevant = [s for s in scored if s.item.relevant]
    irrelevance = [s for s in scored if s.item.category == "irrelevance"]
    print("\nfloor   irrelevance>prose   relevant>prose")
    for floor in floors:
        irr = _share(sum(s.top < floor for s in irrelevance), len(irrelevance))
        rel = _share(sum(s.top < floor for s in relevant), len(relevant))
        print(f"{floor:6.4f}  {irr:17.3f}   {rel:14.3f}")


def margin_table(
    calibration: Sequence[Scored], heldout: Sequence[Scored], *, precision: float
) -> None:
    """For each margin, the best `confident` on the calibration half, measured on held-out."""
    print("\nmargin  confident  calib coverage  held-out coverage  held-out precision")
    for margin in (0.01, 0.02, 0.05, 0.1, 0.15, 0.2):
        best: tuple[float, float] | None = None
        for step in range(101):
            confident = step / 100
            t = Thresholds(confident=confident, margin=margin, floor=0.0)
            m = metrics(rule(s, t) for s in calibration)
            if m.forced and m.precision >= precision and (best is None or m.coverage > best[0]):
                best = (m.coverage, confident)
        if best is None:
            print(f"{margin:6.2f}  {'-':>9}")
            continue
        held = metrics(rule(s, Thresholds(best[1], margin, 0.0)) for s in heldout)
        print(
            f"{margin:6.2f}  {best[1]:9.2f}  {best[0]:14.3f}  {held.coverage:17.3f}  "
            f"{held.precision:18.3f}"
        )


def _governor_router(thresholds: Thresholds) -> Callable[[RoutingItem], Routed] | None:
    try:
        from jevqueue.governor import Governor
    except ImportError:
        return None
    governor = Governor(LexicalBallot(), thresholds=thresholds)

    def route(item: RoutingItem) -> Routed:
        decision = governor.decide(list(item.messages), list(item.tools))
        return Routed(item, str(decision.path.value), decision.tool)

    return route


def _row(label: str, m: Metrics) -> str:
    return (
        f"{label:<26}{m.items:>6}{m.relevant:>6}{m.coverage:>9.3f}{m.precision:>9.3f}"
        f"{m.strict_precision:>8.3f}{m.irrelevance_prose:>9.3f}{m.relevant_prose:>9.3f}"
        f"{m.no_call_forced:>9.3f}"
    )


def report(title: str, routed: Sequence[Routed]) -> None:
    print(f"\n{title}")
    print(
        f"{'':<26}{'items':>6}{'relev':>6}{'coverage':>9}{'precis':>9}{'strict':>8}"
        f"{'irr>pro':>9}{'rel>pro':>9}{'nocall>t':>9}"
    )
    by_category: dict[str, list[Routed]] = {}
    for r in routed:
        by_category.setdefault(r.item.category, []).append(r)
    for category in bfcl_data.CATEGORIES:
        if category in by_category:
            print(_row(category, metrics(by_category[category])))
    total = metrics(routed)
    print(_row("all", total))
    paths = ", ".join(f"{path} {count}" for path, count in sorted(total.paths.items()))
    print(f"paths: {paths}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calibrate", action="store_true", help="grid-search the thresholds")
    parser.add_argument("--precision", type=float, default=0.99)
    parser.add_argument("--prose-budget", type=float, default=0.01)
    parser.add_argument(
        "--categories", default=",".join(bfcl_data.CATEGORIES), help="comma-separated"
    )
    args = parser.parse_args(argv)

    started = time.perf_counter()
    items = bfcl_data.load([c for c in args.categories.split(",") if c])
    scored = score_items(items, LexicalBallot())
    print(f"{len(items)} routing items from bfcl-eval ({bfcl_data.data_dir()})")
    print("columns: coverage = relevant turns forced; precis = forced tool is called by the")
    print("ground truth; strict = it is the first call; irr>pro = irrelevance items to prose;")
    print("rel>pro = relevant turns to prose; nocall>t = turns expecting no call that were forced")

    if args.calibrate:
        calibration = [s for s in scored if s.item.split == "calibrate"]
        heldout = [s for s in scored if s.item.split == "heldout"]
        thresholds, coverage, precision = calibrate(
            calibration, precision=args.precision, prose_budget=args.prose_budget
        )
        print(
            f"\ncalibrated on {len(calibration)} items: {thresholds} "
            f"(coverage {coverage:.3f}, precision {precision:.3f})"
        )
        report("calibration half (threshold rule)", [rule(s, thresholds) for s in calibration])
        report("held-out half (threshold rule)", [rule(s, thresholds) for s in heldout])
        floors = sorted({0.0, thresholds.floor, 0.001, 0.005, 0.01, 0.02, 0.05})
        print("\ncalibration half, if the floor were raised (the top score is below it):", end="")
        floor_table(calibration, floors)
        print("\nheld-out half, if the floor were raised:", end="")
        floor_table(heldout, floors)
        print("\nmargin sensitivity (a larger margin forces fewer near-ties):", end="")
        margin_table(calibration, heldout, precision=args.precision)
        # The other way round: how much the choice depends on which half it was made on.
        swapped, coverage, precision = calibrate(
            heldout, precision=args.precision, prose_budget=args.prose_budget
        )
        back = metrics(rule(s, swapped) for s in calibration)
        print(
            f"\nswapped halves: calibrated on held-out -> {swapped}; on the calibration half "
            f"coverage {back.coverage:.3f}, precision {back.precision:.3f}"
        )
    else:
        thresholds = Thresholds()
        print(f"\ndefault {thresholds}")
        route = _governor_router(thresholds)
        held = [s.item for s in scored if s.item.split == "heldout"]
        if route is None:
            print("(jevqueue.governor._governor is not available: replaying the threshold rule)")
            report("held-out half", [rule(s, thresholds) for s in scored if s.item in held])
            report("all items", [rule(s, thresholds) for s in scored])
        else:
            report("held-out half (Governor.decide)", [route(item) for item in held])
            report("all items (Governor.decide)", [route(s.item) for s in scored])
    print(f"\n{time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
