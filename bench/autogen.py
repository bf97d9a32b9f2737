"""Governed versus ungoverned AutoGen agents, in both worlds: the overhead of jevqueue per turn.

For each world two agents over the same scripted model type (one instance each; every
answer takes ``--latency`` seconds, 1 ms by default) and the same three tools:

* **AgentChat** — an ``AssistantAgent`` (``max_tool_iterations=2``). *Ungoverned*: the
  scripted ``ChatCompletionClient`` and ``tools=[...]``. *Governed*:
  ``GovernedChatCompletionClient(model, Governor())`` and a ``PolicyWorkbench`` over a
  ``StaticWorkbench`` of the same tools.
* **classic AutoGen (ag2)** — an assistant ``ConversableAgent`` answered through its own
  ``OpenAIWrapper`` by the scripted model client, and an executor with the tools
  registered. *Governed*: ``GovernorCapability(Governor())`` on the assistant,
  ``PolicyCapability`` on the executor.

Governed means as a user builds it: the default ``Governor()`` (lexical ballot) on every
model call, every tool call built into a canonical action and judged by a PEP over the
default policy, every decision written to the hash-chained ``SQLiteAuditLog``.

One turn is a user request, a model call that calls ``read_file`` (forced when governed),
the tool, and a model call that answers (a passthrough): two model calls. Turns alternate
between the two agents of a world (which goes first alternates too, so machine noise hits
both alike), in several repetitions; each repetition reports the ratio, governed over
ungoverned, of the median turn and of the total. The target is at most 1.10 with a 1 ms
model. The run ends by checking that the governed agents governed: half their model
calls forced, one audit record per tool call, the audit chains verified.

Run from the repository root::

    .venv/bin/python bench/autogen.py                      # both worlds, 5 x 100 turns each
    .venv/bin/python bench/autogen.py --world agentchat    # one world
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import io
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

# Run as a script, this file's folder comes first on sys.path; keep it from shadowing
# installed packages.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

from jevqueue import Governor, PolicyEnforcementPoint, ToolRegistry  # noqa: E402
from jevqueue.audit import SQLiteAuditLog, verify_audit_log  # noqa: E402
from jevqueue.plugins.autogen import tool_spec  # noqa: E402
from jevqueue.policy import create_default_policy_decision_point  # noqa: E402

REQUEST = "Read the text file notes.txt from the workspace and return its content."
ANSWER = "notes.txt says: ship on Friday."
GIT_SHA = "0123456789abcdef0123456789abcdef01234567"


def _bodies(workspace: Path) -> list[Callable[..., str]]:
    def read_file(path: str) -> str:
        """Read a text file from the workspace and return its content."""
        return (workspace / path).read_text()

    def write_file(path: str, content: str) -> str:
        """Write text content to a file in the workspace, replacing what was there."""
        return f"wrote {path}"

    def run_command(command: str, cwd: str) -> str:
        """Run a shell command, such as the test suite, in a directory of the workspace."""
        return f"ran {command}"

    return [read_file, write_file, run_command]


def _policy(tools: list[Any], workspace: Path, name: str) -> tuple[Any, Any, Path, dict[str, str]]:
    read_file, write_file, run_command = tools
    specs = [
        tool_spec(read_file, side_effects={"file_read"}, path_fields=["path"]),
        tool_spec(write_file, side_effects={"file_write"}, path_fields=["path"]),
        tool_spec(run_command, side_effects={"shell_command"}, cwd_field="cwd"),
    ]
    log_path = workspace / f"{name}-audit.sqlite"
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(registry=ToolRegistry(specs)),
        audit_logger=SQLiteAuditLog(log_path, durability="process"),
    )
    context = {
        "task_id": "bench",
        "actor_id": "bench-agent",
        "workspace": str(workspace),
        "git_sha": GIT_SHA,
    }
    return pep, specs, log_path, context


# --- AgentChat ------------------------------------------------------------------------


def agentchat_arms(workspace: Path, latency: float, turns: int) -> dict[str, Any]:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_core.models import UserMessage
    from autogen_core.tools import FunctionTool, StaticWorkbench
    from jevqueue.plugins.autogen import GovernedChatCompletionClient, PolicyWorkbench
    from jevqueue.plugins.autogen.testing import ScriptedChatCompletionClient, tool_call

    def answer(request: Any) -> Any:
        # A fresh user request (or a forced turn) gets the tool call; a tool result the answer.
        if request.forced_tool or isinstance(request.messages[-1], UserMessage):
            return tool_call("read_file", {"path": "notes.txt"})
        return ANSWER

    def model() -> Any:
        return ScriptedChatCompletionClient([answer] * (2 * turns), latency=latency)

    tools = [FunctionTool(f, f.__doc__ or "") for f in _bodies(workspace)]
    pep, specs, log_path, context = _policy(tools, workspace, "agentchat")
    plain_model, governed_model = model(), model()
    plain = AssistantAgent(
        "assistant", model_client=plain_model, tools=tools, max_tool_iterations=2
    )
    governed = AssistantAgent(
        "assistant",
        model_client=GovernedChatCompletionClient(governed_model, Governor()),
        workbench=PolicyWorkbench(StaticWorkbench(tools), pep=pep, specs=specs, context=context),
        max_tool_iterations=2,
    )

    def turn(agent: Any) -> Callable[[], Awaitable[tuple[float, float]]]:
        from autogen_core import CancellationToken

        async def one() -> tuple[float, float]:
            await agent.on_reset(CancellationToken())  # every turn starts a new conversation
            start, cpu = time.perf_counter(), time.process_time()
            result = await agent.run(task=REQUEST)
            elapsed = (time.perf_counter() - start, time.process_time() - cpu)
            if result.messages[-1].content != ANSWER:
                raise AssertionError(f"unexpected turn: {result.messages[-1]!r}")
            return elapsed

        return one

    def check(total: int) -> str:
        forced = sum(1 for r in governed_model.requests if r.forced_tool == "read_file")
        return _checked(len(governed_model.requests), forced, total, log_path)

    return {"plain": turn(plain), "governed": turn(governed), "check": check}


# --- classic AutoGen (ag2) ----------------------------------------------------------------


def classic_arms(workspace: Path, latency: float, turns: int) -> dict[str, Any]:
    logging.getLogger("autogen").setLevel(logging.WARNING)
    from autogen import ConversableAgent, register_function
    from autogen.tools import Tool
    from jevqueue.plugins.autogen import GovernorCapability, PolicyCapability
    from jevqueue.plugins.autogen.testing import ScriptedModel, classic_tool_call

    def answer(request: Any) -> Any:
        if request.forced_tool or request.messages[-1].get("role") == "user":
            return classic_tool_call("read_file", {"path": "notes.txt"})
        return ANSWER

    bodies = _bodies(workspace)
    pep, specs, log_path, context = _policy(
        [Tool(func_or_tool=f) for f in bodies], workspace, "classic"
    )

    def pair(governed: bool) -> tuple[Any, Any, Any]:
        model = ScriptedModel([answer] * (2 * turns), latency=latency)
        assistant = ConversableAgent(
            "assistant", llm_config=model.llm_config(), human_input_mode="NEVER"
        )
        executor = ConversableAgent("executor", llm_config=False, human_input_mode="NEVER")
        for function in bodies:
            register_function(
                function, caller=assistant, executor=executor, description=function.__doc__ or ""
            )
        model.install(assistant)
        if governed:
            GovernorCapability(Governor()).add_to_agent(assistant)
            PolicyCapability(pep, specs=specs, context=context).add_to_agent(executor)
        return assistant, executor, model

    plain_pair, governed_pair = pair(False), pair(True)

    def turn(agents: tuple[Any, Any, Any]) -> Callable[[], Awaitable[tuple[float, float]]]:
        assistant, executor, _ = agents

        async def one() -> tuple[float, float]:
            start, cpu = time.perf_counter(), time.process_time()
            result = executor.initiate_chat(
                assistant, message=REQUEST, max_turns=2, silent=True, clear_history=True
            )
            elapsed = (time.perf_counter() - start, time.process_time() - cpu)
            if result.chat_history[-1]["content"] != ANSWER:
                raise AssertionError(f"unexpected turn: {result.chat_history[-1]!r}")
            return elapsed

        return one

    def check(total: int) -> str:
        model = governed_pair[2]
        forced = sum(1 for r in model.requests if r.forced_tool == "read_file")
        return _checked(len(model.requests), forced, total, log_path)

    return {"plain": turn(plain_pair), "governed": turn(governed_pair), "check": check}


# --- the run ----------------------------------------------------------------------------


def _checked(calls: int, forced: int, total: int, log_path: Path) -> str:
    if calls != 2 * total or forced != total:
        raise AssertionError(
            f"governed agent: {calls} model calls, {forced} forced; expected {2 * total}, {total}"
        )
    report = verify_audit_log(log_path)
    report.raise_for_problems()
    if report.count != total:
        raise AssertionError(f"{report.count} audit records for {total} tool calls")
    return f"{forced} of {calls} model calls forced, {report.count} audit records, chain verified"


Timing = tuple[float, float]  # (wall seconds, CPU seconds of the whole process)


async def _pair(arms: dict[str, Any], index: int) -> tuple[Timing, Timing]:
    # Tools and ag2 print as they run; both arms print alike, and none of it is shown.
    with contextlib.redirect_stdout(io.StringIO()):
        if index % 2:
            governed = await arms["governed"]()
            return await arms["plain"](), governed
        plain = await arms["plain"]()
        return plain, await arms["governed"]()


async def run_world(name: str, arms: dict[str, Any], args: argparse.Namespace) -> None:
    for index in range(args.warmup):
        await _pair(arms, index)
    gc.collect()
    gc.freeze()  # long-lived objects out of the collector's view: no arm pays a full pass
    print(f"\n{name}: {args.repeats} x {args.turns} turns (+{args.warmup} warm-up)")
    print(
        "rep  ungoverned median  governed median  overhead  ratio (median)  ratio (total)"
        "  CPU ungoverned  CPU governed"
    )
    medians: list[float] = []
    totals: list[float] = []
    for rep in range(args.repeats):
        base: list[float] = []
        gov: list[float] = []
        base_cpu: list[float] = []
        gov_cpu: list[float] = []
        for index in range(args.turns):
            plain, governed = await _pair(arms, index)
            base.append(plain[0])
            gov.append(governed[0])
            base_cpu.append(plain[1])
            gov_cpu.append(governed[1])
        base_median, gov_median = statistics.median(base), statistics.median(gov)
        medians.append(gov_median / base_median)
        totals.append(sum(gov) / sum(base))
        # CPU time is what the turn itself computed: less disturbed by a loaded machine.
        print(
            f"{rep + 1:>3}  {base_median * 1e3:>14.2f} ms  {gov_median * 1e3:>12.2f} ms  "
            f"{(gov_median - base_median) * 1e3:>5.2f} ms  {medians[-1]:>14.3f}  "
            f"{totals[-1]:>13.3f}  {statistics.median(base_cpu) * 1e3:>11.2f} ms  "
            f"{statistics.median(gov_cpu) * 1e3:>9.2f} ms"
        )
    print(
        f"{name} ratio governed/ungoverned, median of {args.repeats}: "
        f"{statistics.median(medians):.3f} (median turn, range {min(medians):.3f}-"
        f"{max(medians):.3f}), {statistics.median(totals):.3f} (total, range "
        f"{min(totals):.3f}-{max(totals):.3f})  target <= 1.10"
    )
    print(f"{name} governed: " + arms["check"](args.warmup + args.repeats * args.turns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", choices=("agentchat", "classic", "both"), default="both")
    parser.add_argument("--turns", type=int, default=100, help="turns per repetition")
    parser.add_argument("--repeats", type=int, default=5, help="repetitions")
    parser.add_argument("--warmup", type=int, default=20, help="untimed turns first")
    parser.add_argument("--latency", type=float, default=0.001, help="model latency, seconds")
    args = parser.parse_args()
    total = args.warmup + args.repeats * args.turns
    load = os.getloadavg()
    print(
        f"model latency {args.latency * 1e3:g} ms, 2 model calls per turn, SQLite audit log; "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (1, 5, 15 min)"
    )

    async def both() -> None:
        for name, build in (("AgentChat", agentchat_arms), ("classic", classic_arms)):
            if args.world not in ("both", name.lower()):
                continue
            workspace = Path(tempfile.mkdtemp(prefix=f"jevqueue-bench-{name.lower()}-"))
            (workspace / "notes.txt").write_text("Ship on Friday.\n")
            await run_world(name, build(workspace, args.latency, total), args)
            gc.unfreeze()

    asyncio.run(both())
    load = os.getloadavg()
    print(f"\nload average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
