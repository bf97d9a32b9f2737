"""The MCP proxy's message handling, fed raw lines the way a client on stdio feeds it.

Each input is split into lines. The first byte picks whether a well-formed handshake
(``initialize``, then ``notifications/initialized``) goes first, as every real client sends
it, or the lines alone. The lines go through the SDK's ``stdio_server`` (which parses each
as a JSON-RPC message, as ``jevqueue mcp-proxy`` does) into the proxy's relay, in front of an
in-process upstream with a declared tool, an undeclared one and one that writes; a
``ping`` follows them. The proxy must answer that ``ping``, answer a request from it (an
elicitation, say) once the client declines it, and end cleanly when the client closes its
input: anything it lets out instead is a finding. A refusal on the wire is a JSON-RPC
error response or a tool result with ``isError``.

The upstream is started once and kept for every input (starting a server per input would
leave no time to fuzz); each input is a new client of the proxy in front of it.
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from anyio.from_thread import start_blocking_portal
from fuzz_main import fuzz_main, instrumented

with instrumented():
    import jevqueue.plugins.mcp._cancellation_v1
    import jevqueue.plugins.mcp._relay_v1
    import jevqueue.plugins.mcp.approval_request
    import jevqueue.plugins.mcp.call_judge
    import jevqueue.policy._guard  # noqa: F401
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from jevqueue.approvals import ApprovalAuthority, SignedApprovalVerifier
    from jevqueue.audit import JsonlAuditLog
    from jevqueue.plugins.mcp import PolicyProxyServer, Upstream
    from jevqueue.plugins.mcp._framework import stdio_server
    from jevqueue.plugins.mcp.upstream import UpstreamConnection
    from jevqueue.policy import (
        ExecutionContext,
        PolicyEnforcementPoint,
        ToolSpec,
        create_default_policy_decision_point,
    )
    from mcp import ClientSession, types
    from mcp.server.fastmcp import FastMCP
    from mcp.shared.memory import create_client_server_memory_streams

_HOME = Path(tempfile.mkdtemp(prefix="jevqueue-fuzz-mcp-"))
(_HOME / "ws").mkdir()
_SENTINEL = "fuzz-sentinel-ping"
_HANDSHAKE = [
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": "fuzz-initialize",
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "fuzz-client", "version": "0"},
            },
        }
    ),
    json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
]
_DEADLINE_SECONDS = 30.0

_upstream = FastMCP("fuzz-upstream")


@_upstream.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@_upstream.tool()
def write_note(path: str, text: str) -> str:
    """Pretend to write text to the file at path."""
    return f"would write {len(text)} characters to {path}"


@_upstream.tool()
def undeclared() -> str:
    """A tool the tools file does not declare."""
    return "never reached"


def _proxy() -> PolicyProxyServer:
    authority = ApprovalAuthority(Ed25519PrivateKey.from_private_bytes(bytes(32)), "user")
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        audit_logger=JsonlAuditLog(_HOME / "audit.jsonl", fsync=False),
        approval_verifier=SignedApprovalVerifier({"user": authority.public_key}),
    )
    return PolicyProxyServer(
        Upstream.stdio(sys.executable, "fuzz-upstream"),  # never started: see _RunningProxy
        pep=pep,
        specs=[
            ToolSpec.declare("echo", side_effects=(), content_fields=["text"]),
            ToolSpec.declare("write_note", side_effects=["file_write"], path_fields=["path"]),
        ],
        context=ExecutionContext(
            task_id="fuzz",
            actor_id="fuzz-client",
            workspace=str(_HOME / "ws"),
            git_sha="0123456789abcdef",
        ),
        authority=authority,
    )


class _Lines:
    """The client's side of stdin: lines sent by the harness, until it closes them."""

    def __init__(self) -> None:
        self.send, self.receive = anyio.create_memory_object_stream[str](256)

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        try:
            return await self.receive.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class _Output:
    """The client's side of stdout: the proxy's messages, parsed when they are JSON."""

    def __init__(self) -> None:
        self.send, self.receive = anyio.create_memory_object_stream[str](256)

    async def write(self, text: str) -> None:
        await self.send.send(text)

    async def flush(self) -> None:
        return None


def _same_request(request_id: Any, named: Any) -> bool:
    """Whether a cancel naming ``named`` names the request ``request_id``, as mcp 2.x
    correlates them: a string or an integer, never a bool, ``"7"`` the same as 7."""

    def key(value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, str | int):
            return None
        try:
            return int(value)
        except ValueError:
            return value

    return key(named) is not None and key(named) == key(request_id)


