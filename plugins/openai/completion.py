"""Chat-completion response bodies: building them locally and reading back what they call.

Pure data, no HTTP: the host uses these for ``say`` / ``say_tool_call`` and for its
read-back, and test doubles use them to play a model.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jevqueue.host import LOCAL_MODEL_ID

__all__ = [
    "UNNAMED_CALL",
    "CalledTool",
    "called_tool_names",
    "read_called_tools",
    "text_completion",
    "tool_call_completion",
    "tool_calls_completion",
]

UNNAMED_CALL = "<unnamed>"
"""The name of a call whose name cannot be read (see :func:`read_called_tools`).

It never equals a real tool name, so the governor's read-back fails closed on it, and
:class:`~jevqueue.plugins.openai.PolicyToolRunner` never executes such a call.
"""


def _completion(message: dict[str, Any], finish_reason: str, model: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def text_completion(text: str, *, model: str = LOCAL_MODEL_ID) -> dict[str, Any]:
    """A ``chat.completion`` whose single choice answers with ``text`` and calls nothing.

    Args:
        text: The assistant's reply.
        model: The model id stamped on the response (``jevqueue-local`` by default, so a
            locally built reply is never mistaken for provider output).

    Returns:
        The response body as a dict, shaped like the provider's.
    """
    message = {"role": "assistant", "content": text, "refusal": None}
    return _completion(message, "stop", model)


def tool_call_completion(
    name: str, arguments: Mapping[str, Any], *, model: str = LOCAL_MODEL_ID
) -> dict[str, Any]:
    """A ``chat.completion`` whose single choice makes one call of ``name``.

    Args:
        name: The tool to call.
        arguments: Its arguments; serialized to a JSON string as providers send them.
        model: The model id stamped on the response.

    Returns:
        The response body as a dict, shaped like the provider's.
    """
    return tool_calls_completion([(name, arguments)], model=model)


def tool_calls_completion(
    calls: Iterable[tuple[str, Mapping[str, Any]]], *, model: str = LOCAL_MODEL_ID
) -> dict[str, Any]:
    """A ``chat.completion`` whose single choice makes the given ``(name, arguments)`` calls.

    Args:
        calls: The calls, in order (two or more is a parallel call).
        model: The model id stamped on the response.

    Returns:
        The response body as a dict, shaped like the provider's.
    """
    message = {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "tool_calls": [
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(dict(arguments))},
            }
            for name, arguments in calls
        ],
    }
    return _completion(message, "tool_calls", model)


@dataclass(frozen=True)
class CalledTool:
    """One call a chat-completion response makes, as read by :func:`read_called_tools`.

    Attributes:
        name: The tool called, or :data:`UNNAMED_CALL` when the name cannot be read.
        arguments: The call's arguments as the provider sent them (usually a JSON string);
            ``None`` for an unnamed call.
        call_id: The ``tool_calls[i].id`` ("" when there is none, as for ``function_call``).
        legacy: True for the legacy ``message.function_call``.
    """

    name: str
    arguments: Any
    call_id: str = ""
    legacy: bool = False


def _read_call(call: Any, *, legacy: bool = False) -> CalledTool:
    """The one place that decides what a single call is named and what it carries.

    Only ``{"type": "function", "function": {"name": <str>, ...}}`` (``type`` may be left
    out) has a name. Any other ``type`` (``"custom"``, ...) and a missing or non-string
    ``function.name`` read as :data:`UNNAMED_CALL`: a name is never taken from another
    field than the one the call is executed from.
    """
    call_id = call.get("id") if isinstance(call, Mapping) else None
    call_id = call_id if isinstance(call_id, str) else ""
    unnamed = CalledTool(UNNAMED_CALL, None, call_id, legacy)
    if not isinstance(call, Mapping):
        return unnamed
    if "type" in call and call["type"] != "function":
        return unnamed
    function = call.get("function")
    if not isinstance(function, Mapping):
        return unnamed
    name = function.get("name")
    if not isinstance(name, str) or not name or name == UNNAMED_CALL:
        return unnamed
    return CalledTool(name, function.get("arguments"), call_id, legacy)


def read_called_tools(response: Any) -> list[CalledTool]:
    """Every call a chat-completion response makes, in order; ``[]`` for prose.

    Reads ``choices[0].message.tool_calls`` and then the legacy ``function_call``. The
    governor's read-back (:func:`called_tool_names`) and
    :class:`~jevqueue.plugins.openai.PolicyToolRunner` both read calls through this one
    function, so the tool the read-back checked is the tool that runs. A call whose name
    cannot be read is kept, named :data:`UNNAMED_CALL`, rather than dropped.

    Args:
        response: A response body as returned by the host (a dict).

    Returns:
        The calls; empty when the reply is prose.
    """
    if not isinstance(response, Mapping):
        return [_read_call(None)]
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return []
    message = choices[0].get("message")
    if not isinstance(message, Mapping):
        return []
    calls: list[CalledTool] = []
    tool_calls = message.get("tool_calls")
    if isinstance(tool_calls, list):
        calls.extend(_read_call(call) for call in tool_calls)
    elif tool_calls is not None:
        calls.append(_read_call(None))
    function_call = message.get("function_call")
    if function_call is not None:
        calls.append(_read_call({"type": "function", "function": function_call}, legacy=True))
    return calls


def called_tool_names(response: Any) -> list[str]:
    """The tool names a chat-completion response calls, in order; ``[]`` for prose.

    The names of :func:`read_called_tools`: ``tool_calls`` and the legacy
    ``function_call``, a call whose name cannot be read reported as
    :data:`UNNAMED_CALL` so that whoever checks the result sees that something was called.

    Args:
        response: A response body as returned by the host (a dict).

    Returns:
        The called names; empty when the reply is prose.
    """
    return [call.name for call in read_called_tools(response)]
