"""Governed versus ungoverned LangGraph agent: the overhead of jevqueue per turn.

Two graphs over the same scripted chat model type (``ScriptedChatModel``, one instance
each; every answer takes ``--latency`` seconds, 1 ms by default) and the same three tools:

* **ungoverned** — the standard loop: ``model.bind_tools(tools)`` in an agent node,
  LangGraph's ``ToolNode``, ``tools_condition``;
* **governed** — ``create_governed_agent``, as a user builds it: the governor decides
  every model turn (default ``Governor()``, lexical ballot), every tool call is built
  into a canonical action and judged by the PEP over the default policy, and every
  decision is written to the hash-chained SQLite audit log (``SQLiteAuditLog``).

One turn is a user request, a model call that calls ``read_file``, the tool, and a model
call that answers: two model calls. After a warm-up, turns alternate between the graphs
(which graph goes first alternates too, so machine noise hits both alike), in several
repetitions. Each repetition reports two ratios, governed over ungoverned: of the median
turn and of the total time; the summary gives the median over the repetitions. The
target is at most 1.10 with a 1 ms model. At the end the run checks that the governed
graph really governed: every first model call forced, one audit record per tool call,
the audit chain verified.

Run from the repository root::

    .venv/bin/python bench/langgraph.py                  # 5 x 200 turns, SQLite audit log
    .venv/bin/python bench/langgraph.py --audit memory   # in-memory audit sink instead
    .venv/bin/python bench/langgraph.py --durability process   # no fsync per record
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a script, this file's folder comes first on sys.path and its name would shadow
# the langgraph package: take the folder off before importing it.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

from jevqueue import Governor, PolicyEnforcementPoint  # noqa: E402
from jevqueue.audit import SQLiteAuditLog, verify_audit_log  # noqa: E402
from jevqueue.plugins.langgraph import create_governed_agent, tool_spec  # noqa: E402
from jevqueue.plugins.langgraph.testing import ScriptedCall, ScriptedChatModel, scripted_tool_call  # noqa: E402
from jevqueue.policy._pdp import create_default_policy_decision_point  # noqa: E402
from jevqueue.testing.recording_audit import RecordingAuditSink  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langchain_core.tools import StructuredTool  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode, tools_condition  # noqa: E402

REQUEST = "Read the text file notes.txt from the workspace and return its content."


def _tools(workspace: Path) -> list[StructuredTool]:
    def read_file(path: str) -> str:
        """Read a text file from the workspace and return its content."""
        return (workspace / path).read_text()

    def write_file(path: str, content: str) -> str:
        """Write text content to a file in the workspace, replacing what was there."""
        return f"wrote {path}"

    def run_command(command: str, cwd: str) -> str:
        """Run a shell command, such as the test suite, in a directory of the workspace."""
        return f"ran {command}"

    return [StructuredTool.from_function(f) for f in (read_file, write_file, run_command)]


def _answer(call: ScriptedCall) -> AIMessage | str:
    # A fresh user request gets the tool call; a tool result gets the final answer.
    if isinstance(call.messages[-1], HumanMessage) or call.tool_choice_set:
        return scripted_tool_call("read_file", {"path": "notes.txt"})
    return "notes.txt says: ship on Friday."


def _model(latency: float, turns: int) -> ScriptedChatModel:
    return ScriptedChatModel(steps=[_answer] * (2 * turns), latency=latency)


def ungoverned_graph(model: Any, tools: list[StructuredTool]) -> Any:
    bound = model.bind_tools(tools)
    graph = StateGraph(MessagesState)
    graph.add_node("agent", lambda state: {"messages": [bound.invoke(state["messages"])]})
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "agent")
    return graph.compile()


def governed_graph(
    model: Any, tools: list[StructuredTool], workspace: Path, audit: str, durability: str
) -> tuple[Any, Any]:
    """The governed graph and its audit sink."""
    if audit == "sqlite":
        sink: Any = SQLiteAuditLog(workspace / "audit.sqlite", durability=durability)  # type: ignore[arg-type]
    else:
        sink = RecordingAuditSink()
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
    app = create_governed_agent(
        model, tools, pep=pep, specs=specs, governor=Governor(), context=context
    )
    return app, sink


def _turn(app: Any) -> float:
    start = time.perf_counter()
    result = app.invoke({"messages": [HumanMessage(REQUEST)]})
    elapsed = time.perf_counter() - start
    if len(result["messages"]) != 4:
        raise AssertionError(f"unexpected turn shape: {result['messages']}")
    return elapsed


def _pair(plain: Any, governed: Any, index: int) -> tuple[float, float]:
    """One turn of each graph; which goes first alternates with ``index``."""
    if index % 2:
        governed_time = _turn(governed)
        return _turn(plain), governed_time
    plain_time = _turn(plain)
    return plain_time, _turn(governed)


def _check_governed(model: Any, sink: Any, audit: str, turns: int, workspace: Path) -> str:
    """Fail unless the governed graph forced, judged and audited every turn."""
    forced = sum(1 for call in model.requests if call.tool_choice_set)
    if len(model.requests) != 2 * turns or forced != turns:
        raise AssertionError(
            f"governed graph: {len(model.requests)} model calls, {forced} forced; expected "
            f"{2 * turns} calls, {turns} forced"
        )
    records = len(sink)
    if records != turns:
        raise AssertionError(f"governed graph: {records} audit records for {turns} tool calls")
    if audit == "sqlite":
        report = verify_audit_log(workspace / "audit.sqlite")
        report.raise_for_problems()
        return f"{records} audit records (one per tool call), SQLite hash chain verified"
    return f"{records} audit records (one per tool call)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200, help="turns per repetition")
    parser.add_argument("--repeats", type=int, default=5, help="repetitions")
    parser.add_argument("--warmup", type=int, default=20, help="untimed turns first")
    parser.add_argument("--latency", type=float, default=0.001, help="model latency, seconds")
    parser.add_argument("--audit", choices=("sqlite", "memory"), default="sqlite")
    parser.add_argument(
        "--durability",
        choices=("machine", "process"),
        default="machine",
        help="the SQLite log's durability (default: the library's default, machine)",
    )
    args = parser.parse_args()

    workspace = Path(tempfile.mkdtemp(prefix="jevqueue-bench-"))
    (workspace / "notes.txt").write_text("Ship on Friday.\n")
    total = args.warmup + args.repeats * args.turns
    tools = _tools(workspace)
    plain = ungoverned_graph(_model(args.latency, total), tools)
    governed_model = _model(args.latency, total)
    governed, sink = governed_graph(governed_model, tools, workspace, args.audit, args.durability)

    for index in range(args.warmup):
        _pair(plain, governed, index)
    # Objects that live for the whole run (imports, graphs) leave the collector's view, so
    # a full collection does not land on whichever turn happens to trigger it.
    gc.collect()
    gc.freeze()

    sink_name = (
        f"SQLite audit log, {args.durability}-durable"
        if args.audit == "sqlite"
        else "in-memory audit sink"
    )
    print(
        f"{args.repeats} x {args.turns} turns (+{args.warmup} warm-up), model latency "
        f"{args.latency * 1e3:g} ms, 2 model calls per turn, {sink_name}"
    )
    print(f"load average before: {_load()}")
    print("rep  ungoverned median  governed median  overhead  ratio (median)  ratio (total)")
    median_ratios: list[float] = []
    total_ratios: list[float] = []
    for rep in range(args.repeats):
        base: list[float] = []
        gov: list[float] = []
        for index in range(args.turns):
            plain_time, governed_time = _pair(plain, governed, index)
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
    print(
        f"ratio governed/ungoverned, median of {args.repeats} repetitions: "
        f"{statistics.median(median_ratios):.3f} (median turn, range "
        f"{min(median_ratios):.3f}-{max(median_ratios):.3f}), "
        f"{statistics.median(total_ratios):.3f} (total, range "
        f"{min(total_ratios):.3f}-{max(total_ratios):.3f})  target <= 1.10"
    )
    print(f"load average after: {_load()}")
    print("governed graph: " + _check_governed(governed_model, sink, args.audit, total, workspace))


def _load() -> str:
    """The machine's load average (1, 5, 15 minutes), stated beside every result."""
    return " / ".join(f"{value:.2f}" for value in os.getloadavg())


if __name__ == "__main__":
    main()
