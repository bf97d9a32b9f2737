"""Governed versus ungoverned LlamaIndex FunctionAgent: the overhead of jevqueue per turn.

Two agents over the same scripted model type (``ScriptedFunctionCallingLLM``, one instance
each; every answer takes ``--latency`` seconds, 1 ms by default) and the same three tools:

* **ungoverned** — a stock ``FunctionAgent`` with the plain tools;
* **governed** — ``GovernedFunctionAgent`` as a user builds it: the governor decides every
  model step (default ``Governor()``, lexical ballot, read-back), every tool call is built
  into a canonical action and judged by the PEP over the default policy
  (``governed_tools``), and every decision is written to the hash-chained SQLite audit
  log (``SQLiteAuditLog``).

One turn is one ``agent.run(user_msg=...)``: a model step that calls ``read_file``, the
tool, and a model step that answers — two steps. After a warm-up, turns alternate between
the agents (which goes first alternates too, so machine noise hits both alike), in several
repetitions. Each repetition reports two ratios, governed over ungoverned: of the median
turn and of the total time; the summary gives the median over the repetitions and their
range, and the load average before and after. The target is at most 1.10 with a 1 ms
model. At the end the run checks that the governed agent really governed: every first
step forced, one audit record per tool call, the audit chain verified.

Run from the repository root::

    .venv/bin/python bench/llamaindex.py                  # 5 x 100 turns, SQLite audit log
    .venv/bin/python bench/llamaindex.py --streaming      # FunctionAgent(streaming=True)
    .venv/bin/python bench/llamaindex.py --audit memory   # in-memory audit sink instead
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from jevqueue import Governor, PolicyEnforcementPoint
from jevqueue.audit import SQLiteAuditLog, verify_audit_log
from jevqueue.plugins.llamaindex import GovernedFunctionAgent, tool_spec
from jevqueue.plugins.llamaindex.testing import (
    ScriptedFunctionCallingLLM,
    ScriptedRequest,
    scripted_tool_calls,
)
from jevqueue.policy import create_default_policy_decision_point
from jevqueue.testing.recording_audit import RecordingAuditSink
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.tools import FunctionTool

REQUEST = "Read the text file notes.txt from the workspace and return its content."


def _tools(workspace: Path) -> list[FunctionTool]:
    def read_file(path: str) -> str:
        """Read a text file from the workspace and return its content."""
        return Path(path).read_text() if os.path.isabs(path) else (workspace / path).read_text()

    def write_file(path: str, content: str) -> str:
        """Write text content to a file in the workspace, replacing what was there."""
        return f"wrote {path}"

    def run_command(command: str, cwd: str) -> str:
        """Run a shell command, such as the test suite, in a directory of the workspace."""
        return f"ran {command}"

    return [FunctionTool.from_defaults(f) for f in (read_file, write_file, run_command)]


def _answer(request: ScriptedRequest) -> Any:
    # A step after a tool result answers; any other step calls the tool.
    if any(message.role.value == "tool" for message in request.messages):
        return "notes.txt says: ship on Friday."
    return scripted_tool_calls(("read_file", {"path": "notes.txt"}))


def _model(latency: float, turns: int) -> ScriptedFunctionCallingLLM:
    return ScriptedFunctionCallingLLM(steps=[_answer] * (2 * turns), latency=latency)


def governed_agent(
    model: Any, tools: list[FunctionTool], workspace: Path, audit: str, streaming: bool
) -> tuple[GovernedFunctionAgent, Any]:
    """The governed agent and its audit sink."""
    if audit == "sqlite":
        sink: Any = SQLiteAuditLog(workspace / "audit.sqlite", durability="process")
    else:
        sink = RecordingAuditSink()
    pep = PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=sink)
    read_file, write_file, run_command = tools
    agent = GovernedFunctionAgent(
        llm=model,
        governor=Governor(),
        tools=tools,
        pep=pep,
        specs=[
            tool_spec(read_file, side_effects={"file_read"}, path_fields=["path"]),
            tool_spec(write_file, side_effects={"file_write"}, path_fields=["path"]),
            tool_spec(run_command, side_effects={"shell_command"}, cwd_field="cwd"),
        ],
        context={
            "task_id": "bench",
            "actor_id": "bench-agent",
            "workspace": str(workspace),
            "git_sha": "0123456789abcdef0123456789abcdef01234567",
        },
        streaming=streaming,
    )
    return agent, sink


async def _turn(agent: Any) -> float:
    start = time.perf_counter()
    result = await agent.run(user_msg=REQUEST)
    elapsed = time.perf_counter() - start
    if "ship on Friday" not in str(result) or len(result.tool_calls) != 1:
        raise AssertionError(f"unexpected turn: {result!r}")
    return elapsed


async def _pair(plain: Any, governed: Any, index: int) -> tuple[float, float]:
    """One turn of each agent; which goes first alternates with ``index``."""
    if index % 2:
        governed_time = await _turn(governed)
        return await _turn(plain), governed_time
    plain_time = await _turn(plain)
    return plain_time, await _turn(governed)


def _check_governed(model: Any, sink: Any, audit: str, turns: int, workspace: Path) -> str:
    """Fail unless the governed agent forced, judged and audited every turn."""
    forced = sum(1 for request in model.requests if request.forced_tool == "read_file")
    if len(model.requests) != 2 * turns or forced != turns:
        raise AssertionError(
            f"governed agent: {len(model.requests)} model calls, {forced} forced; expected "
            f"{2 * turns} calls, {turns} forced"
        )
    records = len(sink)
    if records != turns:
        raise AssertionError(f"governed agent: {records} audit records for {turns} tool calls")
    if audit == "sqlite":
        verify_audit_log(workspace / "audit.sqlite").raise_for_problems()
        return f"{records} audit records (one per tool call), SQLite hash chain verified"
    return f"{records} audit records (one per tool call)"


async def bench(args: argparse.Namespace) -> None:
    workspace = Path(tempfile.mkdtemp(prefix="jevqueue-bench-"))
    (workspace / "notes.txt").write_text("Ship on Friday.\n")
    total = args.warmup + args.repeats * args.turns
    tools = _tools(workspace)
    plain = FunctionAgent(llm=_model(args.latency, total), tools=tools, streaming=args.streaming)
    governed_model = _model(args.latency, total)
    governed, sink = governed_agent(governed_model, tools, workspace, args.audit, args.streaming)

    for index in range(args.warmup):
        await _pair(plain, governed, index)
    # Objects that live for the whole run leave the collector's view, so a full
    # collection does not land on whichever turn happens to trigger it.
    gc.collect()
    gc.freeze()

    load_before = os.getloadavg()
    sink_name = "SQLite audit log" if args.audit == "sqlite" else "in-memory audit sink"
    print(
        f"{args.repeats} x {args.turns} turns (+{args.warmup} warm-up), model latency "
        f"{args.latency * 1e3:g} ms, 2 model steps per turn, streaming={args.streaming}, "
        f"{sink_name}; load average {load_before[0]:.2f} {load_before[1]:.2f} "
        f"{load_before[2]:.2f} on {os.cpu_count()} CPUs"
    )
    print("rep  ungoverned median  governed median  overhead  ratio (median)  ratio (total)")
    median_ratios: list[float] = []
    total_ratios: list[float] = []
    for rep in range(args.repeats):
        base: list[float] = []
        gov: list[float] = []
        for index in range(args.turns):
            plain_time, governed_time = await _pair(plain, governed, index)
            base.append(plain_time)
            gov.append(governed_time)
        base_median, gov_median = statistics.median(base), statistics.median(gov)
        median_ratios.append(gov_median / base_median)
        total_ratios.append(sum(gov) / sum(base))
        print(
            f"{rep + 1:>3}  {base_median * 1e3:>14.2f} ms  {gov_median * 1e3:>12.2f} ms  "
            f"{(gov_median - base_median) * 1e3:>5.2f} ms  {median_ratios[-1]:>14.3f}  "
            f"{total_ratios[-1]:>13.3f}"
        )
    load_after = os.getloadavg()
    print(
        f"ratio governed/ungoverned, median of {args.repeats} repetitions: "
        f"{statistics.median(median_ratios):.3f} (median turn, range "
        f"{min(median_ratios):.3f}-{max(median_ratios):.3f}), "
        f"{statistics.median(total_ratios):.3f} (total, range "
        f"{min(total_ratios):.3f}-{max(total_ratios):.3f})  target <= 1.10"
    )
    print(f"load average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    print("governed agent: " + _check_governed(governed_model, sink, args.audit, total, workspace))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=100, help="turns per repetition")
    parser.add_argument("--repeats", type=int, default=5, help="repetitions")
    parser.add_argument("--warmup", type=int, default=20, help="untimed turns first")
    parser.add_argument("--latency", type=float, default=0.001, help="model latency, seconds")
    parser.add_argument("--audit", choices=("sqlite", "memory"), default="sqlite")
    parser.add_argument("--streaming", action="store_true", help="FunctionAgent(streaming=True)")
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
