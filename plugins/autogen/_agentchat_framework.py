"""Every AgentChat (autogen-core / autogen-agentchat 0.7) name the plugin uses, in one place.

Imported at module top inside ``try/except ImportError`` so a missing extra fails with
the install line, not with a bare ``ModuleNotFoundError`` deep in a call.
"""

from __future__ import annotations

try:
    from autogen_core import CancellationToken, FunctionCall
    from autogen_core.models import (
        AssistantMessage,
        ChatCompletionClient,
        CreateResult,
        FunctionExecutionResultMessage,
        LLMMessage,
        ModelInfo,
        RequestUsage,
        SystemMessage,
        UserMessage,
    )
    from autogen_core.tools import (
        StaticWorkbench,
        TextResultContent,
        Tool,
        ToolResult,
        ToolSchema,
        Workbench,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "jevqueue.plugins.autogen's AgentChat half needs autogen-agentchat and autogen-core: "
        'pip install "jevqueue[autogen]"'
    ) from exc

__all__ = [
    "AssistantMessage",
    "CancellationToken",
    "ChatCompletionClient",
    "CreateResult",
    "FunctionCall",
    "FunctionExecutionResultMessage",
    "LLMMessage",
    "ModelInfo",
    "RequestUsage",
    "StaticWorkbench",
    "SystemMessage",
    "TextResultContent",
    "Tool",
    "ToolResult",
    "ToolSchema",
    "UserMessage",
    "Workbench",
]
