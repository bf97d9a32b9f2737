"""jevqueue for LangGraph: a governed model node, a policy-enforcing tool node, approvals
through ``interrupt()``, a one-call governed agent and an ``AgentMiddleware`` form.

Install with ``pip install "jevqueue[langgraph]"``.

::

    from jevqueue.plugins.langgraph import create_governed_agent, tool_spec

    agent = create_governed_agent(
        ChatOpenAI(model="gpt-4.1-mini"), [read_file, run_command],
        pep=pep,
        specs=[tool_spec(read_file, side_effects={"file_read"}, path_fields=["path"]),
               tool_spec(run_command, side_effects={"shell_command"})],
        context=context, checkpointer=InMemorySaver(),
    )

The pieces, for a graph of your own: :func:`governed_model_node` (the governor runs each
model turn over ``state["messages"]``), :func:`policy_tool_node` (a thin adapter of the
core :class:`~jevqueue.policy.Guard`: every tool call judged before it runs, with the
judged arguments, once; approvals through ``interrupt()`` carrying the core
:class:`~jevqueue.policy.ApprovalRequest`, or an inline ``approver=``), :class:`ToolChoice`
(how an integration forces and forbids), :class:`GovernorMiddleware` and
:class:`PolicyMiddleware` for ``langchain.agents.create_agent``.

Routes around the guard
-----------------------

* A tool without a declaration: refused when :func:`policy_tool_node` /
  :func:`create_governed_agent` is built; with :class:`PolicyMiddleware` (``create_agent``
  shows a middleware no tools when it is built) refused before the first model call, and
  judged (refused, audited) if it is called anyway.
* A provider-executed tool (a dict such as ``{"type": "web_search"}``, run by the provider
  where no guard sees it): refused the same way.
* A ``ToolNode`` of your own given the node's interceptors: every call judged by the guard.
* A middleware that wraps tool calls *after* :class:`PolicyMiddleware` could change or
  re-run a call once it was judged: refused (``ConfigurationError``) at the first tool call,
  before anything runs; put :class:`PolicyMiddleware` last.
* :func:`governed_model_node` alone governs only the model turn: tools it offers run
  where your graph runs them, so run them in :func:`policy_tool_node`.

Where LangGraph cannot truly force a tool
-----------------------------------------

LangGraph forces nothing itself: it hands ``tool_choice`` to the chat-model integration,
and langchain-core passes it through untranslated. So the guarantee is only as strong as
each integration's mapping, and some cannot force at all:

* **ChatOllama cannot force a tool**: it silently drops ``tool_choice``. The node then
  offers only the chosen tool (:meth:`ToolChoice.narrowing`), but the model may still
  answer in prose.
* **ChatAnthropic cannot force a tool with extended thinking on**: it drops the forced
  choice and only warns. It also reads the *strings* ``"none"`` and ``"required"`` as
  tool names, so this plugin uses its dict forms (``{"type": "tool", "name": ...}``,
  ``{"type": "none"}``).
* An integration not listed in :class:`ToolChoice` gets the OpenAI mapping; if it
  ignores or misreads it, it cannot force either.
* A model wrapped before it reaches the node (``with_fallbacks``, a router, a model
  already bound to ``tool_choice``) may lose or override the per-turn binding.

What the read-back does about it: after every forced turn the node compares the
response's ``AIMessage.tool_calls`` (and ``invalid_tool_calls``) with the forced tool.
Anything but exactly one well-formed call of that tool is blocked: by default the node
raises :class:`~jevqueue.errors.ProviderDisobeyedError` out of the graph run
(``on_disobey="message"`` instead appends a local message saying so). Either way the
disobeying response never enters the state, so none of its calls runs. On a prose turn a
reply that calls any tool is blocked the same way. The read-back turns a constraint the
integration cannot keep into a stopped turn — it cannot turn it into the right call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

try:
    import langchain_core  # noqa: F401
    import langgraph  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "jevqueue.plugins.langgraph needs LangGraph and LangChain: "
        'pip install "jevqueue[langgraph]"'
    ) from exc

from jevqueue.plugins.langgraph.agent import create_governed_agent
from jevqueue.plugins.langgraph.approval_request import (
    APPROVAL_REQUEST_KIND,
    approval_request,
    read_approval_answer,
)
from jevqueue.plugins.langgraph.model_node import (
    GovernedModelNode,
    governed_model_node,
    local_message,
)
from jevqueue.plugins.langgraph.tool_choice import ToolChoice
from jevqueue.plugins.langgraph.tool_node import (
    CONTEXT_CONFIG_KEY,
    PolicyToolNode,
    policy_tool_node,
    tool_spec,
)
from jevqueue.policy import ApprovalRequest

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.plugins.langgraph.middleware import GovernorMiddleware, PolicyMiddleware

__all__ = [
    "APPROVAL_REQUEST_KIND",
    "CONTEXT_CONFIG_KEY",
    "ApprovalRequest",
    "GovernedModelNode",
    "GovernorMiddleware",
    "PolicyMiddleware",
    "PolicyToolNode",
    "ToolChoice",
    "approval_request",
    "create_governed_agent",
    "governed_model_node",
    "local_message",
    "policy_tool_node",
    "read_approval_answer",
    "tool_spec",
]


def __getattr__(name: str) -> Any:
    # The middleware imports langchain's agents; load it only when it is asked for.
    if name in ("GovernorMiddleware", "PolicyMiddleware"):
        from jevqueue.plugins.langgraph import middleware

        value = getattr(middleware, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'jevqueue.plugins.langgraph' has no attribute {name!r}")
