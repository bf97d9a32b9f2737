"""What governing a turn costs: decision latency, and a governed step against a plain call.

1. Decision latency of ``Governor(LexicalBallot()).decide(messages, tools)`` for toolsets
   of 5, 30 and 100 tools (median and p99, ``time.perf_counter_ns`` per call, after a
   warm-up). The tools are real function schemas from the bfcl-eval data (``simple_python``
   and ``multiple``, never ``live_*``), in the nested OpenAI shape; the requests rotate
   over real user questions whose tool is in the set, so each decision tokenises a new
   request. Two ways a host can hand over its tools are timed: the *same list* every turn,
   and a list *rebuilt* every turn with equal content (new dicts, as a host that
   serialises its tools each turn would), which the ballot must recognise by content.
2. The ratio of a governed step (``Governor.step``: decide, ``interrupted()``, the path's
   ``generate``, the read-back) to an ungoverned ``host.generate(force_tool=None,
   directive="")`` — the passthrough an agent makes without jevqueue — on one
   :class:`~jevqueue.testing.ScriptedHost` with 30 tools. Both arms call the same host
   object with the same conversation, pair by pair, and its provider takes 1 ms (a busy
   wait, which ends at the same wall-clock deadline whatever the scheduler does) and
   answers with a body built before timing starts, so neither arm pays for building one.
   The arms are interleaved call by call, alternating which goes first, so machine noise
   hits both alike; the comparison is repeated ``--runs`` times and the run with the
   median ratio is shown, with every run's ratio. Three cases: the lexical ballot with the
   same request every turn (the steps of an agent loop re-read the same user message), the
   lexical ballot with a new request every turn (8 in rotation), and a ballot that costs
   nothing (the governor's own work). The target is a ratio of at most 1.10.

The garbage collector is paused while timing, as ``timeit`` does: the recording host keeps
every call it saw, and a full collection over that growing record would be charged to
whichever call happened to trigger it.

Run::

    .venv/bin/python bench/governor.py               # full run
    .venv/bin/python bench/governor.py --quick       # a short run
    .venv/bin/python bench/governor.py --step-only   # only the governed-step comparison
"""

from __future__ import annotations

import argparse
import copy
import gc
import os
import platform
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bfcl_data
from jevqueue import Ballot, Governor, LexicalBallot
from jevqueue.testing import ModelCall, ScriptedHost, ScriptedModel, Step, tool_call_response

SIZES = (5, 30, 100)
MODEL_SECONDS = 0.001


def toolsets() -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """Unique bfcl function schemas in file order, and (question, its tool) pairs."""
    tools: dict[str, dict[str, Any]] = {}
    questions: list[tuple[str, str]] = []
    for item in bfcl_data.load(["simple_python", "multiple"]):
        for tool in item.tools:
            tools.setdefault(tool["name"], {"type": "function", "function": dict(tool)})
        if item.category == "simple_python":
            text = next(m["content"] for m in item.messages if m["role"] == "user")
            questions.append((text, item.tools[0]["name"]))
    return list(tools.values()), questions


def _percentile(values: list[int], fraction: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))])


def _time(fn: Callable[[int], Any], iterations: int, warmup: int) -> list[int]:
    for i in range(warmup):
        fn(i)
    samples: list[int] = []
    clock = time.perf_counter_ns
    gc.collect()
    gc.disable()  # as timeit does: a collection is not part of the call being timed
    try:
        for i in range(iterations):
            start = clock()
            fn(i)
            samples.append(clock() - start)
    finally:
        gc.enable()
    return samples


