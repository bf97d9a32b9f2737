"""The OpenAI form of LangChain messages and tools, converted once and reused.

The governor reads every turn's conversation and toolset as OpenAI dicts. A graph turn
hands it the whole history again, so converting every message on every turn costs time
that grows with the conversation. :class:`MessageForms` converts each message once and
reuses the result for as long as the message is the same object with the same fields;
:class:`ToolForms` does the same for tools. The dicts handed out are shared between
turns: the governor treats them as read only.
"""

from __future__ import annotations

import copy
import weakref
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

__all__ = ["MessageForms", "ToolForms"]

# The message classes whose OpenAI form depends only on the fields _message_stamp reads
# (when the content is a string). Anything else is converted afresh every time.
_STAMPED_MESSAGES = frozenset({AIMessage, HumanMessage, SystemMessage, ToolMessage})


def _message_stamp(message: Any) -> tuple[Any, ...]:
    """Every field the conversion of a string-content message reads, but the tool calls."""
    extra = message.additional_kwargs
    return (
        message.content,
        message.name,
        extra.get("refusal"),
        extra.get("__openai_role__"),
        message.tool_call_id if type(message) is ToolMessage else None,
    )


# Immutable values: a mapping holding only these is snapshotted by a shallow copy.
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _calls_snapshot(message: Any) -> Any:
    """A copy of an AIMessage's tool calls to compare them with later (``None`` otherwise)."""
    if type(message) is not AIMessage:
        return None
    snapshot = []
    for call in message.tool_calls:
        args = call.get("args")
        if type(args) is dict and all(type(value) in _SCALARS for value in args.values()):
            snapshot.append({**call, "args": dict(args)})
        else:
            snapshot.append(copy.deepcopy(call))
    return snapshot


class MessageForms:
    """LangChain messages in OpenAI form, each converted once.

    A message is reused while it is the same object (checked through a weak reference,
    so a message that is gone never matches and none is kept alive) with equal fields
    and equal tool calls; a message with list content, or of another class, makes the
    whole list convert afresh, exactly as ``convert_to_openai_messages`` would. Only the
    messages of the latest list are remembered.
    """

    def __init__(self) -> None:
        # id(message) -> (weak reference to it, stamp, tool-call snapshot, OpenAI dict)
        self._entries: dict[int, tuple[Any, tuple[Any, ...], Any, dict[str, Any]]] = {}

    def convert(self, messages: Sequence[Any]) -> list[dict[str, Any]]:
        """``convert_to_openai_messages(messages)``, reusing earlier conversions."""
        entries = self._entries
        kept: dict[int, tuple[Any, tuple[Any, ...], Any, dict[str, Any]]] = {}
        converted: list[Any] = []
        missing: list[tuple[int, Any, tuple[Any, ...]]] = []
        for message in messages:
            if type(message) not in _STAMPED_MESSAGES or type(message.content) is not str:
                return convert_to_openai_messages(messages)  # type: ignore[no-any-return]
            key = id(message)
            stamp = _message_stamp(message)
            entry = entries.get(key)
            if (
                entry is not None
                and entry[0]() is message
                and entry[1] == stamp
                and (entry[2] is None or message.tool_calls == entry[2])
            ):
                kept[key] = entry
                converted.append(entry[3])
            else:
                missing.append((len(converted), message, stamp))
                converted.append(None)
        if missing:
            # A string-content message converts to exactly one dict, on its own.
            forms = convert_to_openai_messages([message for _, message, _ in missing])
            if len(forms) != len(missing):  # pragma: no cover - defensive
                return convert_to_openai_messages(messages)  # type: ignore[no-any-return]
            for (position, message, stamp), form in zip(missing, forms, strict=True):
                converted[position] = form
                try:
                    calls = _calls_snapshot(message)
                except Exception:  # arguments that cannot be copied: convert it every time
                    continue
                kept[id(message)] = (weakref.ref(message), stamp, calls, form)
        self._entries = kept
        return converted


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
