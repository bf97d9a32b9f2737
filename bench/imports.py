"""What ``import jevqueue.plugins.langgraph`` adds to importing LangGraph itself.

Each sample is a fresh interpreter (``python -c``) that imports, timed inside it:

* **LangGraph** — the framework modules the plugin builds on, as a LangGraph agent
  imports them anyway (``langgraph.graph``, ``langgraph.prebuilt``, ``langgraph.types``,
  ``langchain_core`` messages, tools, runnables, chat models);
* **LangGraph + plugin** — the same, then ``import jevqueue.plugins.langgraph``.

The two alternate in rounds (the order flips every round), so both see the same disk
cache and the same machine; the added cost is taken per round (plugin run minus the
framework run next to it), in wall-clock and CPU time, and summarised as the median of the
rounds with the lowest and highest beside it.

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


def sample(statements: list[str]) -> tuple[float, float]:
    """Wall and CPU milliseconds of ``statements`` in a fresh interpreter."""
    body = "; ".join(statements)
    code = (
        "import time, json\n"
        "w = time.perf_counter(); c = time.process_time()\n"
        f"{body}\n"
        "print(json.dumps([(time.perf_counter() - w) * 1e3, (time.process_time() - c) * 1e3]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    wall, cpu = json.loads(done.stdout)
    return float(wall), float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    before = load_line()
    sample([FRAMEWORK, PLUGIN])  # warm the disk cache for both
    base: list[tuple[float, float]] = []
    with_plugin: list[tuple[float, float]] = []
    for index in range(args.rounds):
        if index % 2:
            with_plugin.append(sample([FRAMEWORK, PLUGIN]))
            base.append(sample([FRAMEWORK]))
        else:
            base.append(sample([FRAMEWORK]))
            with_plugin.append(sample([FRAMEWORK, PLUGIN]))
    print(f"\nCommand: `python bench/imports.py {' '.join(sys.argv[1:])}`".rstrip() + "  ")
    print(f"{args.rounds} rounds, each a fresh interpreter per arm.  ")
    print(f"Before: {before}  ")
    print(f"After: {load_line()}\n")
    print("| ms | LangGraph | LangGraph + plugin | added by the plugin |")
    print("|---|---:|---:|---:|")
    added = {}
    for column, label in ((0, "wall"), (1, "CPU")):
        framework = summarise([b[column] for b in base])
        plugin = summarise([p[column] for p in with_plugin])
        added[label] = summarise(
            [p[column] - b[column] for b, p in zip(base, with_plugin, strict=True)]
        )
        print(
            f"| {label} | {framework.median:.0f} [{framework.low:.0f}-{framework.high:.0f}] | "
            f"{plugin.median:.0f} [{plugin.low:.0f}-{plugin.high:.0f}] | "
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