def decision_latency(
    size: int,
    all_tools: list[dict[str, Any]],
    questions: list[tuple[str, str]],
    *,
    iterations: int,
    warmup: int,
) -> dict[str, Any]:
    tools = all_tools[:size]
    names = {tool["function"]["name"] for tool in tools}
    requests = [[{"role": "user", "content": q}] for q, name in questions if name in names][:8]
    copies = [copy.deepcopy(tools) for _ in range(16)]
    governor = Governor(LexicalBallot())
    paths: Counter[str] = Counter()

    def same(i: int) -> None:
        governor.decide(requests[i % len(requests)], tools)

    def rebuilt(i: int) -> None:
        governor.decide(requests[i % len(requests)], copies[i % len(copies)])

    ballot = LexicalBallot()

    def ballot_only(i: int) -> None:
        ballot.score(requests[i % len(requests)], tools)

    for request in requests:
        paths[governor.decide(request, tools).path.value] += 1
    result: dict[str, Any] = {"size": size, "requests": len(requests), "paths": dict(paths)}
    for label, fn in (("same", same), ("rebuilt", rebuilt), ("ballot", ballot_only)):
        samples = _time(fn, iterations, warmup)
        result[label] = (statistics.median(samples) / 1e3, _percentile(samples, 0.99) / 1e3)
    return result


def _busy_model(seconds: float, responses: dict[str | None, Any]) -> Callable[[ModelCall], Any]:
    """A provider that takes ``seconds`` (a busy wait) and answers with a prebuilt body.

    The bodies are built before timing starts, so neither arm pays for building one; a
    forced call gets a body that calls the forced tool, every other call the body under
    ``None``.
    """

    def respond(call: ModelCall) -> Any:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            pass
        return responses.get(call.force_tool, responses[None])

    return respond


class FixedBallot:
    """A ballot that costs nothing: it always gives one tool 1.0 (the governor's own cost)."""

    def __init__(self, name: str) -> None:
        self._scores = {name: 1.0}

    def score(self, messages: Any, tools: Any) -> dict[str, float]:
        return self._scores


def step_ratio(
    tools: list[dict[str, Any]],
    requests: list[str],
    *,
    iterations: int,
    warmup: int,
    ballot: Ballot | None = None,
) -> dict[str, Any]:
    """Median governed step against median plain ``generate``, interleaved on one host.

    Both arms use the same :class:`~jevqueue.testing.ScriptedHost` and, pair by pair, the
    same conversation: turn ``i`` asks ``requests[i % len(requests)]``. The plain arm is
    the passthrough an ungoverned agent makes (``generate(force_tool=None,
    directive="")``); the governed arm is ``Governor.step`` on the same host.
    """
    names = [tool["function"]["name"] for tool in tools]
    responses: dict[str | None, Any] = {name: tool_call_response(name) for name in names}
    responses[None] = tool_call_response(names[0])
    respond = _busy_model(MODEL_SECONDS, responses)
    total = iterations + warmup
    conversations = [[{"role": "user", "content": request}] for request in requests]
    host = ScriptedHost(tools, conversations[0], ScriptedModel([Step(respond)] * (2 * total)))
    governor = Governor(ballot if ballot is not None else LexicalBallot())
    governed: list[int] = []
    plain: list[int] = []
    paths: Counter[str] = Counter()
    clock = time.perf_counter_ns
    gc.collect()
    gc.disable()  # as timeit does: a collection is not part of the call being timed
    try:
        for i in range(total):
            host.conversation = conversations[i % len(conversations)]
            # Alternate which arm goes first, so neither always runs on a warmer cache.
            first_governed = i % 2 == 0
            for is_governed in (first_governed, not first_governed):
                start = clock()
                if is_governed:
                    governor.step(host)
                else:
                    host.generate(force_tool=None, directive="")
                elapsed = clock() - start
                if i >= warmup:
                    (governed if is_governed else plain).append(elapsed)
            if i >= warmup:
                assert governor.last is not None
                paths[governor.last.path.value] += 1
    finally:
        gc.enable()
    host.model.assert_complete()
    return {
        "paths": dict(paths),
        "governed": statistics.median(governed) / 1e3,
        "plain": statistics.median(plain) / 1e3,
        "ratio": statistics.median(governed) / statistics.median(plain),
        "mean_ratio": statistics.fmean(governed) / statistics.fmean(plain),
        "governed_p99": _percentile(governed, 0.99) / 1e3,
        "plain_p99": _percentile(plain, 0.99) / 1e3,
    }


