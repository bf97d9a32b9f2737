"""Governed versus ungoverned Pydantic AI agent: the overhead of jevqueue per run.

Two agents over the same scripted model type (Pydantic AI's own ``FunctionModel``; every
answer takes ``--latency`` seconds, 1 ms by default) and the same three tools:

* **ungoverned** — ``Agent(model, tools=[...])``;
* **governed** — the same agent with ``GovernorCapability(Governor())`` (lexical ballot)
  and ``PolicyCapability`` over the default policy, auditing every decision to the
  hash-chained SQLite log (``SQLiteAuditLog``);
* **two empty capabilities** — the same agent with two capabilities that override
  nothing: what Pydantic AI's own capability dispatch costs, before jevqueue does anything.

One run is a user request, a model request that calls ``read_file``, the tool, and a
model request that answers: two model requests. After a warm-up, runs rotate between the
three agents (which goes first rotates too), in several repetitions. Each repetition
reports the ratios of the median run over the ungoverned median; the summary gives the median
and the range over repetitions, and the load average before and after. At the end the run
checks that the governed agent really governed: every first request forced, one audit
record per tool call, the audit chain verified.

Run from the repository root::

    .venv/bin/python bench/pydantic_ai.py                 # 5 x 200 runs
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a script, this file's folder comes first on sys.path and its name would shadow
# the pydantic_ai package: take the folder off before importing it.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

from jevqueue import Governor, PolicyEnforcementPoint  # noqa: E402
from jevqueue.audit import SQLiteAuditLog, verify_audit_log  # noqa: E402
from jevqueue.plugins.pydantic_ai import (  # noqa: E402
    GovernorCapability,
    PolicyCapability,
    tool_spec,
)
from jevqueue.policy import create_default_policy_decision_point  # noqa: E402
from pydantic_ai import Agent, Tool  # noqa: E402
from pydantic_ai.capabilities import AbstractCapability  # noqa: E402
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

REQUEST = "Read the text file notes.txt from the workspace and return its content."


def _tools(workspace: Path) -> list[Tool[Any]]:
    def read_file(path: str) -> str:
        """Read a text file from the workspace and return its content."""
        return (workspace / path).read_text()

    def write_file(path: str, content: str) -> str:
        """Write text content to a file in the workspace, replacing what was there."""
        return f"wrote {path}"

    def run_command(command: str, cwd: str) -> str:
        """Run a shell command, such as the test suite, in a directory of the workspace."""
        return f"ran {command}"

    return [Tool(read_file), Tool(write_file), Tool(run_command)]


class ScriptedLatencyModel:
    """A ``FunctionModel`` that calls ``read_file`` on a request and answers after it."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.requests = 0
        self.forced = 0
        self.model = FunctionModel(self._answer, model_name="bench")

    async def _answer(self, messages: list[Any], info: AgentInfo) -> ModelResponse:
        self.requests += 1
        if (info.model_settings or {}).get("tool_choice") == ["read_file"]:
            self.forced += 1
        await asyncio.sleep(self.latency)
        # A fresh request gets the tool call; a tool result gets the final answer.
        if any(isinstance(part, ToolReturnPart) for part in messages[-1].parts):
            return ModelResponse(parts=[TextPart("notes.txt says: ship on Friday.")])
        return ModelResponse(parts=[ToolCallPart("read_file", {"path": "notes.txt"})])


def governed_agent(model: Any, tools: list[Tool[Any]], workspace: Path) -> tuple[Any, Any]:
    sink = SQLiteAuditLog(workspace / "audit.sqlite", durability="process")
    pep = PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=sink)
    read_file, write_file, run_command = tools
    specs = [
        tool_spec(read_file, side_effects={"file_read"}, path_fields=["path"]),
        tool_spec(write_file, side_effects={"file_write"}, path_fields=["path"]),
        tool_spec(run_command, side_effects={"shell_command"}, cwd_field="cwd"),
    ]
    context = {
        "task_id": "bench",
        "actor_id": "bench-agent",
        "workspace": str(workspace),
        "git_sha": "0123456789abcdef0123456789abcdef01234567",
    }
    policy = PolicyCapability(pep=pep, specs=specs, context=context)
    agent = Agent(model, tools=tools, capabilities=[GovernorCapability(Governor()), policy])
    return agent, sink


