"""Governed versus ungoverned LangGraph agent: the overhead of jevqueue per turn.

Two graphs over the same scripted chat model (each answer takes ``--latency`` seconds,
1 ms by default) and the same three tools:

* **ungoverned** — the standard loop: ``model.bind_tools(tools)`` in an agent node,
  LangGraph's ``ToolNode``, ``tools_condition``;
* **governed** — ``create_governed_agent``: the governor decides every model turn (default
  ``Governor()``, lexical ballot), every tool call is built into a canonical action and
  judged by the PEP over the default policy, with every decision written to the audit log.

One turn is a user request, a model call that calls ``read_file``, the tool, and a model
call that answers: two model calls. Turns alternate between the graphs (interleaved, so
machine noise hits both alike) after a warm-up. The ratio is governed time over
ungoverned time; the target is at most 1.10 with a 1 ms model.

Run from the repository root::

    .venv/bin/python bench/langgraph.py                 # 200 turns, in-memory audit sink
    .venv/bin/python bench/langgraph.py --audit sqlite  # the durable SQLite audit log
"""

from __future__ import annotations

import argparse
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
from jevqueue.pdp import create_default_policy_decision_point  # noqa: E402
from jevqueue.plugins.langgraph import create_governed_agent, tool_spec  # noqa: E402
from jevqueue.plugins.langgraph.testing import ScriptedCall, ScriptedChatModel, scripted_tool_call  # noqa: E402
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


def governed_graph(model: Any, tools: list[StructuredTool], workspace: Path, audit: str) -> Any:
    if audit == "sqlite":
        from jevqueue.audit import SQLiteAuditLog

        sink: Any = SQLiteAuditLog(workspace / "audit.sqlite")
    else:
        sink = RecordingAuditSink()
    pep = PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=sink)
    read_file, write_file, run_command = tools
    specs = [
        tool_spec(read_file, side_effects={"file_read"}, path_fields=["path"]),
        tool_spec(write_file, side_effects={"file_write"}, path_fields=["path"]),
        tool_spec(run_command, side_effects={"shell_command"}, cwd_field="cwd"),
    ]
    governor = Governor()
    context = {
        "task_id": "bench",
        "actor_id": "bench-agent",
        "workspace": str(workspace),
        "git_sha": "0123456789abcdef0123456789abcdef01234567",
    }
    app = create_governed_agent(
        model, tools, pep=pep, specs=specs, governor=governor, context=context
    )
    return app


def _turn(app: Any) -> float:
    start = time.perf_counter()
    result = app.invoke({"messages": [HumanMessage(REQUEST)]})
    elapsed = time.perf_counter() - start
    if len(result["messages"]) != 4:
        raise AssertionError(f"unexpected turn shape: {result['messages']}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.001, help="model latency, seconds")
    parser.add_argument("--audit", choices=("memory", "sqlite"), default="memory")
    args = parser.parse_args()

    workspace = Path(tempfile.mkdtemp(prefix="jevqueue-bench-"))
    (workspace / "notes.txt").write_text("Ship on Friday.\n")
    total = args.turns + args.warmup
    tools = _tools(workspace)
    plain = ungoverned_graph(_model(args.latency, total), tools)
    governed_model = _model(args.latency, total)
    governed = governed_graph(governed_model, tools, workspace, args.audit)

    base: list[float] = []
    gov: list[float] = []
    for index in range(total):
        # Alternate which graph goes first, so neither always runs on a warm cache.
        order = [(plain, base), (governed, gov)]
        if index % 2:
            order.reverse()
        for app, sink in order:
            elapsed = _turn(app)
            if index >= args.warmup:
                sink.append(elapsed)

    ratio = sum(gov) / sum(base)
    median_ratio = statistics.median(gov) / statistics.median(base)
    print(
        f"turns: {args.turns} (+{args.warmup} warm-up), model latency {args.latency * 1e3:g} ms, "
        f"2 model calls per turn, audit sink: {args.audit}"
    )
    print(
        f"ungoverned: median {statistics.median(base) * 1e3:.2f} ms/turn, total {sum(base):.3f} s"
    )
    print(f"governed:   median {statistics.median(gov) * 1e3:.2f} ms/turn, total {sum(gov):.3f} s")
    overhead = (statistics.median(gov) - statistics.median(base)) * 1e3
    print(f"overhead:   {overhead:.2f} ms/turn (median)")
    measured = governed_model.calls[2 * args.warmup :]
    forced = sum(1 for call in measured if call.tool_choice_set)
    print(f"governed model calls: {len(measured)}, of which forced (tool_choice set): {forced}")
    print(
        f"ratio governed/ungoverned: {ratio:.3f} (total), {median_ratio:.3f} (median)"
        f"  target <= 1.10"
    )


if __name__ == "__main__":
    main()
