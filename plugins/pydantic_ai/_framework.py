"""Every Pydantic AI name the plugin uses, imported in one place.

Imported at module top inside ``try/except ImportError`` so a missing extra fails with
the install line, not with a bare ``ModuleNotFoundError`` deep in a call.
"""

from __future__ import annotations

try:
    from pydantic_ai import (
        Agent,
        ApprovalRequired,
        DeferredToolRequests,
        DeferredToolResults,
        ModelRetry,
        NativeOutput,
        PromptedOutput,
        RunContext,
        TextOutput,
        Tool,
        ToolApproved,
        ToolDefinition,
        ToolOutput,
    )
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.direct import model_request, model_request_sync
    from pydantic_ai.messages import (
        BaseToolCallPart,
        BaseToolReturnPart,
        ModelMessage,
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        SystemPromptPart,
        TextContent,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models import Model, ModelRequestContext, ModelRequestParameters
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.output import OutputContext
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.toolsets import FunctionToolset
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'jevqueue.plugins.pydantic_ai needs Pydantic AI: pip install "jevqueue[pydantic-ai]"'
    ) from exc

__all__ = [
    "AbstractCapability",
    "Agent",
    "AgentInfo",
    "ApprovalRequired",
    "BaseToolCallPart",
    "BaseToolReturnPart",
    "DeferredToolRequests",
    "DeferredToolResults",
    "FunctionModel",
    "FunctionToolset",
    "Model",
    "ModelMessage",
    "ModelRequest",
    "ModelRequestContext",
    "ModelRequestParameters",
    "ModelResponse",
    "ModelRetry",
    "ModelSettings",
    "NativeOutput",
    "OutputContext",
    "PromptedOutput",
    "RetryPromptPart",
    "RunContext",
    "SystemPromptPart",
    "TextContent",
    "TextOutput",
    "TextPart",
    "ThinkingPart",
    "Tool",
    "ToolApproved",
    "ToolCallPart",
    "ToolDefinition",
    "ToolOutput",
    "ToolReturnPart",
    "UserPromptPart",
    "model_request",
    "model_request_sync",
]