async def _run(agent: Any) -> float:
    start = time.perf_counter()
    result = await agent.run(REQUEST)
    elapsed = time.perf_counter() - start
    if len(result.all_messages()) != 4:
        raise AssertionError(f"unexpected run shape: {result.all_messages()}")
    return elapsed


class EmptyCapability(AbstractCapability[Any]):
    """A capability that overrides nothing."""


async def _round(agents: list[Any], index: int) -> list[float]:
    """One run of each agent; the order rotates with ``index``."""
    times = [0.0] * len(agents)
    for step in range(len(agents)):
        which = (index + step) % len(agents)
        times[which] = await _run(agents[which])
    return times


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="runs per repetition")
    parser.add_argument("--repeats", type=int, default=5, help="repetitions")
    parser.add_argument("--warmup", type=int, default=20, help="untimed runs first")
    parser.add_argument("--latency", type=float, default=0.001, help="model latency, seconds")
    args = parser.parse_args()

    workspace = Path(tempfile.mkdtemp(prefix="jevqueue-bench-"))
    (workspace / "notes.txt").write_text("Ship on Friday.\n")
    tools = _tools(workspace)
    plain_model = ScriptedLatencyModel(args.latency)
    plain = Agent(plain_model.model, tools=tools)
    governed_model = ScriptedLatencyModel(args.latency)
    governed, sink = governed_agent(governed_model.model, tools, workspace)
    empty_model = ScriptedLatencyModel(args.latency)
    empty = Agent(
        empty_model.model, tools=tools, capabilities=[EmptyCapability(), EmptyCapability()]
    )
    agents = [plain, governed, empty]

    for index in range(args.warmup):
        await _round(agents, index)
    gc.collect()
    gc.freeze()

    load_before = os.getloadavg()
    print(
        f"{args.repeats} x {args.runs} runs (+{args.warmup} warm-up), model latency "
        f"{args.latency * 1e3:g} ms, 2 model requests per run, SQLite audit log; "
        f"load average {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}"
    )
    print(
        "rep  ungoverned median  governed median  overhead  ratio (median)  "
        "empty-capabilities ratio"
    )
    ratios: list[float] = []
    empty_ratios: list[float] = []
    for rep in range(args.repeats):
        samples: list[list[float]] = [[], [], []]
        for index in range(args.runs):
            for arm, elapsed in enumerate(await _round(agents, index)):
                samples[arm].append(elapsed)
        base_median, gov_median, empty_median = (statistics.median(s) for s in samples)
        ratios.append(gov_median / base_median)
        empty_ratios.append(empty_median / base_median)
        print(
            f"{rep + 1:>3}  {base_median * 1e3:>14.2f} ms  {gov_median * 1e3:>12.2f} ms  "
            f"{(gov_median - base_median) * 1e3:>5.2f} ms  {ratios[-1]:>14.3f}  "
            f"{empty_ratios[-1]:>24.3f}"
        )
    load_after = os.getloadavg()
    print(
        f"ratio governed/ungoverned, median of {args.repeats} repetitions: "
        f"{statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}); "
        f"two empty capabilities: {statistics.median(empty_ratios):.3f} (range "
        f"{min(empty_ratios):.3f}-{max(empty_ratios):.3f}); load average after "
        f"{load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}"
    )
    total = args.warmup + args.repeats * args.runs
    if governed_model.requests != 2 * total or governed_model.forced != total:
        raise AssertionError(
            f"governed agent: {governed_model.requests} requests, {governed_model.forced} "
            f"forced; expected {2 * total}, {total} forced"
        )
    if len(sink) != total:
        raise AssertionError(f"governed agent: {len(sink)} audit records for {total} calls")
    verify_audit_log(workspace / "audit.sqlite").raise_for_problems()
    print(f"governed agent: {total} forced requests, {total} audit records, chain verified")


if __name__ == "__main__":
    asyncio.run(main())
