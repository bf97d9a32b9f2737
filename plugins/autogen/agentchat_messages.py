"""AgentChat's model-boundary types read in the OpenAI form the governor reads.

``LLMMessage`` lists become OpenAI message dicts (a function-result message becomes one
``tool`` message per result, as the OpenAI client sends it), tools (``Tool`` objects or
``ToolSchema`` dicts) become flat ``{"name", "description", "parameters"}`` schemas, and
a ``CreateResult`` is read for the names it calls. Nothing here mutates its input.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from jevqueue.host import LOCAL_MODEL_ID
from jevqueue.plugins.autogen._agentchat_framework import (
    AssistantMessage,
    CreateResult,
    FunctionCall,
    FunctionExecutionResultMessage,
    RequestUsage,
    SystemMessage,
    UserMessage,
)

__all__ = [
    "UNREADABLE_CALL",
    "LocalCreateResult",
    "called_names",
    "local_text",
    "local_tool_call",
    "openai_messages",
    "tool_name",
    "tool_schema",
]

UNREADABLE_CALL = "<unreadable call>"
"""The name read back for a call that is not a ``FunctionCall`` with a name."""


class LocalCreateResult(CreateResult):
    """A ``CreateResult`` built by jevqueue, with no provider call: stamped ``jevqueue-local``."""

    model: str = LOCAL_MODEL_ID


_NO_USAGE = RequestUsage(prompt_tokens=0, completion_tokens=0)


def local_text(text: str) -> LocalCreateResult:
    """A prose answer built locally."""
    return LocalCreateResult(finish_reason="stop", content=text, usage=_NO_USAGE, cached=False)


def local_tool_call(name: str, arguments: Mapping[str, Any]) -> LocalCreateResult:
    """A one-call answer built locally (the workbench still judges the call)."""
    call = FunctionCall(
        id=f"jevqueue-{uuid.uuid4().hex[:12]}", name=name, arguments=json.dumps(dict(arguments))
    )
    return LocalCreateResult(
        finish_reason="function_calls", content=[call], usage=_NO_USAGE, cached=False
    )


# ``isinstance(x, Tool)`` checks a runtime protocol member by member (and computes a
# BaseTool's schema to do it): a ToolSchema is a dict, which is all that needs telling apart.


def tool_schema(tool: Any) -> dict[str, Any]:
    """A ``Tool`` or ``ToolSchema`` as a flat ``{"name", "description", "parameters"}``."""
    schema = tool if isinstance(tool, Mapping) else tool.schema
    out: dict[str, Any] = {"name": schema["name"], "description": schema.get("description", "")}
    if "parameters" in schema:
        out["parameters"] = schema["parameters"]
    return out


def tool_name(tool: Any) -> str:
    """The name a ``Tool`` or ``ToolSchema`` is called by."""
    return str(tool["name"] if isinstance(tool, Mapping) else tool.schema["name"])


def _user_content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, str):
            parts.append({"type": "text", "text": part})
        else:
            parts.append({"type": "image_url"})  # the ballot reads text only
    return parts


def openai_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """``LLMMessage`` s in OpenAI message form, oldest first."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            out.append({"role": "system", "content": message.content})
        elif isinstance(message, UserMessage):
            out.append(
                {"role": "user", "content": _user_content(message.content), "name": message.source}
            )
        elif isinstance(message, AssistantMessage):
            if isinstance(message.content, str):
                out.append({"role": "assistant", "content": message.content})
            else:
                out.append(
                    {
                        "role": "assistant",
                        "content": message.thought,
                        "tool_calls": [
                            {
                                "id": call.id,
                                "type": "function",
                                "function": {"name": call.name, "arguments": call.arguments},
                            }
                            for call in message.content
                        ],
                    }
                )
        elif isinstance(message, FunctionExecutionResultMessage):
            for result in message.content:
                out.append(
                    {"role": "tool", "content": result.content, "tool_call_id": result.call_id}
                )
        else:  # a message type of a later AgentChat: keep its place, read no text from it
            out.append({"role": str(getattr(message, "type", "unknown")), "content": ""})
    return out


def called_names(result: Any) -> list[str]:
    """The tools a ``CreateResult`` calls, in order; ``[]`` for a text answer."""
    content = getattr(result, "content", None)
    if isinstance(content, str) or content is None:
        return []
    names: list[str] = []
    for call in content:
        name = getattr(call, "name", None)
        names.append(name if isinstance(name, str) and name else UNREADABLE_CALL)
    return names
