"""Decision latency of the three ballots at 5, 30 and 100 tools, warm and cold, and model load.

Real inputs: the tools are the function docs of bfcl-eval's multi-turn API classes (the
first 5, 30 and 100 of them) and the requests are user turns of its multi-turn scenarios
(``bench/bfcl_data.py``; never ``live_*``). Every round runs every ballot, interleaved in
the same process, through ``Governor.decide`` (argument sufficiency included):

* warm: the toolset already scored once (its index or tool vectors cached), then 40
  different requests; the median of those is the round's figure;
* cold: a new ballot seeing the toolset for the first time (tool vectors to compute, the
  model itself already in memory), one decision;
* model load: a new encoder reading, checking (SHA-256) and opening the ONNX model.

The un-governed peer makes no decision at all, so its cost is 0 by definition; the lexical
ballot is the interleaved baseline. Reported: the median over rounds with the min-max
spread, and the load average before and after.

Run::

    .venv/bin/python bench/routing_latency.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bfcl_data
from jevqueue import EmbeddingBallot, Governor, HybridBallot, LexicalBallot
from jevqueue.governor import SentenceEncoder

SIZES = (5, 30, 100)
WARM_REQUESTS = 40


def inputs() -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
    items = [i for i in bfcl_data.load(bfcl_data.MULTI_TURN_CATEGORIES[:1])]
    tools: dict[str, dict[str, Any]] = {}
    for item in items:
        for tool in item.tools:
            tools.setdefault(tool["name"], tool)
    requests = [[{"role": "user", "content": i.messages[-1]["content"]}] for i in items]
    return list(tools.values()), requests


def timed(run: Callable[..., object], *args: Any) -> tuple[float, float]:
    """Wall-clock seconds, and the CPU seconds of this thread (onnxruntime runs a
    single-threaded session on the caller's thread): the second excludes the time spent
    waiting for a core on a loaded machine."""
    start, cpu = time.perf_counter(), time.thread_time()
    run(*args)
    return time.perf_counter() - start, time.thread_time() - cpu


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    if args.rounds < 5:
        raise SystemExit("--rounds must be at least 5")
    tools, requests = inputs()
    if len(tools) < max(SIZES):
        raise SystemExit(f"only {len(tools)} distinct tools in the data")
    print(f"load average before: {os.getloadavg()}")
    print(f"{len(tools)} distinct tools, {len(requests)} requests; {args.rounds} rounds")
    factories: dict[str, Callable[[], Any]] = {
        "lexical": LexicalBallot,
        "embedding": EmbeddingBallot,
        "hybrid": HybridBallot,
    }
    EmbeddingBallot().score(requests[0], tools[:1])  # the shared model, loaded once
    warm: dict[tuple[str, int], list[float]] = {}
    warm_cpu: dict[tuple[str, int], list[float]] = {}
    cold: dict[tuple[str, int], list[float]] = {}
    load: list[float] = []
    for round_ in range(args.rounds):
        load.append(timed(SentenceEncoder().encode, ["load"])[0])
        for size in SIZES:
            toolset = tools[:size]
            order = list(factories) if round_ % 2 == 0 else list(reversed(factories))
            for name in order:
                governor = Governor(factories[name]())
                first = requests[(round_ * 7) % len(requests)]
                cold.setdefault((name, size), []).append(timed(governor.decide, first, toolset)[0])
                samples, cpu = [], []
                for k in range(WARM_REQUESTS):
                    request = requests[(round_ * WARM_REQUESTS + k + 1) % len(requests)]
                    wall, used = timed(governor.decide, request, toolset)
                    samples.append(wall)
                    cpu.append(used)
                warm.setdefault((name, size), []).append(statistics.median(samples))
                warm_cpu.setdefault((name, size), []).append(statistics.median(cpu))

    def cell(values: list[float]) -> str:
        ms = [v * 1000 for v in values]
        return f"{statistics.median(ms):7.2f} ({min(ms):.2f}-{max(ms):.2f})"

    print("\ndecision latency, ms: median over rounds (min-max)")
    print(f"{'ballot':<10}{'tools':>6}  {'warm':<24}{'warm, CPU':<24}{'cold':<24}")
    for name in factories:
        for size in SIZES:
            key = (name, size)
            print(
                f"{name:<10}{size:>6}  {cell(warm[key]):<24}{cell(warm_cpu[key]):<24}"
                f"{cell(cold[key]):<24}"
            )
    print(f"\nmodel load (read, SHA-256 check, ONNX session), ms: {cell(load)}")
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
