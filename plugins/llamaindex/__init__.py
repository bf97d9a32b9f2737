"""jevqueue for LlamaIndex: governed agent workers, wrapped tools, approvals as workflow events.

Install with ``pip install "jevqueue[llamaindex]"``.

::

    from jevqueue.plugins.llamaindex import GovernedFunctionAgent, tool_spec

    agent = GovernedFunctionAgent(
        llm=OpenAI(model="gpt-4.1-mini"), governor=Governor(),
        tools=[get_weather, run_command],
        pep=pep, context=context,
        specs=[tool_spec(get_weather, side_effects={"network"}),
               tool_spec(run_command, side_effects={"shell_command"})],
    )
    result = await agent.run(user_msg="What is the weather in Oslo?")

The pieces:

* :class:`GovernedFunctionAgent` — a ``FunctionAgent`` whose every step runs the governor
  (forced, prose or passthrough, with read-back); alone, or as an agent of an
  ``AgentWorkflow``.
* :class:`GovernedFunctionCallingLLM` — the same governance as a ``FunctionCallingLLM``
  wrapper, for workflows of your own: ``chat_with_tools``, ``achat_with_tools``,
  ``stream_chat_with_tools`` and ``astream_chat_with_tools`` are governed steps.
* :func:`governed_tools` — tools whose every call jevqueue's :class:`~jevqueue.policy.Guard`
  judges before the body runs; a refusal (the guard's message) reaches the model as the
  tool's error result and the run goes on.
* :class:`ApprovalRequiredEvent` / :class:`ApprovalResponseEvent` — approvals in
  LlamaIndex's human-in-the-loop idiom (``InputRequiredEvent`` / ``HumanResponseEvent``),
  carrying the core :class:`~jevqueue.policy.ApprovalRequest`, bound to the action digest,
  single use; a paused run survives ``ctx.to_dict()`` and resumes in another process
  without running any call twice. Or pass ``approver=`` (any
  :class:`~jevqueue.policy.Approver`, plain or ``async``) and the guard asks it inline;
  an approver declines with :class:`~jevqueue.errors.ApprovalDeclinedError`.
* :class:`GovernedToolRetriever` — an agent's ``tool_retriever=``, wrapped so every tool
  it retrieves is governed.
* :class:`GovernedReActAgent` — a ``ReActAgent`` whose calls are judged (see below).

Where are ``AgentWorker`` and ``AgentRunner``?
----------------------------------------------

``llama-index-core`` 0.14 no longer has them. The agent worker of today is the workflow
agent (``FunctionAgent``, ``ReActAgent``, ``CodeActAgent``); its per-step hook is
``BaseWorkflowAgent.take_step(ctx, llm_input, tools, memory)``, and ``AgentWorkflow``
plays the runner's part, composing agents with hand-offs. A governed agent worker is
therefore a :class:`GovernedFunctionAgent`; code that drove ``AgentRunner.run_step``
runs the agent (``await agent.run(...)``) or its workflow instead.

What LlamaIndex cannot force, and what the plugin does about each case
----------------------------------------------------------------------

* **ReActAgent and CodeActAgent cannot be forced.** They describe the tools in the
  prompt (CodeAct asks for code) and parse the model's text: no tool schema and no
  ``tool_choice`` reach the provider. :class:`GovernedReActAgent` takes no governor
  (passing one raises ``ConfigurationError``), records a ``delegate`` decision per step
  whose reason says so (:data:`REACT_NOTE`), warns once, and judges every tool call with
  the PEP. There is no governed CodeAct agent: its "tool calls" are Python code run by
  your executor, which the PEP never sees as calls.
* **An integration can drop the forcing keywords.** ``FunctionCallingLLM`` carries
  ``tool_choice`` to the integration in ``**kwargs``; one whose
  ``_prepare_chat_with_tools`` does not name it may ignore it. The governed LLM detects
  that from the signature and then *narrows* instead (``forcing="narrow"``): a forced
  turn offers only the chosen tool with ``tool_required=True``, a prose turn offers no
  tools — but the model may still answer in prose or call twice. With either form every
  forced reply is read back *before* the integration's
  ``_validate_chat_with_tools_response``, whose stock ``force_single_tool_call`` would
  silently cut ``[delete_file, get_weather]`` down to ``[delete_file]``: anything but
  exactly one call of the forced tool raises
  :class:`~jevqueue.errors.ProviderDisobeyedError` out of the step, and nothing runs. A
  prose reply that calls a tool is blocked the same way. The read-back turns a constraint
  the provider did not keep into a stopped step; it cannot make the right call.
* **Streaming shows calls before any read-back.** ``FunctionAgent(streaming=True)``
  writes an ``AgentStream`` event per chunk, partial tool calls included. On a forced or
  prose step the governed LLM therefore buffers the provider's stream, reads the complete
  reply back, and only then replays the chunks: a stream consumer never sees a call that
  was blocked, and those steps do not stream token by token. A passthrough step streams
  live, exactly as without jevqueue.
* **Routes around the guard.** With ``pep=``, a governed agent refuses when it is built
  (``ConfigurationError``) a tool with no declaration, given as ``tools=`` or assigned
  later (``agent.tools = ...``); it wraps ``tool_retriever=`` so each retrieved tool is
  judged (an undeclared one is refused per call, audited). What the plugin cannot reach:
  a plain ``FunctionAgent`` placed beside a governed one in an ``AgentWorkflow`` runs its
  own tools (govern every agent of the workflow), and ``CodeActAgent`` runs the model's
  code through your executor (there is no governed CodeAct agent).
* **A passthrough is the integration's own request.** On a delegated step nothing is
  added, but ``llama-index-llms-openai`` itself always sends ``tool_choice: "auto"`` and
  the agent's ``parallel_tool_calls`` whenever tools are offered — as it does without
  jevqueue.
"""

from __future__ import annotations

try:
    import llama_index.core  # noqa: F401  (fail here, with the extra's name)
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'jevqueue.plugins.llamaindex needs LlamaIndex: pip install "jevqueue[llamaindex]"'
    ) from exc

from jevqueue.plugins.llamaindex.approval_events import (
    ApprovalRequest,
    ApprovalRequiredEvent,
    ApprovalResponseEvent,
)
from jevqueue.plugins.llamaindex.governed_agent import (
    REACT_NOTE,
    GovernedFunctionAgent,
    GovernedReActAgent,
)
from jevqueue.plugins.llamaindex.governed_llm import GovernedFunctionCallingLLM
from jevqueue.plugins.llamaindex.governed_retriever import GovernedToolRetriever
from jevqueue.plugins.llamaindex.governed_tools import (
    CONTEXT_PARAMETER,
    GovernedFunctionTool,
    governed_tools,
)
from jevqueue.plugins.llamaindex.step_host import local_response
from jevqueue.plugins.llamaindex.tool_refused import ToolCallRefusedError
from jevqueue.plugins.llamaindex.tool_spec import tool_spec

__all__ = [
    "CONTEXT_PARAMETER",
    "REACT_NOTE",
    "ApprovalRequest",
    "ApprovalRequiredEvent",
    "ApprovalResponseEvent",
    "GovernedFunctionAgent",
    "GovernedFunctionCallingLLM",
    "GovernedFunctionTool",
    "GovernedReActAgent",
    "GovernedToolRetriever",
    "ToolCallRefusedError",
    "governed_tools",
    "local_response",
    "tool_spec",
]
