"""Responses built locally, in the shape Hermes' own chat-completions path produces.

Hermes assembles a streamed reply into a ``SimpleNamespace`` shaped like an OpenAI
``ChatCompletion`` (``id``, ``model``, ``choices[0].message``, ``finish_reason``,
``usage``); its response normaliser reads that shape. A local response is the same shape,
stamped with the model id ``jevqueue-local``, and never touches the network.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

from jevqueue.host import LOCAL_MODEL_ID

__all__ = ["local_response"]


def local_response(
    text: str = "", *, tool_call: tuple[str, Mapping[str, Any]] | None = None
) -> SimpleNamespace:
    """A chat-completions response built locally (model ``jevqueue-local``).

    Args:
        text: The answer's text.
        tool_call: ``(name, arguments)`` to make it call one tool, with a fresh call id.
    """
    calls = None
    if tool_call is not None:
        name, arguments = tool_call
        calls = [
            SimpleNamespace(
                id=f"call_jevqueue_{uuid.uuid4().hex[:16]}",
                type="function",
                extra_content=None,
                function=SimpleNamespace(name=name, arguments=json.dumps(dict(arguments))),
            )
        ]
    message = SimpleNamespace(
        role="assistant", content=text or None, tool_calls=calls, reasoning_content=None
    )
    return SimpleNamespace(
        id=f"jevqueue-{uuid.uuid4().hex[:16]}",
        model=LOCAL_MODEL_ID,
        choices=[
            SimpleNamespace(
                index=0, message=message, finish_reason="tool_calls" if calls else "stop"
            )
        ],
        usage=None,
    )
