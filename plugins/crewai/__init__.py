"""Govern CrewAI agents: the governor on every model turn, the PEP in front of every tool.

Two pieces, usable together or apart:

* **Tool enforcement** — a :class:`ToolGuard` (the CrewAI adapter of
  :class:`jevqueue.policy.Guard`) judges each tool call with the policy enforcement point
  before it runs, in one of two forms: :class:`GovernedTool` wrappers (``guard.wrap([...])``
  over ``BaseTool`` subclasses and ``@tool`` functions), which run the judged arguments
  through ``guard.run``, or :class:`GovernedToolHooks` (CrewAI's ``before_tool_call`` /
  ``after_tool_call``), which replace the call's input with the judged arguments. Both
  fail closed: any exception inside the check is a denial, and no exception of ours ever
  reaches CrewAI's hook dispatcher, which would swallow it and run the tool (fail-open).
  A denial comes back to the agent as the tool's result, so the crew continues. Calls
  that need an explicit approval go to the ``approver=`` (any
  :class:`~jevqueue.policy.Approver`, shown the core :class:`~jevqueue.policy.ApprovalRequest`;
  ``AuthorityApprover`` for automation, ``ConsoleApprover`` for a person at a terminal);
  the records it returns are checked by the PEP, and an approver declines with
  :class:`~jevqueue.errors.ApprovalDeclinedError`. CrewAI has no native pause: the
  approver is asked inline.
* **Turn governance** — :class:`GovernedLLM` wraps the agent's ``BaseLLM`` and runs the
  governor on every call: the forced tool's schema is the only one passed on, a prose
  turn passes on no tools, the passthrough passes everything unchanged, and the reply is
  read back with CrewAI's own ``extract_tool_call_info``; a reply that does not make
  exactly the forced call raises :class:`CrewProviderDisobeyedError` before the executor
  dispatches anything.

What the agent read — each crew task's words (the user's), every tool output, the id the
model gave each call — is recorded in the guard's transcript by the governed LLM, the
wrappers and the hooks (:mod:`.transcript`), so each call is judged with the provenance of
its arguments and an approval request says where a value came from; ``tool_spec(...,
output_trust=...)`` declares whether a tool's output is trusted.

What CrewAI cannot force, and what the wrappers do about it:

* **ReAct text mode cannot be forced at all.** When the LLM does not report native
  function calling, CrewAI puts the tool descriptions in the prompt and parses
  ``Action:`` lines from the model's text; no tool schema and no ``tool_choice`` reach the
  model. :class:`GovernedLLM` refuses to claim forcing there: by default
  (``react="delegate"``) it passes the turn through untouched, warns once and records a
  ``delegate`` decision whose reason says so; ``react="raise"`` refuses to run in that
  mode. The tool guard still judges every call.
* **CrewAI cannot pass a named tool_choice through ``BaseLLM.call``**, which has no
  ``tool_choice`` or ``parallel_tool_calls`` parameter, and its providers overwrite or
  ignore the one set on ``LLM(tool_choice=...)``: the native OpenAI provider replaces it
  with ``"auto"`` whenever tools are sent (and leaks it into requests without tools), the
  native Anthropic provider ignores it. So "forcing" here means narrowing: the model is
  offered the one chosen tool and nothing else, but it may still answer in prose or call
  twice. The read-back catches both and blocks the reply. The constraint is also
  published through :func:`current_tool_constraint` for a ``BaseLLM`` of your own that
  can set a real named ``tool_choice`` and ``parallel_tool_calls=False``.
* **The executor dispatches tools that were not offered that turn**: it runs any tool
  the agent owns that a reply names. The governed LLM records each turn's constraint in
  the guard's :class:`TurnScope`; while a tool is forced (or a turn allows no tools) the
  guard refuses a call of any other tool, including one a provider runs by itself from
  ``available_functions``.

Routes around the guard, refused before the agent's first provider call (a
``ConfigurationError`` naming the alternative), when the agent's LLM is a
:class:`GovernedLLM` with ``guard=``:

* a tool with no declaration (refused by ``guard.wrap``, and by the hooks when called);
* ``allow_code_execution=True`` (code no guard judges: give the agent a declared,
  sandboxed ``shell_command`` tool instead);
* without the guard's hooks installed, any tool the agent or its executor holds that is
  not a :class:`GovernedTool`: a plain tool given or added after wrapping, and the tools
  CrewAI adds when a task runs — MCP tools (``mcps=``), platform apps (``apps=``),
  delegation, memory and skill tools. Install ``guard.hooks()`` (every call judged) or
  name such tools in ``GovernedLLM(..., ungoverned=[...])``.

Install with ``pip install "jevqueue[crewai]"``. Disable CrewAI's telemetry where no
network is wanted (``CREWAI_DISABLE_TELEMETRY=true``, ``OTEL_SDK_DISABLED=true``,
``CREWAI_TRACING_ENABLED=false``).
"""

from __future__ import annotations

try:
    import crewai  # noqa: F401  (fail here, with the extra's name, not deep in a submodule)
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'jevqueue.plugins.crewai needs CrewAI: pip install "jevqueue[crewai]"'
    ) from exc

from jevqueue.plugins.crewai.approval import (
    ApprovalCallback,
    ApprovalRequest,
    AuthorityApproval,
    ConsoleApproval,
)
from jevqueue.plugins.crewai.crew_host import CrewTurnHost, LocalText
from jevqueue.plugins.crewai.governed_llm import REACT_NOTE, GovernedLLM
from jevqueue.plugins.crewai.governed_tool import GovernedTool
from jevqueue.plugins.crewai.stops import (
    CrewProviderDisobeyedError,
    CrewTurnInterruptedError,
    ForcingUnavailableError,
)
from jevqueue.plugins.crewai.tool_guard import DENIAL_CODE, GuardOutcome, ToolGuard
from jevqueue.plugins.crewai.tool_hooks import GovernedToolHooks
from jevqueue.plugins.crewai.tool_spec import tool_spec
from jevqueue.plugins.crewai.turn import ToolConstraint, TurnScope, current_tool_constraint

__all__ = [
    "DENIAL_CODE",
    "REACT_NOTE",
    "ApprovalCallback",
    "ApprovalRequest",
    "AuthorityApproval",
    "ConsoleApproval",
    "CrewProviderDisobeyedError",
    "CrewTurnHost",
    "CrewTurnInterruptedError",
    "ForcingUnavailableError",
    "GovernedLLM",
    "GovernedTool",
    "GovernedToolHooks",
    "GuardOutcome",
    "LocalText",
    "ToolConstraint",
    "ToolGuard",
    "TurnScope",
    "current_tool_constraint",
    "tool_spec",
]
