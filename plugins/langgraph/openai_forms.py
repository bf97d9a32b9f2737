"""The OpenAI form of LangChain messages and tools, as the governor reads them.

The governor reads every turn's conversation and toolset as OpenAI dicts.
:func:`openai_messages` converts the common messages (the four core classes with text
content) directly, to exactly what ``convert_to_openai_messages`` returns, and hands
anything else to it; a test holds the two equal. :class:`ToolForms` converts each tool
once and reuses the result. The dicts handed out are read only for the governor.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from jevqueue.plugins.langgraph._framework import (
    AIMessage,
    BaseTool,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
    convert_to_openai_tool,
)

__all__ = ["ToolForms", "openai_messages"]

_ROLES: dict[type, str] = {
    HumanMessage: "user",
    AIMessage: "assistant",
    ToolMessage: "tool",
    SystemMessage: "system",
}


def _openai_form(message: Any) -> dict[str, Any] | None:
    """``convert_to_openai_messages([message])[0]`` for a core message with text content;
    ``None`` for anything else."""
    kind = type(message)
    role = _ROLES.get(kind)
    content = message.content if role is not None else None
    if type(content) is not str:
        return None
    extra = message.additional_kwargs
    if kind is SystemMessage:
        role = extra.get("__openai_role__", "system")
        if type(role) is not str:
            return None  # the general conversion raises the error
    form: dict[str, Any] = {"role": role}
    if message.name:
        form["name"] = message.name
    if kind is AIMessage and message.tool_calls:
        form["tool_calls"] = [
            {
                "type": "function",
                "id": call["id"],
                "function": {
                    "name": call["name"],
                    "arguments": json.dumps(call["args"], ensure_ascii=False),
                },
            }
            for call in message.tool_calls
        ]
    refusal = extra.get("refusal")
    if refusal:
        form["refusal"] = refusal
    if kind is ToolMessage:
        form["tool_call_id"] = message.tool_call_id
    form["content"] = content
    return form


def openai_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """``convert_to_openai_messages(messages)``, directly for the common messages."""
    forms = []
    for message in messages:
        form = _openai_form(message)
        if form is None:
            # Content blocks, other classes, dicts: the general conversion, on the whole
            # list (its errors then point at the right message).
            return convert_to_openai_messages(messages)  # type: ignore[no-any-return]
        forms.append(form)
    return forms


def _tool_stamp(tool: BaseTool) -> tuple[Any, ...]:
    # Compared with a deep copy taken at conversion time (a class compares as itself).
    return (tool.name, tool.description, tool.args_schema, tool.metadata)


class ToolForms:
    """LangChain tools in OpenAI form, each converted once.

    A ``BaseTool`` is reused while it is the same object with the same name,
    description, argument schema and metadata; a dict or a function is converted
    afresh every time.
    """

    def __init__(self) -> None:
        # id(tool) -> (tool, stamp, OpenAI dict)
        self._entries: dict[int, tuple[Any, tuple[Any, ...], dict[str, Any]]] = {}

    def convert(self, tools: Sequence[Any]) -> list[dict[str, Any]]:
        """``[convert_to_openai_tool(tool) for tool in tools]``, reusing earlier ones."""
        entries = self._entries
        kept: dict[int, tuple[Any, tuple[Any, ...], dict[str, Any]]] = {}
        converted: list[dict[str, Any]] = []
        for tool in tools:
            if not isinstance(tool, BaseTool):
                converted.append(convert_to_openai_tool(tool))
                continue
            key = id(tool)
            stamp = _tool_stamp(tool)
            entry = entries.get(key)
            if entry is None or entry[0] is not tool or entry[1] != stamp:
                try:
                    frozen = copy.deepcopy(stamp)
                except Exception:  # metadata that cannot be copied: convert it every time
                    converted.append(convert_to_openai_tool(tool))
                    continue
                entry = (tool, frozen, convert_to_openai_tool(tool))
            kept[key] = entry
            converted.append(entry[2])
        self._entries = kept
        return converted
