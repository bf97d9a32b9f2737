"""Reading a conversation in OpenAI message form, and building the copy a directive goes on.

Messages are oldest first: ``{"role": "system" | "user" | "assistant" | "tool",
"content": str | list | None, ...}``. Nothing here mutates a message or a message list.
Hosts use :func:`with_directive` so that every host appends a directive the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "DIRECTIVE_ROLE",
    "TOOL_RESULT_ROLES",
    "follows_tool_result",
    "is_user_turn",
    "message_text",
    "newest_role",
    "newest_tool_result_text",
    "newest_user_text",
    "with_directive",
]

TOOL_RESULT_ROLES = frozenset({"tool", "function"})
"""Roles that carry a tool's result back to the model (``function`` is the legacy name)."""

DIRECTIVE_ROLE = "system"
"""The role :func:`with_directive` gives the appended directive."""


def message_text(message: Mapping[str, Any]) -> str:
    """The text of one message.

    A string content is returned as is; a list of parts is flattened to its text parts
    (``{"type": "text", "text": ...}`` or bare strings), joined by spaces; anything else
    (``None``, images only) is ``""``.
    """
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, (bytes, bytearray)):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping):
                text = part.get("text")
                if isinstance(text, str):
                    parts.append(text)
        return " ".join(parts)
    return ""


def newest_role(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The role of the newest message, or ``None`` for an empty conversation."""
    if not messages:
        return None
    role = messages[-1].get("role")
    return role if isinstance(role, str) else None


def is_user_turn(messages: Sequence[Mapping[str, Any]]) -> bool:
    """True when the newest message is the user's: the turn the ballot routes."""
    return newest_role(messages) == "user"


def follows_tool_result(messages: Sequence[Mapping[str, Any]]) -> bool:
    """True when the newest message is a tool result: the agent loop is mid-task."""
    return newest_role(messages) in TOOL_RESULT_ROLES


def newest_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text of the newest user message (``""`` when there is none)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return message_text(message)
    return ""


def newest_tool_result_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text of the tool results after the newest non-tool message, joined by newlines.

    An assistant message may call several tools; their results arrive as consecutive
    ``tool`` messages, and all of them are read.
    """
    texts: list[str] = []
    for message in reversed(messages):
        if message.get("role") not in TOOL_RESULT_ROLES:
            break
        texts.append(message_text(message))
    return "\n".join(reversed(texts))


def with_directive(
    messages: Sequence[Mapping[str, Any]], directive: str, *, role: str = DIRECTIVE_ROLE
) -> list[Mapping[str, Any]]:
    """A new list: the messages, then the directive as one more message when it is non-empty.

    The caller's list and its messages are left untouched (the new list shares the message
    objects; it does not copy them), so the provider's prompt-cache prefix stays intact.
    With ``directive == ""`` the result has exactly the caller's messages: the passthrough.

    Args:
        messages: The conversation, oldest first.
        directive: The governor's directive, or ``""``.
        role: The role of the appended message (``"system"`` by default; use ``"user"``
            for providers that accept a system message only at the start).
    """
    copy = list(messages)
    if directive:
        copy.append({"role": role, "content": directive})
    return copy
