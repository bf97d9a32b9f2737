"""The proxy as a thin adapter of the guard: what each call runs, once, and what is judged.

Each test here fails on the proxy before the guard (d37f3e0^): a request id forwarded twice,
a tool the upstream re-lists mid-session judged by its stale listing, no ``approver=``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import GIT_SHA, REFERENCE_SERVER, ProxySetup
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue import ExecutionContext, PolicyEnforcementPoint, create_default_policy_decision_point
from jevqueue.approvals import ApprovalAuthority, SignedApprovalVerifier
from jevqueue.audit import SQLiteAuditLog, verify_audit_log
from jevqueue.errors import ApprovalDeclinedError, ConfigurationError
from jevqueue.plugins.mcp import PolicyProxyServer, Upstream
from jevqueue.policy import ApprovalRequest, AuthorityApprover, ToolSpec
from mcp import ClientSession
from proxy_client import MAJOR, approve, proxy_client
from raw_proxy import RawProxy

CONFORMANCE_SERVER = Path(__file__).resolve().parent / "conformance_server.py"


def _flag(result: Any) -> bool:
    return bool(getattr(result, "isError" if MAJOR < 2 else "is_error"))


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def _context(workspace: Path) -> ExecutionContext:
    return ExecutionContext(
        task_id="task-42", actor_id="coding-agent", workspace=str(workspace), git_sha=GIT_SHA
    )


async def _session(proxy: PolicyProxyServer, scenario: Any) -> Any:
    to_proxy = anyio.create_memory_object_stream[Any](16)
    from_proxy = anyio.create_memory_object_stream[Any](16)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(proxy.serve, to_proxy[1], from_proxy[0])
        async with ClientSession(from_proxy[1], to_proxy[0]) as session:
            await session.initialize()
            outcome = await scenario(session)
        tasks.cancel_scope.cancel()
    return outcome


def test_a_request_id_is_forwarded_upstream_at_most_once(ref_proxy: ProxySetup) -> None:
    note = ref_proxy.workspace / "once.txt"
    proxy = RawProxy(ref_proxy.reference(), {**os.environ, **ref_proxy.env})
    proxy.initialize()
    call = {"name": "write_note", "arguments": {"path": "once.txt", "text": "first"}}
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": call}
    proxy.send_line(json.dumps(message))
    first = proxy.response(7)
    assert first is not None and first["result"].get("isError") is not True, first
    note.unlink()
    # The same request id again (MCP forbids reusing one in a session): the first run's
    # result, not a second write.
    proxy.send_line(json.dumps(message))
    again = proxy.response(7)
    assert again is not None and again["result"] == first["result"], again
    assert not note.exists(), "the upstream ran the same request id twice"
    other = {**message, "id": 8}
    proxy.send_line(json.dumps(other))
    assert proxy.response(8) is not None
    assert note.read_text() == "first"  # a new request id is a new call
    status, _ = proxy.close()
    assert status == 0


def test_a_tool_the_upstream_relists_mid_session_is_judged_by_its_new_listing(
    ref_proxy: ProxySetup, tmp_path: Path
) -> None:
    ref_proxy.tools_file.write_text(
        '[[tool]]\nname = "get_weather"\nside_effects = ["network"]\n', encoding="utf-8"
    )
    (tmp_path / "tools.json").write_text(
        json.dumps([{"name": "get_weather", "parameters": ["city"]}]), encoding="utf-8"
    )
    log = tmp_path / "calls.jsonl"
    upstream = [sys.executable, str(CONFORMANCE_SERVER), str(tmp_path / "tools.json"), str(log)]
    # A raw client: an SDK client lists tools again on its own, which would hide the bug.
    proxy = RawProxy(ref_proxy.command([*upstream, "--late"]), {**os.environ, **ref_proxy.env})
    proxy.initialize()
    listed = proxy.request("tools/list", {})
    assert listed is not None and [t["name"] for t in listed["result"]["tools"]] == ["get_weather"]
    first = proxy.request("tools/call", {"name": "get_weather", "arguments": {"city": "Lisbon"}})
    assert first is not None and first["result"].get("isError") is not True, first
    # The upstream now lists get_weather as destructive (and a new late_tool), and said so
    # with notifications/tools/list_changed; the client calls without listing again.
    again = proxy.request("tools/call", {"name": "get_weather", "arguments": {"city": "Porto"}})
    late = proxy.request("tools/call", {"name": "late_tool", "arguments": {}})
    status, _ = proxy.close()
    assert status == 0
    assert again is not None and again["result"].get("isError") is True, again
    assert "destructive" in again["result"]["content"][0]["text"]
    assert late is not None and late["result"].get("isError") is True, late
    assert "not declared in the proxy's tools file" in late["result"]["content"][0]["text"]
    calls = [json.loads(line)["tool"] for line in log.read_text().splitlines()]
    assert calls == ["get_weather"], calls
    assert json.loads(ref_proxy.audit_verify().stdout)["count"] == 3


def _resource_proxy(tmp_path: Path, specs: list[ToolSpec], **options: Any) -> PolicyProxyServer:
    (tmp_path / "tools.json").write_text("[]", encoding="utf-8")
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    return PolicyProxyServer(
        Upstream.stdio(
            sys.executable,
            str(CONFORMANCE_SERVER),
            str(tmp_path / "tools.json"),
            str(tmp_path / "calls.jsonl"),
        ),
        pep=PolicyEnforcementPoint(
            create_default_policy_decision_point(),
            audit_logger=SQLiteAuditLog(tmp_path / "audit.sqlite3"),
        ),
        specs=specs,
        context=_context(workspace),
        **options,
    )


def test_resources_are_left_out_unless_resources_read_is_declared(tmp_path: Path) -> None:
    """resources/read reaches the upstream like a call: without a declaration the proxy
    neither offers resources nor relays a read asked for anyway, so nothing runs upstream."""
    proxy = _resource_proxy(tmp_path, [])

    async def scenario(session: Any) -> Any:
        # mcp 1.x reads the handshake with a method, 2.x with a property.
        offered = getattr(session, "get_server_capabilities", None)
        offered = offered() if callable(offered) else session.server_capabilities
        try:
            await session.read_resource("effect://touch")
        except Exception as refused:  # the SDK's JSON-RPC error (McpError, MCPError)
            return offered, str(refused)
        return offered, None

    offered, refused = anyio.run(_session, proxy, scenario)
    assert offered is not None and offered.resources is None
    assert refused is not None
    assert not (tmp_path / "calls.jsonl").exists(), "the upstream ran an unjudged read"


def test_a_declared_resources_read_relays_each_read_judged_and_audited(tmp_path: Path) -> None:
    reads = ToolSpec.declare("resources/read", side_effects=())
    proxy = _resource_proxy(tmp_path, [reads])

    async def scenario(session: Any) -> Any:
        return await session.read_resource("effect://touch")

    anyio.run(_session, proxy, scenario)
    log = tmp_path / "calls.jsonl"
    assert [json.loads(line) for line in log.read_text().splitlines()] == [
        {"resource": "effect://touch"}
    ]
    assert verify_audit_log(tmp_path / "audit.sqlite3").count == 1
    assert proxy.guard.last is not None and proxy.guard.last.tool == "resources/read"


def test_resources_are_never_relayed_unjudged(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r'name = "resources/read"'):
        _resource_proxy(tmp_path, [], relay_unjudged=("resources",))
    with pytest.raises(ConfigurationError, match=r"relay_unjudged names \['tools'\]"):
        _resource_proxy(tmp_path, [], relay_unjudged=("tools",))


def _approving_proxy(setup: ProxySetup, approver: Any) -> tuple[PolicyProxyServer, Any]:
    key = Ed25519PrivateKey.generate()
    authority = ApprovalAuthority(key, "release-manager")
    from jevqueue import load_tools_file

    proxy = PolicyProxyServer(
        Upstream.stdio(sys.executable, str(REFERENCE_SERVER)),
        pep=PolicyEnforcementPoint(
            create_default_policy_decision_point(),
            audit_logger=SQLiteAuditLog(setup.audit),
            approval_verifier=SignedApprovalVerifier({"release-manager": key.public_key()}),
        ),
        specs=load_tools_file(setup.tools_file),
        context=_context(setup.workspace),
        approver=approver(authority),
    )
    return proxy, proxy.approver


def test_an_embedded_approver_is_shown_the_core_request_and_approves_in_place(
    ref_proxy: ProxySetup,
) -> None:
    proxy, approver = _approving_proxy(ref_proxy, AuthorityApprover)

    async def scenario(session: Any) -> Any:
        return await session.call_tool("write_note", {"path": ".env", "text": "DEBUG=1"})

    result = anyio.run(_session, proxy, scenario)
    assert not _flag(result), _text(result)
    # The upstream received the resolved absolute path the policy judged.
    target = ref_proxy.workspace.resolve() / ".env"
    assert str(target) in _text(result) and target.read_text() == "DEBUG=1"
    [request] = approver.requests
    assert type(request) is ApprovalRequest and request.tool == "write_note"
    assert request.action_digest == proxy.guard.last.action_digest


def test_an_embedded_approver_declines_with_a_reason_the_client_reads(
    ref_proxy: ProxySetup,
) -> None:
    def declining(authority: Any) -> Any:
        def approver(request: ApprovalRequest) -> None:
            raise ApprovalDeclinedError("no secrets are written during the freeze")

        return approver

    proxy, _ = _approving_proxy(ref_proxy, declining)

    async def scenario(session: Any) -> Any:
        return await session.call_tool("write_note", {"path": ".env", "text": "DEBUG=1"})

    result = anyio.run(_session, proxy, scenario)
    assert _flag(result) and "no secrets are written during the freeze" in _text(result)
    assert not (ref_proxy.workspace / ".env").exists()


@pytest.mark.parametrize("era", ["auto", "legacy"] if MAJOR >= 2 else ["auto"])
def test_a_batch_runs_each_call_once_across_the_clients_approval_pause(
    ref_proxy: ProxySetup, tmp_path: Path, era: str
) -> None:
    """Three concurrent calls, one paused for the client's user (an elicitation, or on
    2026-07-28 an InputRequiredResult and a retry): each reaches the upstream once, with
    the resolved absolute path."""
    ref_proxy.tools_file.write_text(
        '[[tool]]\nname = "write_note"\nside_effects = ["file_write"]\npath_fields = ["path"]\n',
        encoding="utf-8",
    )
    (tmp_path / "tools.json").write_text(
        json.dumps([{"name": "write_note", "parameters": ["path", "text"]}]), encoding="utf-8"
    )
    log = tmp_path / "calls.jsonl"
    command = ref_proxy.command(
        [sys.executable, str(CONFORMANCE_SERVER), str(tmp_path / "tools.json"), str(log)]
    )
    paths = ["a.txt", ".env", "b.txt"]

    async def scenario() -> list[Any]:
        async with proxy_client(command, ref_proxy.env, answer=approve, era=era) as client:
            outcomes: list[Any] = [None] * len(paths)

            async def call(index: int) -> None:
                arguments = {"path": paths[index], "text": "once"}
                outcomes[index] = await client.call("write_note", arguments)

            async with anyio.create_task_group() as calls:
                for index in range(len(paths)):
                    calls.start_soon(call, index)
            assert len(client.questions) == 1, client.questions
            return outcomes

    outcomes = anyio.run(scenario)
    assert [o.is_error for o in outcomes] == [False, False, False], outcomes
    received = sorted(
        json.loads(line)["arguments"]["path"] for line in log.read_text().splitlines()
    )
    root = ref_proxy.workspace.resolve()
    assert received == sorted(str(root / path) for path in paths), received


def test_an_embedded_approver_that_answers_wrongly_is_reported_with_its_own_error(
    ref_proxy: ProxySetup,
) -> None:
    def yes_man(authority: Any) -> Any:
        return lambda request: True  # a plain "yes" cannot be verified

    proxy, _ = _approving_proxy(ref_proxy, yes_man)

    async def scenario(session: Any) -> Any:
        return await session.call_tool("write_note", {"path": ".env", "text": "DEBUG=1"})

    result = anyio.run(_session, proxy, scenario)
    assert _flag(result), _text(result)
    assert "the approver failed" in _text(result) and "returned True (bool)" in _text(result)
    assert not (ref_proxy.workspace / ".env").exists()
