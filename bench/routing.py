"""Routing quality of the governor's ballots on the Berkeley Function Calling Leaderboard data.

Every user turn of the bfcl categories ``simple_python``, ``multiple``,
``parallel_multiple``, ``irrelevance`` and ``multi_turn_*`` (see ``bench/bfcl_data.py``; the
``live_*`` categories are never read) is scored by each ballot, split in two stable halves
by scenario. Thresholds are fitted on the "calibrate" half by the library's rule
(``jevqueue.governor.fit_thresholds``: the highest coverage with precision among
relevant turns >= ``--precision`` and at most ``--no-call-cap`` of no-call turns forced,
then the highest floor that sends at most ``--prose-budget`` of relevant turns to prose at
the upper end of its Wilson interval) and every figure is reported on the "heldout" half
with its 95% Wilson interval:

* coverage: relevant turns (the ground truth calls a tool) routed to ``tool``;
* precision: forced relevant turns whose tool the ground truth calls on that turn;
* no-call forced: turns whose ground truth calls nothing, forced anyway;
* relevant to prose / irrelevance to prose;
* missing-argument clarify: ``multi_turn_miss_param`` turns whose ground truth asks for the
  missing argument, routed to ``clarify`` (argument sufficiency).

Run::

    .venv/bin/python bench/routing.py              # everything below, ~3 minutes
    .venv/bin/python bench/routing.py --texts      # also: which tool text to embed
    .venv/bin/python bench/routing.py --no-plots   # without writing docs/*.png
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bfcl_data
from bfcl_data import RoutingItem
from jevqueue.governor import (
    EmbeddingBallot,
    HybridBallot,
    LexicalBallot,
    Thresholds,
    ToolSchema,
    fuse,
    missing_arguments,
    normalize_tool,
    tool_text,
)
from routing_calibration import Metrics, Scored, calibrate, curve, metrics, rule, scored_from

DOCS = Path(__file__).resolve().parent.parent / "docs"
Scores = list[Mapping[str, float]]


def score_all(items: Sequence[RoutingItem], ballot: object) -> Scores:
    score = ballot.score  # type: ignore[attr-defined]
    return [dict(score(list(item.messages), list(item.tools))) for item in items]


def sufficiency_of(items: Sequence[RoutingItem], scores: Scores) -> list[bool]:
    out = []
    for item, s in zip(items, scores, strict=True):
        top = max(s, key=s.__getitem__) if s else None
        if top is None:
            out.append(True)
            continue
        tool = next(t for t in item.tools if t["name"] == top)
        out.append(not missing_arguments(item.messages, normalize_tool(tool)))
    return out


def to_scored(items: Sequence[RoutingItem], scores: Scores, sufficient: list[bool]) -> list[Scored]:
    return [scored_from(i, s, ok) for i, s, ok in zip(items, scores, sufficient, strict=True)]


def halves(scored: Sequence[Scored]) -> tuple[list[Scored], list[Scored]]:
    return (
        [s for s in scored if s.item.split == "calibrate"],
        [s for s in scored if s.item.split == "heldout"],
    )


def fitted(
    scored: Sequence[Scored], args: argparse.Namespace, *, sufficiency: bool
) -> tuple[Thresholds, Metrics, Metrics]:
    calibration, heldout = halves(scored)
    thresholds = calibrate(
        calibration,
        precision=args.precision,
        no_call_cap=args.no_call_cap,
        prose_budget=args.prose_budget,
        sufficiency=sufficiency,
    )
    cal = metrics(rule(s, thresholds, sufficiency=sufficiency) for s in calibration)
    held = metrics(rule(s, thresholds, sufficiency=sufficiency) for s in heldout)
    return thresholds, cal, held


def print_metrics(label: str, m: Metrics) -> None:
    print(f"  {label}")
    for name in (
        "coverage",
        "precision",
        "no_call_forced",
        "relevant_prose",
        "irrelevance_prose",
        "no_call_prose",
        "missing_clarify",
        "missing_forced",
    ):
        print(f"    {name:<18} {getattr(m, name)}")
    print(f"    paths              {dict(sorted(m.paths.items()))}")


def by_category(scored: Sequence[Scored], thresholds: Thresholds, sufficiency: bool) -> None:
    _, heldout = halves(scored)
    print(f"    {'category':<26}{'coverage':>9}{'precis':>8}{'nocall>t':>9}{'clarify':>8}")
    for category in bfcl_data.CATEGORIES:
        rows = [
            rule(s, thresholds, sufficiency=sufficiency)
            for s in heldout
            if s.item.category == category
        ]
        if not rows:
            continue
        m = metrics(rows)
        clarify = sum(r.path == "clarify" for r in rows) / len(rows)
        print(
            f"    {category:<26}{m.coverage.value:>9.3f}{m.precision.value:>8.3f}"
            f"{m.no_call_forced.value:>9.3f}{clarify:>8.3f}"
        )


def text_variants(items: Sequence[RoutingItem], args: argparse.Namespace) -> None:
    """Which tool text to embed: each variant calibrated and measured on the calibration
    half only (the held-out half never informs the choice)."""

    def words(name: str) -> str:
        from jevqueue.governor._embedding_ballot import _words

        return _words(name)

    def params(t: ToolSchema) -> list[tuple[str, str]]:
        props = t.parameters.get("properties")
        if not isinstance(props, Mapping):
            return []
        return [
            (str(n), str(p.get("description", "")) if isinstance(p, Mapping) else "")
            for n, p in props.items()
        ]

    variants: dict[str, Callable[[ToolSchema], str]] = {
        "description": lambda t: t.description or words(t.name),
        "name+description": lambda t: f"{words(t.name)}. {t.description}",
        "name+description+param names (shipped)": tool_text,
        "name+description+param names+descriptions": lambda t: (
            f"{words(t.name)}. {t.description} Parameters: "
            + "; ".join(f"{words(n)}: {d}" for n, d in params(t))
        ),
    }
    calibration = [i for i in items if i.split == "calibrate"]
    print("\nwhich tool text to embed (calibration half only):")
    for label, text in variants.items():
        scores = score_all(calibration, EmbeddingBallot(tool_text=text))
        scored = to_scored(calibration, scores, [True] * len(calibration))
        thresholds = calibrate(
            scored,
            precision=args.precision,
            no_call_cap=args.no_call_cap,
            prose_budget=args.prose_budget,
        )
        m = metrics(rule(s, thresholds) for s in scored)
        print(f"  {label:<44} {thresholds}  coverage {m.coverage.value:.3f}")


def sentence_variant(
    items: Sequence[RoutingItem], lexical: Scores, embedding: Scores, args: argparse.Namespace
) -> None:
    """A request of several sentences scored by its best sentence (each tool's score the
    highest cosine over the whole request and each sentence of three words or more), alone
    and fused as the hybrid; calibration half only, argument sufficiency on."""
    import re

    from jevqueue.governor._embedding_ballot import _newest_user_text

    split = re.compile(r"(?<=[.?!;])\s+|,\s+(?:and\s+)?then\s+|\s+and\s+then\s+")
    ballot = EmbeddingBallot()
    chosen = [k for k, item in enumerate(items) if item.split == "calibrate"]
    calibration = [items[k] for k in chosen]
    best_sentence: Scores = []
    for k in chosen:
        item, whole = items[k], embedding[k]
        parts = [
            p for p in split.split(_newest_user_text(item.messages).strip()) if len(p.split()) >= 3
        ]
        if len(parts) <= 1:
            best_sentence.append(whole)
            continue
        schemas = [normalize_tool(tool) for tool in item.tools]
        matrix = ballot._matrix(tuple(tool_text(schema) for schema in schemas))
        cosines = (matrix @ ballot.encoder.encode(parts).T).max(axis=1)
        best_sentence.append(
            {
                schema.name: max(whole[schema.name], min(1.0, max(0.0, float(value))))
                for schema, value in zip(schemas, cosines, strict=True)
            }
        )
    print("\nscoring a request by its best sentence (calibration half, with sufficiency):")
    rows = (
        ("embedding, whole request (shipped)", [embedding[k] for k in chosen]),
        ("embedding, best sentence", best_sentence),
        ("hybrid, whole request (shipped)", [fuse(lexical[k], embedding[k], 0.65) for k in chosen]),
        (
            "hybrid, best sentence",
            [fuse(lexical[k], s, 0.65) for k, s in zip(chosen, best_sentence, strict=True)],
        ),
    )
    for label, scores in rows:
        scored = to_scored(calibration, scores, sufficiency_of(calibration, scores))
        thresholds = calibrate(
            scored,
            precision=args.precision,
            no_call_cap=args.no_call_cap,
            prose_budget=args.prose_budget,
            sufficiency=True,
        )
        m = metrics(rule(s, thresholds, sufficiency=True) for s in scored)
        print(f"  {label:<36} {thresholds}  coverage {m.coverage.value:.3f}")


def hybrid_alternatives(
    items: Sequence[RoutingItem], lexical: Scores, embedding: Scores, args: argparse.Namespace
) -> None:
    """Fusion weights and a second-opinion rule, each calibrated on the calibration half;
    chosen by calibration coverage, reported on both halves."""
    print("\nhybrid alternatives (calibrated on the calibration half):")
    print(
        f"  {'variant':<34}{'thresholds':<56}{'cal cov':>8}{'held cov':>9}{'held prec':>10}"
        f"{'held nc>t':>10}"
    )

    def agreement(w: float) -> Callable[[Mapping[str, float], Mapping[str, float]], dict]:
        def combine(lex: Mapping[str, float], emb: Mapping[str, float]) -> dict[str, float]:
            fused = fuse(lex, emb, w)
            if lex and emb and max(lex, key=lex.__getitem__) != max(emb, key=emb.__getitem__):
                # The two disagree on the top tool: halve every score, so the turn is
                # forced only by a fused confidence the calibration never reaches.
                return {name: value / 2 for name, value in fused.items()}
            return fused

        return combine

    def minimum(lex: Mapping[str, float], emb: Mapping[str, float]) -> dict[str, float]:
        return {name: min(lex.get(name, 0.0), emb.get(name, 0.0)) for name in emb}

    variants: dict[str, Callable[[Mapping[str, float], Mapping[str, float]], dict]] = {}
    for w in (0.2, 0.35, 0.5, 0.65, 0.8):
        variants[f"fusion, lexical weight {w}"] = lambda lex, emb, w=w: fuse(lex, emb, w)
    for w in (0.35, 0.5):
        variants[f"second opinion, weight {w}"] = agreement(w)
    variants["minimum of the two"] = minimum
    for label, combine in variants.items():
        scores = [combine(lx, em) for lx, em in zip(lexical, embedding, strict=True)]
        scored = to_scored(items, scores, [True] * len(items))
        try:
            t, cal, held = fitted(scored, args, sufficiency=False)
        except SystemExit as exc:
            print(f"  {label:<34}{exc}")
            continue
        print(
            f"  {label:<34}{t!s:<56}{cal.coverage.value:>8.3f}{held.coverage.value:>9.3f}"
            f"{held.precision.value:>10.3f}{held.no_call_forced.value:>10.3f}"
        )


def plot(name: str, scored: Sequence[Scored], thresholds: Thresholds, sufficiency: bool) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    calibration, heldout = halves(scored)
    fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
    for label, rows, style in (
        ("calibration half", calibration, "--"),
        ("held-out half", heldout, "-"),
    ):
        points = curve(rows, thresholds.margin, sufficiency=sufficiency)
        ax.plot([p[1] for p in points], [p[2] for p in points], style, label=label)
    held = metrics(rule(s, thresholds, sufficiency=sufficiency) for s in heldout)
    ax.plot(
        [held.coverage.value],
        [held.precision.value],
        "o",
        color="black",
        label=f"shipped: confident {thresholds.confident:g}, margin {thresholds.margin:g}",
    )
    ax.axhline(0.99, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel("coverage (relevant turns forced)")
    ax.set_ylabel("precision among relevant turns")
    ax.set_ylim(0.8, 1.005)
    ax.set_xlim(0, 0.4)
    ax.set_title(f"{name} ballot on BFCL (margin {thresholds.margin:g}, confident swept)")
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    path = DOCS / f"routing_{name}.png"
    fig.savefig(path)
    plt.close(fig)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--precision", type=float, default=0.99)
    parser.add_argument("--no-call-cap", type=float, default=0.02)
    parser.add_argument("--prose-budget", type=float, default=0.02)
    parser.add_argument("--texts", action="store_true", help="compare the embedded tool texts")
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument("--cache", help="keep the ballots' scores in this pickle file")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    print(f"load average at start: {os.getloadavg()}")
    items = bfcl_data.load()
    calibration_items = sum(i.split == "calibrate" for i in items)
    print(
        f"{len(items)} routing items from bfcl-eval ({bfcl_data.data_dir()}): "
        f"{calibration_items} to calibrate on, {len(items) - calibration_items} held out"
    )
    print(
        f"rule: precision among relevant >= {args.precision}, no-call forced <= "
        f"{args.no_call_cap}, relevant to prose <= {args.prose_budget} (Wilson upper)"
    )

    if args.texts:
        text_variants(items, args)

    cache = Path(args.cache) if args.cache else None
    if cache is not None and cache.exists():
        with cache.open("rb") as handle:
            lexical, embedding, hybrid = pickle.load(handle)
    else:
        lexical = score_all(items, LexicalBallot())
        embedding_ballot = EmbeddingBallot()
        embedding = score_all(items, embedding_ballot)
        # The hybrid shares the embedding ballot's cached tool vectors (same model, same
        # texts): only the requests are embedded again.
        hybrid = score_all(items, HybridBallot(embedding=embedding_ballot))
        if cache is not None:
            with cache.open("wb") as handle:
                pickle.dump((lexical, embedding, hybrid), handle)
    hybrid_alternatives(items, lexical, embedding, args)
    if args.texts:
        sentence_variant(items, lexical, embedding, args)

    shipped = {
        "lexical": Thresholds(),
        "embedding": EmbeddingBallot.thresholds,
        "hybrid": HybridBallot.thresholds,
    }
    coverage: dict[str, float] = {}
    for name, scores in (("lexical", lexical), ("embedding", embedding), ("hybrid", hybrid)):
        sufficient = sufficiency_of(items, scores)
        scored = to_scored(items, scores, sufficient)
        for sufficiency in (False, True):
            label = f"{name}{' + argument sufficiency' if sufficiency else ''}"
            t, cal, held = fitted(scored, args, sufficiency=sufficiency)
            print(f"\n{label}: calibrated {t}")
            print_metrics("calibration half", cal)
            print_metrics("held-out half", held)
            by_category(scored, t, sufficiency)
            coverage[label] = held.coverage.value
        # What the shipped defaults do (they carry the sufficiency check in the governor).
        held_default = metrics(rule(s, shipped[name], sufficiency=True) for s in halves(scored)[1])
        print(f"\n{name} shipped defaults {shipped[name]}, with argument sufficiency:")
        print_metrics("held-out half", held_default)
        relevant = [s for s in halves(scored)[1] if s.item.relevant]
        would = [s for s in relevant if rule(s, shipped[name]).path == "tool"]
        asked = [s for s in would if not s.sufficient]
        print(
            f"  relevant turns the thresholds alone would force: {len(would)}; argument "
            f"sufficiency asked instead on {len(asked)} ({len(asked)}/{len(relevant)} of "
            f"relevant turns), {sum(s.top_tool in s.item.expected for s in asked)} of them "
            "with the right tool"
        )
        if not args.no_plots:
            print(f"  plot: {plot(name, scored, shipped[name], True)}")
    print("\nheld-out coverage ratios at the calibrated thresholds:")
    print(f"  hybrid / lexical: {coverage['hybrid'] / coverage['lexical']:.2f}")
    print(
        f"  hybrid+sufficiency / lexical: "
        f"{coverage['hybrid + argument sufficiency'] / coverage['lexical']:.2f}"
    )
    print(f"\nload average at end: {os.getloadavg()}; {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
