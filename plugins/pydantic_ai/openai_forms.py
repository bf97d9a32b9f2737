"""The OpenAI form of Pydantic AI messages and tool definitions, as the governor reads them.

The governor reads every turn as OpenAI dicts. Pydantic AI keeps a conversation as
``ModelRequest`` / ``ModelResponse`` objects, each a list of *parts*; :func:`openai_messages`
flattens the parts by kind, oldest first:

==================================  ===================================================
part                                OpenAI message
==================================  ===================================================
``ModelRequest.instructions``       ``system`` (before the request's own parts)
``SystemPromptPart``                ``system``
``UserPromptPart``                  ``user`` (text as a string; other content as
                                    ``[{"type": "text", ...}]`` placeholders naming it)
``ToolReturnPart``                  ``tool`` with ``tool_call_id`` and ``name``
``RetryPromptPart`` with a tool     ``tool`` (the retry text the model is shown)
``RetryPromptPart`` without one     ``user``
``ModelResponse`` text parts        one ``assistant`` message, texts joined
``ModelResponse`` ``ToolCallPart``  that message's ``tool_calls``
thinking and native-tool parts      left out: the ballot routes on what was said
==================================  ===================================================

The dicts are new objects built for the governor; nothing of the run's history is changed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from jevqueue.plugins.pydantic_ai._framework import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolDefinition,
    ToolReturnPart,
    UserPromptPart,
)

__all__ = ["openai_messages", "openai_tools"]


def _user_content(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    items: list[dict[str, Any]] = []
    for item in content:
        if isinstance(item, str):
            items.append({"type": "text", "text": item})
        else:
            # Images, audio and documents: the ballot reads text, so name what was sent.
            kind = getattr(item, "kind", type(item).__name__)
            items.append({"type": "text", "text": f"[{kind}]"})
    return items


def _request_messages(request: ModelRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if request.instructions:
        out.append({"role": "system", "content": request.instructions})
    for part in request.parts:
        if isinstance(part, SystemPromptPart):
            out.append({"role": "system", "content": part.content})
        elif isinstance(part, UserPromptPart):
            out.append({"role": "user", "content": _user_content(part.content)})
        elif isinstance(part, ToolReturnPart):
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": part.tool_call_id,
                    "name": part.tool_name,
                    "content": part.model_response_str(),
                }
            )
        elif isinstance(part, RetryPromptPart):
            if part.tool_name is None:
                out.append({"role": "user", "content": part.model_response()})
            else:
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": part.tool_call_id,
                        "name": part.tool_name,
                        "content": part.model_response(),
                    }
                )
    return out


def _response_message(response: ModelResponse) -> dict[str, Any] | None:
    texts = [part.content for part in response.parts if isinstance(part, TextPart)]
    calls = [
        {
            "id": part.tool_call_id,
            "type": "function",
            "function": {"name": part.tool_name, "arguments": part.args_as_json_str()},
        }
        for part in response.parts
        if isinstance(part, ToolCallPart)
    ]
    if not texts and not calls:
        return None
    message: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts)}
    if calls:
        message["tool_calls"] = calls
    return message


def openai_messages(messages: Iterable[ModelMessage]) -> list[dict[str, Any]]:
    """Project Pydantic AI messages into OpenAI message dicts, oldest first.

    Args:
        messages: ``ModelRequest`` and ``ModelResponse`` objects, as a run's history holds
            them (``result.all_messages()`` or a request context's ``messages``).

    Returns:
        New dicts in OpenAI message form; see the module docstring for the mapping.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            out.extend(_request_messages(message))
        elif isinstance(message, ModelResponse):
            projected = _response_message(message)
            if projected is not None:
                out.append(projected)
    return out


def openai_tools(tool_defs: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """The tool definitions as ``{"type": "function", "function": {...}}`` schemas.

    Args:
        tool_defs: Pydantic AI's tool definitions, as a request's parameters carry them.

    Returns:
        One OpenAI-style schema per definition, with its name, description and
        parameters JSON Schema (a copy).
    """
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description or "",
                "parameters": json.loads(json.dumps(tool.parameters_json_schema)),
            },
        }
        for tool in tool_defs
    ]