def latency_table(
    all_tools: list[dict[str, Any]],
    questions: list[tuple[str, str]],
    *,
    iterations: int,
    warmup: int,
) -> None:
    print("\nDecision latency, Governor(LexicalBallot()).decide, microseconds")
    print(f"{'tools':>6} {'same list':>18} {'rebuilt each turn':>20} {'ballot only':>18}  paths")
    print(f"{'':>6} {'median':>9}{'p99':>9} {'median':>11}{'p99':>9} {'median':>9}{'p99':>9}")
    for size in SIZES:
        row = decision_latency(size, all_tools, questions, iterations=iterations, warmup=warmup)
        paths = ", ".join(f"{path} {count}" for path, count in sorted(row["paths"].items()))
        print(
            f"{size:>6} {row['same'][0]:>9.1f}{row['same'][1]:>9.1f} "
            f"{row['rebuilt'][0]:>11.1f}{row['rebuilt'][1]:>9.1f} "
            f"{row['ballot'][0]:>9.1f}{row['ballot'][1]:>9.1f}  {paths}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (noisier)")
    parser.add_argument(
        "--step-only", action="store_true", help="only the governed-step comparison"
    )
    parser.add_argument(
        "--runs", type=int, default=5, help="repetitions of each step comparison (median shown)"
    )
    args = parser.parse_args(argv)
    iterations, warmup, step_iterations = (
        (2_000, 200, 300) if args.quick else (20_000, 2_000, 3_000)
    )

    all_tools, questions = toolsets()
    print(
        f"python {platform.python_version()} on {platform.machine()}, "
        f"{len(all_tools)} distinct bfcl tools available; "
        f"{iterations} timed decisions per cell after {warmup} warm-up; load average "
        + " / ".join(f"{value:.2f}" for value in os.getloadavg())
    )
    if not args.step_only:
        latency_table(all_tools, questions, iterations=iterations, warmup=warmup)

    tools = all_tools[:30]
    names = {tool["function"]["name"] for tool in tools}
    asked = [(q, name) for q, name in questions if name in names][:8]
    routed = Governor(LexicalBallot())
    forced = next(
        (q, name)
        for q, name in asked
        if routed.decide([{"role": "user", "content": q}], tools).path.value == "tool"
    )
    print(
        f"\nGoverned step vs ungoverned generate on one host, 30 tools, "
        f"{MODEL_SECONDS * 1e3:g} ms model, {step_iterations} interleaved pairs, "
        f"{args.runs} run(s) each, microseconds (the median run by ratio)"
    )
    width = max(20, 6 * args.runs + 2)
    print(
        f"{'ballot':<16}{'requests':<11}{'governed':>10}{'p99':>8}{'plain':>9}{'p99':>8}"
        f"{'ratio':>8}  {'ratios of the runs':<{width}}paths"
    )
    cases: list[tuple[str, str, Ballot, list[str]]] = [
        ("LexicalBallot", "same", LexicalBallot(), [forced[0]]),
        ("LexicalBallot", "rotating", LexicalBallot(), [q for q, _ in asked]),
        ("fixed (0 cost)", "same", FixedBallot(forced[1]), [forced[0]]),
    ]
    for label, kind, ballot, requests in cases:
        results = sorted(
            (
                step_ratio(
                    tools,
                    requests,
                    iterations=step_iterations,
                    warmup=step_iterations // 10,
                    ballot=ballot,
                )
                for _ in range(args.runs)
            ),
            key=lambda result: float(result["ratio"]),
        )
        result = results[len(results) // 2]
        paths = ", ".join(f"{path} {count}" for path, count in sorted(result["paths"].items()))
        spread = " ".join(f"{r['ratio']:.3f}" for r in results)
        print(
            f"{label:<16}{kind:<11}{result['governed']:>10.1f}{result['governed_p99']:>8.0f}"
            f"{result['plain']:>9.1f}{result['plain_p99']:>8.0f}{result['ratio']:>8.3f}"
            f"  {spread:<{width}}{paths}"
        )
    print(
        "ratio = median governed step / median plain generate; target <= 1.10. 'same': one "
        "request every turn (the turns of an agent loop re-read the same user message); "
        "'rotating': a new request each turn, over 8. The fixed ballot row is the governor's "
        "own cost; the difference is the lexical ballot's."
    )
    print("load average after: " + " / ".join(f"{value:.2f}" for value in os.getloadavg()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
