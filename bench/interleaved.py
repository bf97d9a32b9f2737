"""Interleaved rounds: what every benchmark here uses to compare contestants fairly.

On a shared machine the speed of the same code drifts by tens of percent within a minute.
So contestants are never measured one after the other: each round measures every
contestant once, in an order that rotates from round to round, and a figure is the median
of the per-round medians with its spread (lowest and highest round). A ratio between two
contestants is taken per round (both were measured within the same few seconds) and then
summarised the same way.
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Sample", "Summary", "load_line", "run_rounds", "summarise", "time_calls"]


@dataclass(frozen=True)
class Sample:
    """One contestant's calls within one round: per-call medians and p99, nanoseconds."""

    cpu_median: float
    cpu_p99: float
    wall_median: float
    wall_p99: float
    outcome: str


@dataclass(frozen=True)
class Summary:
    """A figure over the rounds: the median of the round values and their range."""

    median: float
    low: float
    high: float
    values: tuple[float, ...]

    def spread(self) -> float:
        """The range as a share of the median (0.1 means the rounds span 10 %)."""
        return (self.high - self.low) / self.median if self.median else 0.0


def summarise(values: Sequence[float]) -> Summary:
    """Median, lowest and highest of ``values``."""
    return Summary(statistics.median(values), min(values), max(values), tuple(values))


def time_calls(
    call: Callable[[], object],
    iterations: int,
    warmup: int,
    outcome: Callable[[object], str],
) -> Sample:
    """Time ``iterations`` single calls of ``call`` (CPU and wall clock), after a warm-up.

    The garbage collector stays on, as in real use; a full collection first means no
    earlier garbage is collected on this contestant's clock. CPU time is the calling
    thread's (``time.thread_time_ns``): every contestant does its work, SQLite's included,
    on that thread, and another thread's work would not be its cost.
    """
    for _ in range(warmup):
        call()
    cpu_clock = time.thread_time_ns
    wall_clock = time.perf_counter_ns
    cpu: list[int] = []
    wall: list[int] = []
    gc.collect()
    result: object = None
    for _ in range(iterations):
        w0 = wall_clock()
        c0 = cpu_clock()
        result = call()
        c1 = cpu_clock()
        w1 = wall_clock()
        cpu.append(c1 - c0)
        wall.append(w1 - w0)
    cpu.sort()
    wall.sort()
    p99 = min(iterations - 1, int(0.99 * iterations))
    return Sample(
        statistics.median(cpu), cpu[p99], statistics.median(wall), wall[p99], outcome(result)
    )


def run_rounds(
    contestants: Sequence[str],
    measure: Callable[[str], Sample],
    rounds: int,
    *,
    progress: str = "",
) -> dict[str, list[Sample]]:
    """Measure every contestant once per round, rotating who goes first each round."""
    samples: dict[str, list[Sample]] = {name: [] for name in contestants}
    for index in range(rounds):
        shift = index % len(contestants)
        order = [*contestants[shift:], *contestants[:shift]]
        if index % 2:
            order.reverse()
        for name in order:
            samples[name].append(measure(name))
        if progress:
            print(f"{progress}: round {index + 1}/{rounds} done", file=sys.stderr)
    return samples


def load_line() -> str:
    """The machine's state, to print beside every result."""
    one, five, fifteen = os.getloadavg()
    return (
        f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
        f"{one:.2f} / {five:.2f} / {fifteen:.2f} (1 / 5 / 15 min), "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
