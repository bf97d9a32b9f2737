"""The one-call governed agent: a governed model node and a policy tool node in a loop.

Every tool the agent offers runs only in the policy tool node, judged by the core guard.
Refused when the agent is built (``ConfigurationError``): a tool without a declaration,
and a provider-executed (dict) tool, which would run at the provider, unjudged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from jevqueue.governor import Decision, Governor
from jevqueue.plugins.langgraph._framework import (
    END,
    START,
    MessagesState,
    StateGraph,
    tools_condition,
)
from jevqueue.plugins.langgraph.model_node import OnDisobey, governed_model_node
from jevqueue.plugins.langgraph.tool_choice import ToolChoice
from jevqueue.plugins.langgraph.tool_node import policy_tool_node, refuse_provider_tools
from jevqueue.policy import Approver, ExecutionContext, ToolRegistry, ToolSpec

__all__ = ["create_governed_agent"]


def create_governed_agent(
    model: Any,
    tools: Sequence[Any],
    *,
    pep: Any,
    specs: Iterable[ToolSpec] | ToolRegistry = (),
    registry: ToolRegistry | None = None,
    governor: Governor | None = None,
    context: ExecutionContext | Mapping[str, Any] | None = None,
    approver: Approver | None = None,
    checkpointer: Any = None,
    system_prompt: str | None = None,
    tool_choice: ToolChoice | None = None,
    on_disobey: OnDisobey = "raise",
    interrupted: Callable[[], bool] | None = None,
    on_decision: Callable[[Decision], None] | None = None,
) -> Any:
    """A compiled LangGraph agent: ``START -> agent -> (tools -> agent)* -> END``.

    ``agent`` is :func:`~jevqueue.plugins.langgraph.governed_model_node`, ``tools`` is
    :func:`~jevqueue.plugins.langgraph.policy_tool_node`; the state is LangGraph's
    ``MessagesState``.

    Args:
        model: A LangChain chat model with ``bind_tools``.
        tools: The LangChain tools.
        pep: The policy enforcement point judging every tool call.
        specs: One declaration per tool (:func:`~jevqueue.plugins.langgraph.tool_spec`).
        registry: Deprecated: pass the declarations as ``specs``.
        governor: The governor (``Governor()`` when omitted).
        context: The default execution context; a run's
            ``config["configurable"]["jevqueue_context"]`` overrides it.
        approver: An :class:`~jevqueue.policy.Approver` asked inline for a call that needs
            an explicit approval; without one the graph pauses with ``interrupt()``.
        checkpointer: A LangGraph checkpointer; approvals (``interrupt()``) need one.
        system_prompt: Prepended to every model call.
        tool_choice: The integration's force / forbid mapping (picked from the model).
        on_disobey: ``"raise"`` or ``"message"``; see ``governed_model_node``.
        interrupted: Consulted after each decision, before the model call.
        on_decision: Called with every model turn's decision record.

    Returns:
        The compiled graph. Run it with ``graph.invoke({"messages": [...]}, config)``;
        when it pauses for an approval, ``result["__interrupt__"]`` holds the request and
        ``graph.invoke(Command(resume=record), config)`` continues.

    Raises:
        ConfigurationError: A tool has no declaration, or runs at the model provider.
    """
    refuse_provider_tools(tools, "create_governed_agent")
    graph = StateGraph(MessagesState)
    graph.add_node(
        "agent",
        governed_model_node(
            model,
            tools,
            governor=governor,
            tool_choice=tool_choice,
            on_disobey=on_disobey,
            system_prompt=system_prompt,
            interrupted=interrupted,
            on_decision=on_decision,
        ),
    )
    graph.add_node(
        "tools",
        policy_tool_node(
            tools, pep=pep, registry=registry, specs=specs, context=context, approver=approver
        ),
    )
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)
