"""An in-process chat-completions endpoint: a function plays the model, nothing leaves.

Hand it to a host as its ``transport``; every request body is recorded in ``requests``,
so a test or a demo can show what would have gone over the wire.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

try:
    import httpx
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'jevqueue.plugins.openai needs httpx: pip install "jevqueue[openai]"'
    ) from exc

__all__ = ["ScriptedChatTransport"]

Responder = Callable[[dict[str, Any]], Mapping[str, Any]]


class ScriptedChatTransport(httpx.MockTransport):
    """An ``httpx.MockTransport`` that answers ``POST .../chat/completions`` with ``respond``.

    Works for both ``httpx.Client`` and ``httpx.AsyncClient``. Any other method or path
    answers HTTP 404, as a real server would.

    Args:
        respond: Called with each request's parsed JSON body; returns the response body
            (for instance :func:`~jevqueue.plugins.openai.completion.text_completion`).

    Attributes:
        requests: The JSON body of every chat-completions request received, in order.
        responses: The body answered to each of them, in order.
    """

    def __init__(self, respond: Responder) -> None:
        self.requests: list[dict[str, Any]] = []
        self.responses: list[dict[str, Any]] = []
        self._respond = respond
        super().__init__(self._handle)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        if request.method != "POST" or not request.url.path.endswith("/chat/completions"):
            return httpx.Response(404, json={"error": {"message": "not found"}})
        body = json.loads(request.content)
        self.requests.append(body)
        answer = dict(self._respond(body))
        self.responses.append(answer)
        return httpx.Response(200, json=answer)