def _expected_answers(lines: list[str]) -> set[Any]:
    """The ids of the requests among ``lines`` that the proxy must answer.

    What counts as a request is what the SDK's parser (the proxy's) reads as one. A request
    the client cancels after sending it may go unanswered (the specification asks that it
    is not answered), and so may one whose id the client reuses; a cancel for anything else
    changes nothing.
    """
    ids: list[Any] = []
    cancelled: set[Any] = set()
    for line in lines:
        try:
            message = types.JSONRPCMessage.model_validate_json(line).root
        except ValueError:
            continue
        if isinstance(message, types.JSONRPCRequest):
            ids.append(message.id)
        elif (
            isinstance(message, types.JSONRPCNotification)
            and message.method == "notifications/cancelled"
            and isinstance(message.params, dict)
        ):
            named = message.params.get("requestId")
            cancelled.update(ident for ident in ids if _same_request(ident, named))
    repeated = {ident for ident in ids if ids.count(ident) > 1}
    return set(ids) - cancelled - repeated - {_SENTINEL}


async def _client(lines: list[str], stdin: _Lines, stdout: _Output, waiting: set[Any]) -> None:
    """Send the lines and a ping; decline whatever the proxy asks; stop once the ping and
    every request are answered."""
    for line in lines:
        await stdin.send.send(line + "\n")
    await stdin.send.send(json.dumps({"jsonrpc": "2.0", "id": _SENTINEL, "method": "ping"}) + "\n")
    waiting.add(_SENTINEL)
    async for text in stdout.receive:
        message = json.loads(text)  # the proxy writes JSON or it is a finding
        if not isinstance(message, dict):
            raise AssertionError(f"the proxy wrote a JSON {type(message).__name__}: {text!r}")
        if "method" in message and "id" in message:  # the proxy asks the client something
            answer = {"action": "decline"} if message["method"] == "elicitation/create" else None
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
            if answer is None:
                reply["error"] = {"code": -32601, "message": "the fuzz client answers nothing"}
            else:
                reply["result"] = answer
            await stdin.send.send(json.dumps(reply) + "\n")
        elif "result" in message or "error" in message:
            waiting.discard(message.get("id"))
            if not waiting:
                break
    await stdin.send.aclose()


class _RunningProxy:
    """The proxy and its upstream, kept for the whole run on an event loop of their own."""

    def __init__(self) -> None:
        self.running = start_blocking_portal()
        self.portal = self.running.__enter__()
        self.proxy = _proxy()
        self.done = self.portal.call(anyio.Event)
        _, (self.connection, self.notify) = self.portal.start_task(self._lifetime)

    def close(self) -> None:
        """Stop the upstream and the loop (a fuzzing process just exits instead)."""
        self.portal.call(self.done.set)
        self.running.__exit__(None, None, None)

    async def _lifetime(self, *, task_status: Any) -> None:
        from jevqueue.plugins.mcp import _relay_v1 as relay

        ended = anyio.Event()
        server = _upstream._mcp_server
        notify = relay.NotificationRelay(self.proxy.judge)
        async with (
            create_client_server_memory_streams() as (client_streams, server_streams),
            anyio.create_task_group() as tasks,
        ):

            async def run_upstream() -> None:
                try:
                    await server.run(*server_streams, server.create_initialization_options())
                finally:
                    ended.set()

            tasks.start_soon(run_upstream)
            async with ClientSession(*client_streams, message_handler=_forward(notify)) as upstream:
                result = await upstream.initialize()
                self.proxy.judge.learn_tools(await relay.all_tools(upstream))
                task_status.started((UpstreamConnection(upstream, result, ended), notify))
                await self.done.wait()
                tasks.cancel_scope.cancel()

    def serve(self, lines: list[str]) -> None:
        self.portal.call(self._serve, lines)

    async def _serve(self, lines: list[str]) -> None:
        stdin, stdout = _Lines(), _Output()
        waiting = _expected_answers(lines)
        try:
            with anyio.fail_after(_DEADLINE_SECONDS):
                async with (
                    stdio_server(stdin, stdout) as (read_stream, write_stream),
                    anyio.create_task_group() as tasks,
                ):
                    tasks.start_soon(_client, lines, stdin, stdout, waiting)
                    await self.proxy._serve_on(
                        self.connection, self.notify, read_stream, write_stream
                    )
        except TimeoutError:
            raise AssertionError(
                f"after {_DEADLINE_SECONDS:g} s the proxy had not answered the requests "
                f"{sorted(map(repr, waiting))}"
            ) from None
        if waiting:
            raise AssertionError(f"the proxy ended without answering {sorted(map(repr, waiting))}")


def _forward(notify: Any) -> Any:
    async def handle(message: Any) -> None:
        if not isinstance(message, Exception):
            await notify(message)

    return handle


_running: _RunningProxy | None = None


def test_one_input(data: bytes) -> None:
    global _running
    if _running is None:
        _running = _RunningProxy()
    if not data:
        return
    text = data[1:].decode("utf-8", errors="replace")  # as the proxy's stdin reader decodes
    lines = [line for line in text.split("\n") if line.strip()]
    if data[0] % 2:
        lines = [*_HANDSHAKE, *lines]
    _running.serve(lines)


if __name__ == "__main__":
    logging.disable(logging.CRITICAL)  # the SDK logs every request it handles
    fuzz_main(test_one_input)
