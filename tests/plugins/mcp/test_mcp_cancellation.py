"""The client's ``notifications/cancelled``: what it stops, and that the proxy keeps answering.

The proxy is served in process on the SDK's ``stdio_server``, fed raw lines as
``jevqueue mcp-proxy`` is on its stdin, in front of a real upstream (``holding_server.py``,
whose ``hold`` stays in flight until ``release``). A cancel stops a request the proxy has
not answered, which then goes unanswered and never runs upstream afterwards; any other
cancel (for a request answered already, an id never sent, a malformed ``requestId``)
changes nothing. Either way the proxy answers what follows.

On mcp 1.x a cancel read while the proxy's answer waited to be written ended the SDK's
server loop, and the connection answered nothing more.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import GIT_SHA
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue import ExecutionContext, PolicyEnforcementPoint, create_default_policy_decision_point
from jevqueue.approvals import ApprovalAuthority, SignedApprovalVerifier
from jevqueue.audit import SQLiteAuditLog, verify_audit_log
from jevqueue.plugins.mcp import PolicyProxyServer, Upstream
from jevqueue.plugins.mcp._framework import stdio_server
from jevqueue.policy import ToolSpec
from raw_proxy import HANDSHAKE_VERSION

HOLDING_SERVER = Path(__file__).resolve().parent / "holding_server.py"
PATIENCE_SECONDS = 120.0  # a loaded machine starts the upstream slowly; a deaf proxy never answers


class _Wire:
    """The client's side of the proxy's stdin and stdout, one JSON-RPC message a line."""

    def __init__(self) -> None:
        self._to_proxy, self._stdin = anyio.create_memory_object_stream[str](256)
        self._stdout, self._from_proxy = anyio.create_memory_object_stream[str](256)
        self.messages: list[dict[str, Any]] = []
        self.waiting_for = "nothing"
        self._taken: set[int] = set()

    def __aiter__(self) -> _Wire:
        return self

    async def __anext__(self) -> str:
        try:
            return await self._stdin.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def write(self, text: str) -> None:
        await self._stdout.send(text)

    async def flush(self) -> None:
        return None

    async def send(self, *messages: dict[str, Any]) -> None:
        """Queue ``messages`` on the proxy's stdin, all at once."""
        for message in messages:
            await self._to_proxy.send(json.dumps({"jsonrpc": "2.0", **message}) + "\n")

    async def expect(self, what: str, matches: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first message that ``matches`` and no earlier ``expect`` returned, read from
        the proxy's output when it is not among the messages read already."""
        self.waiting_for = what
        for index, message in enumerate(self.messages):
            if index not in self._taken and matches(message):
                self._taken.add(index)
                return message
        async for text in self._from_proxy:
            self.messages.append(json.loads(text))
            if matches(self.messages[-1]):
                self._taken.add(len(self.messages) - 1)
                return self.messages[-1]
        raise AssertionError(f"the proxy's output ended while waiting for {what}")

    async def answer(self, ident: Any) -> dict[str, Any]:
        return await self.expect(
            f"an answer to {ident!r}",
            lambda m: m.get("id") == ident and ("result" in m or "error" in m),
        )

    async def handshake(self) -> None:
        await self.send(
            {
                "id": "init",
                "method": "initialize",
                "params": {
                    "protocolVersion": HANDSHAKE_VERSION,
                    "capabilities": {"elicitation": {}},
                    "clientInfo": {"name": "cancelling-client", "version": "0"},
                },
            }
        )
        await self.answer("init")
        await self.send({"method": "notifications/initialized"})

    def leave(self) -> None:
        """Close the proxy's stdin, as a client that goes away."""
        self._to_proxy.close()

    def rest(self) -> None:
        """Keep what the proxy wrote after the last ``expect``, up to its end."""
        while True:
            try:
                self.messages.append(json.loads(self._from_proxy.receive_nowait()))
            except (anyio.WouldBlock, anyio.EndOfStream):
                return

    def answers_to(self, ident: Any) -> list[dict[str, Any]]:
        return [
            m for m in self.messages if m.get("id") == ident and ("result" in m or "error" in m)
        ]


def _proxy(tmp_path: Path) -> PolicyProxyServer:
    workspace = tmp_path / "workspace"
    (workspace / ".git").mkdir(parents=True)
    key = Ed25519PrivateKey.generate()
    return PolicyProxyServer(
        Upstream.stdio(sys.executable, str(HOLDING_SERVER)),
        pep=PolicyEnforcementPoint(
            create_default_policy_decision_point(),
            audit_logger=SQLiteAuditLog(tmp_path / "audit.sqlite3"),
            approval_verifier=SignedApprovalVerifier({"user": key.public_key()}),
        ),
        specs=[
            ToolSpec.declare("hold", side_effects=()),
            ToolSpec.declare("release", side_effects=()),
            ToolSpec.declare(
                "write_note",
                side_effects=["file_write"],
                path_fields=["path"],
                content_fields=["text"],
            ),
        ],
        context=ExecutionContext(
            task_id="task-42", actor_id="coding-agent", workspace=str(workspace), git_sha=GIT_SHA
        ),
        authority=ApprovalAuthority(key, "user"),
    )


def _talk(proxy: PolicyProxyServer, scenario: Callable[[_Wire], Awaitable[None]]) -> _Wire:
    """Serve one client through ``scenario``, then let it leave; the wire keeps all it read."""
    wire = _Wire()

    async def main() -> None:
        async with (
            stdio_server(wire, wire) as (read_stream, write_stream),
            anyio.create_task_group() as tasks,
        ):
            tasks.start_soon(proxy.serve, read_stream, write_stream)
            await wire.handshake()
            await scenario(wire)
            wire.leave()

    async def patiently() -> None:
        with anyio.fail_after(PATIENCE_SECONDS):
            await main()

    try:
        anyio.run(patiently)
    except TimeoutError:
        pytest.fail(
            f"after {PATIENCE_SECONDS:g} s the proxy had not sent {wire.waiting_for}; it "
            f"wrote {wire.messages}",
            pytrace=False,
        )
    wire.rest()
    return wire


def _call(ident: Any, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": ident, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def _cancel(request_id: Any) -> dict[str, Any]:
    return {"method": "notifications/cancelled", "params": {"requestId": request_id}}


def _text(answer: dict[str, Any]) -> str:
    assert "result" in answer, answer
    assert answer["result"].get("isError") is not True, answer
    return "".join(block.get("text", "") for block in answer["result"]["content"])


async def _holding(wire: _Wire, ident: Any) -> None:
    """Send ``hold`` and return once the upstream runs it (it logs ``holding``)."""
    await wire.send(_call(ident, "hold"))
    await wire.expect(
        "the upstream's 'holding' log message",
        lambda m: (
            m.get("method") == "notifications/message"
            and m.get("params", {}).get("data") == "holding"
        ),
    )


@pytest.mark.parametrize("request_kind", ["ping", "tools/call"])
@pytest.mark.parametrize("cancelled", ["with-the-request", "after-its-answer"])
def test_the_proxy_answers_after_a_client_cancels_an_answered_request(
    tmp_path: Path, request_kind: str, cancelled: str
) -> None:
    proxy = _proxy(tmp_path)
    request = {"id": "a", "method": "ping"} if request_kind == "ping" else _call("a", "release")

    async def scenario(wire: _Wire) -> None:
        if cancelled == "with-the-request":  # the race a fast answer and a cancel run
            await wire.send(request, _cancel("a"), {"id": "b", "method": "ping"})
        else:  # the specification's late cancel, which the receiver ignores
            await wire.send(request)
            await wire.answer("a")
            await wire.send(_cancel("a"), {"id": "b", "method": "ping"})
        assert await wire.answer("b") == {"jsonrpc": "2.0", "id": "b", "result": {}}
        await wire.send(_call("c", "release"))
        assert _text(await wire.answer("c")) == "released the holds"

    wire = _talk(proxy, scenario)
    if cancelled == "after-its-answer":
        assert len(wire.answers_to("a")) == 1
    else:  # the cancel may reach the request before its answer: then it has none
        assert len(wire.answers_to("a")) <= 1


def test_a_cancel_naming_no_request_in_flight_changes_nothing(tmp_path: Path) -> None:
    proxy = _proxy(tmp_path)

    async def scenario(wire: _Wire) -> None:
        await _holding(wire, 1)
        await wire.send({"id": "answered", "method": "ping"})
        await wire.answer("answered")
        # Values equal to the id 1 in Python but no JSON-RPC id, ids never sent or
        # answered already, and requestIds that are no id at all.
        near_misses: list[Any] = [True, 1.0, "1.0", [1], {"id": 1}, None]
        others: list[Any] = ["answered", "never-sent", 999]
        await wire.send(
            *(_cancel(value) for value in [*near_misses, *others]),
            {"method": "notifications/cancelled", "params": {}},
            {"method": "notifications/cancelled"},
            {"method": "notifications/cancelled", "params": [1]},
            {"id": "after", "method": "ping"},
        )
        await wire.answer("after")
        await wire.send(_call(2, "release"))
        assert _text(await wire.answer(2)) == "released the holds"
        assert _text(await wire.answer(1)) == "released"  # the hold ran to its end

    wire = _talk(proxy, scenario)
    assert [len(wire.answers_to(ident)) for ident in (1, 2, "answered", "after")] == [1, 1, 1, 1]
    assert not wire.answers_to("never-sent") and not wire.answers_to(999)


@pytest.mark.parametrize("named", [1, "1"], ids=["its-id", "its-id-as-a-string"])
def test_a_cancel_stops_a_call_in_flight_upstream_and_it_goes_unanswered(
    tmp_path: Path, named: Any
) -> None:
    proxy = _proxy(tmp_path)

    async def scenario(wire: _Wire) -> None:
        await _holding(wire, 1)
        await wire.send(_cancel(named), _cancel(named), {"id": "after", "method": "ping"})
        await wire.answer("after")
        await wire.send(_call(2, "release"))
        assert _text(await wire.answer(2)) == "released the holds"

    wire = _talk(proxy, scenario)
    assert wire.answers_to(1) == []
    # The guard saw the hold start and end interrupted, once; the release ran.
    outcomes = sorted(proxy.guard.outcomes, key=lambda outcome: outcome.tool)
    assert [(outcome.tool, outcome.returned) for outcome in outcomes] == [
        ("hold", False),
        ("release", True),
    ]
    assert "ToolInterruptedError" in (outcomes[0].error or "")
    report = verify_audit_log(tmp_path / "audit.sqlite3")
    assert report.ok and report.count == 2  # each call allowed once, as judged


def test_a_cancel_during_the_approval_question_keeps_the_call_from_running(
    tmp_path: Path,
) -> None:
    proxy = _proxy(tmp_path)
    note = tmp_path / "workspace" / ".env"
    question = ("the proxy's approval question", lambda m: m.get("method") == "elicitation/create")
    yes = {"action": "accept", "content": {"approve": True}}

    async def scenario(wire: _Wire) -> None:
        await wire.send(_call(1, "write_note", path=".env", text="first"))
        asked = await wire.expect(*question)
        await wire.send(_cancel(1), {"id": "after", "method": "ping"})
        await wire.answer("after")
        # The user's yes arrives after the cancel: it approves nothing.
        await wire.send({"id": asked["id"], "result": yes}, {"id": "later", "method": "ping"})
        await wire.answer("later")
        await wire.send(_call(2, "write_note", path=".env", text="second"))
        asked = await wire.expect(*question)
        await wire.send({"id": asked["id"], "result": yes})
        assert "wrote 6 characters" in _text(await wire.answer(2))

    wire = _talk(proxy, scenario)
    assert wire.answers_to(1) == []
    assert note.read_text() == "second"
    [ran] = proxy.guard.outcomes  # the second call only
    assert ran.returned and (ran.call_id or "").endswith("/2")
    report = verify_audit_log(tmp_path / "audit.sqlite3")
    assert report.ok and report.count == 3  # the first asked; the second asked, then approved
