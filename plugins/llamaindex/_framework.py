"""Every LlamaIndex name the plugin uses, imported in one place.

Imported at module top inside ``try/except ImportError`` so a missing extra fails with
the install line, not with a bare ``ModuleNotFoundError`` deep in a call.
"""

from __future__ import annotations

try:
    from llama_index.core.agent.react.types import (
        ActionReasoningStep,
        ObservationReasoningStep,
    )
    from llama_index.core.agent.workflow import (
        AgentWorkflow,
        FunctionAgent,
        ReActAgent,
        ToolCall,
        ToolCallResult,
    )
    from llama_index.core.base.llms.types import (
        ChatMessage,
        ChatResponse,
        CompletionResponse,
        LLMMetadata,
        MessageRole,
        TextBlock,
        ToolCallBlock,
    )
    from llama_index.core.llms.function_calling import FunctionCallingLLM
    from llama_index.core.llms.llm import ToolSelection
    from llama_index.core.objects import ObjectRetriever
    from llama_index.core.tools import (
        AsyncBaseTool,
        BaseTool,
        FunctionTool,
        ToolMetadata,
        ToolOutput,
        adapt_to_async_tool,
    )
    from llama_index.core.workflow import (
        Context,
        HumanResponseEvent,
        InputRequiredEvent,
        step,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'jevqueue.plugins.llamaindex needs LlamaIndex: pip install "jevqueue[llamaindex]"'
    ) from exc

__all__ = [
    "ActionReasoningStep",
    "AgentWorkflow",
    "AsyncBaseTool",
    "BaseTool",
    "ChatMessage",
    "ChatResponse",
    "CompletionResponse",
    "Context",
    "FunctionAgent",
    "FunctionCallingLLM",
    "FunctionTool",
    "HumanResponseEvent",
    "InputRequiredEvent",
    "LLMMetadata",
    "MessageRole",
    "ObjectRetriever",
    "ObservationReasoningStep",
    "ReActAgent",
    "TextBlock",
    "ToolCall",
    "ToolCallBlock",
    "ToolCallResult",
    "ToolMetadata",
    "ToolOutput",
    "ToolSelection",
    "adapt_to_async_tool",
    "step",
]
