"""The read-back of a model reply: the names of the tools an ``AIMessage`` calls.

Both the governed model node and :class:`~jevqueue.plugins.langgraph.GovernorMiddleware`
answer the governor's ``called_tools`` with :func:`called_tools`, so the governor itself
checks every reply the same way and records a blocked turn as an error.
"""

from __future__ import annotations

from typing import Any

__all__ = ["called_tools", "unparsed_call_name"]


def unparsed_call_name(name: Any) -> str:
    """The name a call whose arguments do not parse is read back under.

    Angle brackets and spaces are not allowed in a provider's tool names, so it never
    equals the forced tool: a forced turn whose call does not parse is blocked like a
    call of the wrong tool.

    Args:
        name: The name the model gave the call (``None`` or empty when it gave none).
    """
    return f"<{name or 'unnamed'}: arguments do not parse>"


def called_tools(message: Any) -> list[str]:
    """Every call ``message`` makes, in order: parsed calls first, then unparsed ones.

    A call LangChain could not parse (``invalid_tool_calls``) is still a call the model
    made, so it counts; it is named by :func:`unparsed_call_name`.

    Args:
        message: The model's reply, normally an ``AIMessage``; anything without
            ``tool_calls`` / ``invalid_tool_calls`` calls nothing.
    """
    names = [str(call.get("name")) for call in getattr(message, "tool_calls", None) or ()]
    names += [
        unparsed_call_name(call.get("name"))
        for call in getattr(message, "invalid_tool_calls", None) or ()
    ]
    return names
