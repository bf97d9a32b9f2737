"""Chat-completion response bodies: building them locally and reading back what they call.

Pure data, no HTTP: the host uses these for ``say`` / ``say_tool_call`` and for its
read-back, and test doubles use them to play a model.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from jevqueue.host import LOCAL_MODEL_ID

__all__ = [
    "UNNAMED_CALL",
    "called_tool_names",
    "text_completion",
    "tool_call_completion",
    "tool_calls_completion",
]

UNNAMED_CALL = "<unnamed>"
"""Reported by :func:`called_tool_names` for a call whose name cannot be read.

It never equals a real tool name, so the governor's read-back fails closed on it.
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


def _call_name(call: Any) -> str:
    if not isinstance(call, Mapping):
        return UNNAMED_CALL
    # {"type": "function", "function": {"name": ...}}, and {"type": "custom", "custom": {...}}
    body = call.get(call.get("type", "function")) or call.get("function")
    name = body.get("name") if isinstance(body, Mapping) else None
    return name if isinstance(name, str) and name else UNNAMED_CALL


def called_tool_names(response: Any) -> list[str]:
    """The tool names a chat-completion response calls, in order; ``[]`` for prose.

    Reads ``choices[0].message.tool_calls`` and the legacy ``function_call``. A call whose
    name cannot be read is reported as :data:`UNNAMED_CALL` rather than dropped, so that
    whoever checks the result sees that something was called.

    Args:
        response: A response body as returned by the host (a dict).

    Returns:
        The called names; empty when the reply is prose.
    """
    if not isinstance(response, Mapping):
        return [UNNAMED_CALL]
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return []
    message = choices[0].get("message")
    if not isinstance(message, Mapping):
        return []
    names: list[str] = []
    tool_calls = message.get("tool_calls")
    if isinstance(tool_calls, list):
        names.extend(_call_name(call) for call in tool_calls)
    elif tool_calls is not None:
        names.append(UNNAMED_CALL)
    function_call = message.get("function_call")
    if function_call is not None:
        names.append(_call_name({"type": "function", "function": function_call}))
    return names
