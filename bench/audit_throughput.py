"""Audited decisions per second with 1, 2, 4 and 8 threads and 2 and 4 processes.

Every worker judges the three target calls of ``bench/policy.py`` in turn (allowed write,
denied traversal, run_command without approval) against a real workspace, through
``GenericAdapter.intercept_tool_call``. Threads share one enforcement point and one
``SQLiteAuditLog``; processes each open their own log on the same file. Each run starts
on a fresh log, lets every worker run for the same time, and ends with
``jevqueue audit verify PATH --expect-count N`` (the command line, in a subprocess), so a
lost or duplicated record fails the run. Configurations are interleaved in rounds (the
order rotates each round); a figure is the median of the rounds with the lowest and
highest beside it. Threads without an audit log are measured too: what the interpreter
itself allows two threads on two cores.

Usage::

    .venv-bench/bin/python bench/audit_throughput.py            # 5 rounds of 0.8 s runs
    .venv-bench/bin/python bench/audit_throughput.py --seconds 2 --rounds 7

Target: >= 5,000 process-durable audited decisions per second with 8 threads.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from interleaved import load_line, run_rounds, summarise
from policy import TARGET_CASES, adapter_caller, cases_for, context_for, make_workspace

TARGET = 5000.0


def build_calls(workspace: Path, log_path: Path | None, durability: str) -> list[Any]:
    from jevqueue import PolicyEnforcementPoint, create_default_policy_decision_point
    from jevqueue.adapters import GenericAdapter
    from jevqueue.audit import SQLiteAuditLog

    log = None if log_path is None else SQLiteAuditLog(log_path, durability=durability)  # type: ignore[arg-type]
    pep = PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=log)
    bind = adapter_caller(GenericAdapter(pep), context_for(workspace))
    cases = cases_for(workspace)
    return [bind(*cases[name][:2]) for name in TARGET_CASES]


def work(calls: list[Any], seconds: float, barrier: Any) -> tuple[int, float, float]:
    """Run ``calls`` in turn for ``seconds``; return (decisions, wall s, thread CPU s)."""
    barrier.wait()
    count = 0
    cpu = time.thread_time()
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        for call in calls:
            call()
        count += len(calls)
    return count, time.perf_counter() - start, time.thread_time() - cpu


def in_threads(
    threads: int, workspace: Path, log_path: Path | None, durability: str, seconds: float
) -> tuple[int, float, float]:
    calls = build_calls(workspace, log_path, durability)
    barrier = threading.Barrier(threads)
    results: list[tuple[int, float, float]] = []
    lock = threading.Lock()

    def run() -> None:
        outcome = work(calls, seconds, barrier)
        with lock:
            results.append(outcome)

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return (
        sum(r[0] for r in results),
        max(r[1] for r in results),
        sum(r[2] for r in results),
    )


def _child(
    workspace: Path, log_path: Path, durability: str, seconds: float, barrier: Any, out: Any
) -> None:
    out.put(work(build_calls(workspace, log_path, durability), seconds, barrier))


def in_processes(
    processes: int, workspace: Path, log_path: Path, durability: str, seconds: float
) -> tuple[int, float, float]:
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(processes)
    out = context.Queue()
    children = [
        context.Process(
            target=_child, args=(workspace, log_path, durability, seconds, barrier, out)
        )
        for _ in range(processes)
    ]
    for child in children:
        child.start()
    results = [out.get(timeout=seconds * 10 + 60) for _ in children]
    for child in children:
        child.join()
    return (
        sum(r[0] for r in results),
        max(r[1] for r in results),
        sum(r[2] for r in results),
    )


def verify(log_path: Path, count: int) -> bool:
    """``jevqueue audit verify PATH --expect-count COUNT --json``, and exactly COUNT."""
    command = Path(sys.executable).parent / "jevqueue"
    done = subprocess.run(
        [str(command), "audit", "verify", str(log_path), "--expect-count", str(count), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        print(done.stdout + done.stderr, file=sys.stderr)
        return False
    # --expect-count asks for at least COUNT records; a duplicate would be one too many.
    return bool(json.loads(done.stdout)["count"] == count)


CONFIGS = [
    *[(f"{n} thread{'s' * (n > 1)}, no audit", "threads", n, None) for n in (1, 2, 4, 8)],
    *[
        (f"{n} thread{'s' * (n > 1)}, {durability}-durable", "threads", n, durability)
        for durability in ("process", "machine")
        for n in (1, 2, 4, 8)
    ],
    *[
        (f"{n} processes, {durability}-durable", "processes", n, durability)
        for durability in ("process", "machine")
        for n in (2, 4)
    ],
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.8, help="per run")
    args = parser.parse_args()
    before = load_line()
    results: dict[str, list[tuple[float, float, bool]]] = {}
    with tempfile.TemporaryDirectory(prefix="jevqueue-bench-") as temp:
        root = Path(temp)
        workspace = make_workspace(root)
        configs = {name: (kind, n, durability) for name, kind, n, durability in CONFIGS}
        runs = 0

        def measure(name: str) -> Any:
            nonlocal runs
            runs += 1
            kind, n, durability = configs[name]
            log_path = None if durability is None else root / f"run-{runs}.sqlite3"
            if kind == "threads":
                count, wall, cpu = in_threads(
                    n, workspace, log_path, durability or "process", args.seconds
                )
            else:
                assert log_path is not None and durability is not None
                count, wall, cpu = in_processes(n, workspace, log_path, durability, args.seconds)
            ok = True if log_path is None else verify(log_path, count)
            return (count / wall, cpu / count * 1e6, ok)

        results = run_rounds(list(configs), measure, args.rounds, progress="throughput")  # type: ignore[arg-type]
    print(f"\nCommand: `python bench/audit_throughput.py {' '.join(sys.argv[1:])}`".rstrip() + "  ")
    print(f"{args.rounds} rounds of {args.seconds:g} s runs; the three target calls in turn.  ")
    print(f"Before: {before}  ")
    print(f"After: {load_line()}\n")
    print(
        "| workers, audit | decisions / s (median [lowest-highest]) | "
        "CPU µs per decision | `audit verify --expect-count` |"
    )
    print("|---|---:|---:|---|")
    for name, samples in results.items():
        rate = summarise([s[0] for s in samples])
        cpu = summarise([s[1] for s in samples])
        verified = all(s[2] for s in samples)
        print(
            f"| {name} | {rate.median:,.0f} [{rate.low:,.0f}-{rate.high:,.0f}] | "
            f"{cpu.median:.1f} [{cpu.low:.1f}-{cpu.high:.1f}] | "
            f"{'passed in every run' if verified else 'FAILED'} |"
        )
    eight = summarise([s[0] for s in results["8 threads, process-durable"]])
    met = eight.median >= TARGET and all(s[2] for samples in results.values() for s in samples)
    print(
        f"\n- {'met' if met else 'MISSED'}: >= {TARGET:,.0f} process-durable audited "
        f"decisions/s with 8 threads: {eight.median:,.0f} (rounds {eight.low:,.0f}-"
        f"{eight.high:,.0f}), every log verified"
    )
    if not met:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
