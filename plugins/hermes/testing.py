"""A recording OpenAI-compatible server on 127.0.0.1 for Hermes tests: a script plays the model.

Hermes' ``AIAgent`` talks to any OpenAI-compatible endpoint with the ``openai`` client and
streams by default, so :class:`RecordingChatServer` answers ``POST /v1/chat/completions``
both ways: a ``chat.completion`` body, or — when the request says ``"stream": true`` — the
same answer as server-sent ``chat.completion.chunk`` events. It records every request body
as it arrived (``.requests``) and every answer it gave (``.responses``); a request beyond
the script is answered with HTTP 400 (which Hermes does not retry) and counted, so
:meth:`RecordingChatServer.assert_complete` fails on it::

    steps = [tool_reply("get_weather", {"city": "Oslo"}), text_reply("Sunny")]
    with RecordingChatServer(steps) as server:
        agent = AIAgent(base_url=server.base_url, api_key="test", model="test-model", ...)
        agent.run_conversation("Weather in Oslo?")
    server.assert_complete()

A script step is a reply (:func:`text_reply`, :func:`tool_reply`) or a callable
``(request_body) -> reply``.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["RecordingChatServer", "completion", "text_reply", "tool_reply"]


def text_reply(text: str) -> dict[str, Any]:
    """An assistant message that answers ``text`` and calls nothing."""
    return {"role": "assistant", "content": text}


def tool_reply(*calls: tuple[str, Mapping[str, Any]] | str, **arguments: Any) -> dict[str, Any]:
    """An assistant message that calls tools: ``tool_reply("f", {"a": 1})`` or several pairs.

    ``tool_reply("f", {"a": 1})`` is one call; ``tool_reply(("f", {...}), ("g", {...}))``
    is two parallel calls.
    """
    if len(calls) == 2 and isinstance(calls[0], str) and isinstance(calls[1], Mapping):
        pairs: list[tuple[str, Mapping[str, Any]]] = [(calls[0], calls[1])]
    else:
        pairs = [call for call in calls if isinstance(call, tuple)]
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(dict(args))},
            }
            for name, args in pairs
        ],
    }


def completion(message: Mapping[str, Any], model: str = "scripted") -> dict[str, Any]:
    """A ``chat.completion`` body whose one choice is ``message``."""
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": dict(message),
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _chunks(message: Mapping[str, Any], model: str) -> list[dict[str, Any]]:
    base = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }
    delta: dict[str, Any] = {"role": "assistant"}
    if message.get("content"):
        delta["content"] = message["content"]
    if message.get("tool_calls"):
        delta["tool_calls"] = [
            {"index": index, **call} for index, call in enumerate(message["tool_calls"])
        ]
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        {
            **base,
            "choices": [],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        },
    ]


Step = Any  # a reply message, or a callable (request body) -> reply message


class RecordingChatServer:
    """An OpenAI-compatible chat-completions endpoint on 127.0.0.1 that answers from a script.

    Args:
        steps: The replies, in order.
        model: The model name the answers carry.

    Attributes:
        requests: Every request body, as received.
        responses: Every reply message given, in order.
    """

    def __init__(self, steps: Sequence[Step] = (), *, model: str = "scripted") -> None:
        self._steps = list(steps)
        self._model = model
        self._lock = threading.Lock()
        self._unexpected = 0
        self.requests: list[dict[str, Any]] = []
        self.responses: list[dict[str, Any]] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def remaining(self) -> int:
        """How many scripted replies are left."""
        return len(self._steps)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, once started."""
        if self._server is None:
            raise RuntimeError("the server is not running: use it in a `with` block")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def assert_complete(self) -> None:
        """Fail on a request that found no step left, or a step never consumed."""
        assert self._unexpected == 0, f"{self._unexpected} unexpected model request(s)"
        assert not self._steps, f"{len(self._steps)} scripted reply(ies) never consumed"

    def _next(self, body: dict[str, Any]) -> dict[str, Any] | None:
        with self._lock:
            self.requests.append(body)
            if not self._steps:
                self._unexpected += 1
                return None
            step: Step = self._steps.pop(0)
        reply = step(body) if callable(step) else step
        with self._lock:
            self.responses.append(dict(reply))
        return dict(reply)

    def __enter__(self) -> RecordingChatServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._json(404, {"error": {"message": f"no route {self.path}"}})
                    return
                reply = owner._next(body)
                if reply is None:
                    self._json(
                        400, {"error": {"message": "unexpected request: the script is empty"}}
                    )
                    return
                if body.get("stream"):
                    self._stream(_chunks(reply, owner._model))
                else:
                    self._json(200, completion(reply, owner._model))

            def _json(self, status: int, payload: Mapping[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, chunks: list[dict[str, Any]]) -> None:
                data = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks)
                payload = (data + "data: [DONE]\n\n").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()
        self._server = None
        self._thread = None
