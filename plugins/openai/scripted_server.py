"""A chat-completions server on 127.0.0.1, in a thread: a function plays the model.

Where :class:`~jevqueue.plugins.openai.ScriptedChatTransport` stays inside the process,
this one listens on a real socket, so a test can show what actually left the process:
every request body and its headers are recorded as the server received them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ScriptedChatServer"]

Responder = Callable[[dict[str, Any]], Mapping[str, Any]]


class ScriptedChatServer:
    """An OpenAI-compatible ``POST /v1/chat/completions`` on ``127.0.0.1``, for tests.

    Use it as a context manager; it listens on a free port until the block ends::

        with ScriptedChatServer(lambda body: text_completion("hi")) as server:
            host = OpenAIChatHost(base_url=server.base_url, ...)

    Args:
        respond: Called with each request's parsed JSON body; returns the response body.
            If it raises, the server answers HTTP 500 with the error's text.

    Attributes:
        requests: The JSON body of every chat-completions request, in order.
        headers: The headers of each of those requests (lower-case names).
        responses: The body answered to each request that got one, in order.
    """

    def __init__(self, respond: Responder) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.responses: list[dict[str, Any]] = []
        self._respond = respond
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, once started."""
        if self._server is None:
            raise RuntimeError("the server is not running: use it in a `with` block")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedChatServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                with owner._lock:
                    owner.requests.append(body)
                    owner.headers.append({k.lower(): v for k, v in self.headers.items()})
                try:
                    answer = dict(owner._respond(body))
                except Exception as exc:
                    self._send(500, {"error": {"message": f"{type(exc).__name__}: {exc}"}})
                    return
                with owner._lock:
                    owner.responses.append(answer)
                self._send(200, answer)

            def _send(self, status: int, payload: Mapping[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # A short poll keeps shutdown quick (the default waits up to half a second).
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
