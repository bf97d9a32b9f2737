"""The proxy driven by hand, one JSON-RPC line at a time: for malformed input and crashes.

No SDK on the client side, so the bytes the proxy receives are exactly the test's.
"""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import Any

HANDSHAKE_VERSION = "2025-06-18"  # a handshake protocol both mcp majors speak


class RawProxy:
    """A proxy subprocess with line-level access to its stdin and stdout."""

    def __init__(self, command: Sequence[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self._next_id = 0

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def send_line(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send_line(json.dumps(message))

    def request(
        self, method: str, params: Any = None, *, timeout: float = 30
    ) -> dict[str, Any] | None:
        """Send a request; return its response, or ``None`` when the proxy's output ended."""
        self._next_id += 1
        ident = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident, "method": method}
        if params is not None:
            message["params"] = params
        self.send_line(json.dumps(message))
        return self.response(ident, timeout=timeout)

    def response(self, ident: int, *, timeout: float = 30) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no response to request {ident} within {timeout}s") from None
            if line is None:
                return None
            message = json.loads(line)
            if message.get("id") == ident and ("result" in message or "error" in message):
                return message

    def initialize(self) -> dict[str, Any]:
        answer = self.request(
            "initialize",
            {
                "protocolVersion": HANDSHAKE_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "raw-test-client", "version": "0"},
            },
        )
        assert answer is not None and "result" in answer, answer
        self.notify("notifications/initialized")
        return answer["result"]

    def close(self, timeout: float = 20) -> tuple[int, str]:
        """Close stdin, wait for the exit; return the exit status and the stderr text."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.process.stdin.close()
        try:
            status = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError("the proxy did not exit after its client left") from None
        assert self.process.stderr is not None
        return status, self.process.stderr.read()

    def wait(self, timeout: float = 20) -> tuple[int, str]:
        """Wait for the proxy to exit on its own; return the exit status and stderr."""
        try:
            status = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError("the proxy did not exit on its own") from None
        assert self.process.stderr is not None
        return status, self.process.stderr.read()
