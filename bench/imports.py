"""What ``import jevqueue.plugins.langgraph`` adds to importing LangGraph itself.

Each round is a fresh interpreter (``python -c``) that first imports the framework
modules the plugin builds on, as a LangGraph agent imports them anyway
(``langgraph.graph``, ``langgraph.prebuilt``, ``langgraph.types``, ``langchain_core``
messages, tools, runnables, chat models, ``pydantic``), timed, and then
``import jevqueue.plugins.langgraph``, timed on its own: what the plugin adds once the
framework is loaded, in wall-clock and CPU time. Timing the plugin inside the same
interpreter, rather than subtracting two interpreters' totals, keeps the framework's own
import (seconds on a loaded machine, varying by more than the plugin costs) out of the
figure. The summary is the median of the rounds with the lowest and highest beside it.

Usage::

    .venv-bench/bin/python bench/imports.py               # 15 rounds
    .venv-bench/bin/python bench/imports.py --rounds 30

Target: the plugin adds <= 50 ms (median of the rounds).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from interleaved import load_line, summarise

FRAMEWORK = (
    "import langchain_core.language_models.chat_models, langchain_core.messages, "
    "langchain_core.outputs, langchain_core.runnables, langchain_core.tools, "
    "langchain_core.utils.function_calling, langgraph.errors, langgraph.graph, "
    "langgraph.prebuilt, langgraph.prebuilt.tool_node, langgraph.types, pydantic"
)
PLUGIN = "import jevqueue.plugins.langgraph"
TARGET_MS = 50.0


def sample() -> tuple[float, float, float, float]:
    """Framework wall/CPU ms, then the plugin's own wall/CPU ms, in a fresh interpreter."""
    code = (
        "import time, json\n"
        "w = time.perf_counter(); c = time.process_time()\n"
        f"{FRAMEWORK}\n"
        "fw = [(time.perf_counter() - w) * 1e3, (time.process_time() - c) * 1e3]\n"
        "w = time.perf_counter(); c = time.process_time()\n"
        f"{PLUGIN}\n"
        "print(json.dumps(fw + [(time.perf_counter() - w) * 1e3,"
        " (time.process_time() - c) * 1e3]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    framework_wall, framework_cpu, wall, cpu = json.loads(done.stdout)
    return float(framework_wall), float(framework_cpu), float(wall), float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    before = load_line()
    sample()  # warm the disk cache
    samples = [sample() for _ in range(args.rounds)]
    print(f"\nCommand: `python bench/imports.py {' '.join(sys.argv[1:])}`".rstrip() + "  ")
    print(f"{args.rounds} rounds, each a fresh interpreter.  ")
    print(f"Before: {before}  ")
    print(f"After: {load_line()}\n")
    print("| ms, median [lowest-highest] | LangGraph itself | then the plugin |")
    print("|---|---:|---:|")
    added = {}
    for offset, label in ((0, "wall"), (1, "CPU")):
        framework = summarise([s[offset] for s in samples])
        added[label] = summarise([s[offset + 2] for s in samples])
        print(
            f"| {label} | {framework.median:.0f} [{framework.low:.0f}-{framework.high:.0f}] | "
            f"{added[label].median:.1f} [{added[label].low:.1f}-{added[label].high:.1f}] |"
        )
    met = added["wall"].median <= TARGET_MS and added["CPU"].median <= TARGET_MS
    print(
        f"\n- {'met' if met else 'MISSED'}: the plugin adds <= {TARGET_MS:.0f} ms: "
        f"{added['wall'].median:.1f} ms wall, {added['CPU'].median:.1f} ms CPU (median of rounds)"
    )
    if not met:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
