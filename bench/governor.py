"""What governing a turn costs: decision latency, and a governed step against a plain call.

1. Decision latency of ``Governor(LexicalBallot()).decide(messages, tools)`` for toolsets
   of 5, 30 and 100 tools (median and p99, ``time.perf_counter_ns`` per call, after a
   warm-up). The tools are real function schemas from the bfcl-eval data (``simple_python``
   and ``multiple``, never ``live_*``), in the nested OpenAI shape; the requests rotate
   over real user questions whose tool is in the set, so each decision tokenises a new
   request. Two ways a host can hand over its tools are timed: the *same list* every turn,
   and a list *rebuilt* every turn with equal content (new dicts, as a host that
   serialises its tools each turn would), which the ballot must recognise by content.
2. The ratio of a governed step (``Governor.step`` on a
   :class:`~jevqueue.testing.ScriptedHost`: decide, ``interrupted()``, a forced
   ``generate``, the read-back) to an ungoverned ``host.generate(force_tool=None,
   directive="")`` on an identical host, with a provider that takes exactly 1 ms (a busy
   wait). The two are measured in the same run, interleaved call by call, so machine
   noise hits both alike; the target is a ratio of at most 1.10.

The garbage collector is paused while timing, as ``timeit`` does: the recording host keeps
every call it saw, and a full collection over that growing record would be charged to
whichever call happened to trigger it.

Run::

    .venv/bin/python bench/governor.py           # full run
    .venv/bin/python bench/governor.py --quick   # a short run
"""

from __future__ import annotations

import argparse
import copy
import gc
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


def _busy_model(seconds: float) -> Callable[[ModelCall], Any]:
    def respond(call: ModelCall) -> Any:
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            pass
        return tool_call_response(call.force_tool) if call.force_tool else tool_call_response()

    return respond


class FixedBallot:
    """A ballot that costs nothing: it always gives one tool 1.0 (the governor's own cost)."""

    def __init__(self, name: str) -> None:
        self._scores = {name: 1.0}

    def score(self, messages: Any, tools: Any) -> dict[str, float]:
        return self._scores


def step_ratio(
    tools: list[dict[str, Any]],
    request: str,
    *,
    iterations: int,
    warmup: int,
    ballot: Ballot | None = None,
) -> dict[str, Any]:
    respond = _busy_model(MODEL_SECONDS)
    total = iterations + warmup
    messages = [{"role": "user", "content": request}]
    governed_host = ScriptedHost(tools, messages, ScriptedModel([Step(respond)] * total))
    plain_host = ScriptedHost(tools, messages, ScriptedModel([Step(respond)] * total))
    governor = Governor(ballot if ballot is not None else LexicalBallot())
    governed: list[int] = []
    plain: list[int] = []
    clock = time.perf_counter_ns
    gc.collect()
    gc.disable()  # as timeit does: a collection is not part of the call being timed
    try:
        for i in range(total):
            # Alternate which arm goes first, so neither always runs on a warmer cache.
            first_governed = i % 2 == 0
            for is_governed in (first_governed, not first_governed):
                start = clock()
                if is_governed:
                    governor.step(governed_host)
                else:
                    plain_host.generate(force_tool=None, directive="")
                elapsed = clock() - start
                if i >= warmup:
                    (governed if is_governed else plain).append(elapsed)
    finally:
        gc.enable()
    assert governor.last is not None
    return {
        "path": governor.last.path.value,
        "tool": governor.last.tool,
        "governed": statistics.median(governed) / 1e3,
        "plain": statistics.median(plain) / 1e3,
        "ratio": statistics.median(governed) / statistics.median(plain),
        "mean_ratio": statistics.fmean(governed) / statistics.fmean(plain),
        "governed_p99": _percentile(governed, 0.99) / 1e3,
        "plain_p99": _percentile(plain, 0.99) / 1e3,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (noisier)")
    args = parser.parse_args(argv)
    iterations, warmup, step_iterations = (
        (2_000, 200, 300) if args.quick else (20_000, 2_000, 3_000)
    )

    all_tools, questions = toolsets()
    print(
        f"python {platform.python_version()} on {platform.machine()}, "
        f"{len(all_tools)} distinct bfcl tools available; "
        f"{iterations} timed decisions per cell after {warmup} warm-up"
    )
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

    tools = all_tools[:30]
    names = {tool["function"]["name"] for tool in tools}
    request = next(q for q, name in questions if name in names)
    print(
        f"\nGoverned step vs ungoverned generate, 30 tools, {MODEL_SECONDS * 1e3:g} ms model, "
        f"{step_iterations} interleaved pairs each, microseconds"
    )
    print(f"{'ballot':<14}{'path':>6}{'governed':>10}{'p99':>9}{'plain':>9}{'p99':>9}  ratio")
    target_tool = next(q_name for q, q_name in questions if q == request)
    for label, ballot in (
        ("LexicalBallot", LexicalBallot()),
        ("fixed (0 cost)", FixedBallot(target_tool)),
    ):
        result = step_ratio(
            tools, request, iterations=step_iterations, warmup=step_iterations // 10, ballot=ballot
        )
        print(
            f"{label:<14}{result['path']:>6}{result['governed']:>10.1f}"
            f"{result['governed_p99']:>9.0f}{result['plain']:>9.1f}{result['plain_p99']:>9.0f}"
            f"  {result['ratio']:.3f} (mean ratio {result['mean_ratio']:.3f})"
        )
    print(
        "ratio = median governed step / median plain generate; target <= 1.10. The fixed "
        "ballot row is the governor's own cost; the difference is the lexical ballot's."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
