"""Every LangGraph / LangChain name the plugin uses, imported in one place.

Imported at module top inside ``try/except ImportError`` so a missing extra fails with
the install line, not with a bare ``ModuleNotFoundError`` deep in a call.
"""

from __future__ import annotations

try:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import (
        AIMessage,
        AnyMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        convert_to_messages,
        convert_to_openai_messages,
    )
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.runnables import Runnable, RunnableConfig
    from langchain_core.runnables.config import var_child_runnable_config
    from langchain_core.tools import BaseTool
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.errors import GraphBubbleUp
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.types import Command, interrupt
    from pydantic import PrivateAttr
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "jevqueue.plugins.langgraph needs LangGraph and LangChain: "
        'pip install "jevqueue[langgraph]"'
    ) from exc

__all__ = [
    "END",
    "START",
    "AIMessage",
    "AnyMessage",
    "BaseChatModel",
    "BaseMessage",
    "BaseTool",
    "ChatGeneration",
    "ChatResult",
    "Command",
    "GraphBubbleUp",
    "HumanMessage",
    "MessagesState",
    "PrivateAttr",
    "Runnable",
    "RunnableConfig",
    "StateGraph",
    "SystemMessage",
    "ToolCallRequest",
    "ToolMessage",
    "ToolNode",
    "convert_to_messages",
    "convert_to_openai_messages",
    "convert_to_openai_tool",
    "interrupt",
    "tools_condition",
    "var_child_runnable_config",
]
