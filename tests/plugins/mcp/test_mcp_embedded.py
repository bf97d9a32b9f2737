"""``PolicyProxyServer`` embedded in Python: served on in-memory streams, judged the same way."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from conftest import GIT_SHA, REFERENCE_SERVER, ProxySetup
from jevqueue import (
    ExecutionContext,
    PolicyEnforcementPoint,
    create_default_policy_decision_point,
    load_tools_file,
)
from jevqueue.audit import SQLiteAuditLog, verify_audit_log
from jevqueue.errors import ConfigurationError
from jevqueue.plugins.mcp import PolicyProxyServer, Upstream
from mcp import ClientSession
from proxy_client import MAJOR


def _proxy(setup: ProxySetup, upstream: object) -> PolicyProxyServer:
    return PolicyProxyServer(
        upstream,  # type: ignore[arg-type]
        pep=PolicyEnforcementPoint(
            create_default_policy_decision_point(), audit_logger=SQLiteAuditLog(setup.audit)
        ),
        specs=load_tools_file(setup.tools_file),
        context=ExecutionContext(
            task_id="task-42",
            actor_id="coding-agent",
            workspace=str(setup.workspace),
            git_sha=GIT_SHA,
        ),
    )


def test_an_embedded_proxy_judges_calls(ref_proxy: ProxySetup, tmp_path: Path) -> None:
    proxy = _proxy(ref_proxy, Upstream.stdio(sys.executable, str(REFERENCE_SERVER)))
    outside = tmp_path / "outside.txt"

    async def scenario() -> None:
        to_proxy = anyio.create_memory_object_stream(16)
        from_proxy = anyio.create_memory_object_stream(16)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(proxy.serve, to_proxy[1], from_proxy[0])
            async with ClientSession(from_proxy[1], to_proxy[0]) as session:
                await session.initialize()
                inside = await session.call_tool("write_note", {"path": "e.txt", "text": "e"})
                denied = await session.call_tool("write_note", {"path": str(outside), "text": "x"})
                flags = [
                    getattr(result, "isError" if MAJOR < 2 else "is_error")
                    for result in (inside, denied)
                ]
                assert flags == [False, True]
            tasks.cancel_scope.cancel()

    anyio.run(scenario)
    assert (ref_proxy.workspace / "e.txt").read_text() == "e"
    assert not outside.exists()
    assert verify_audit_log(ref_proxy.audit).count == 2


def test_the_embedding_api_refuses_impossible_configuration(ref_proxy: ProxySetup) -> None:
    with pytest.raises(ConfigurationError, match="command list"):
        _proxy(ref_proxy, 42)
    with pytest.raises(ConfigurationError, match="http"):
        Upstream.http("ftp://example.invalid/mcp")
    with pytest.raises(ConfigurationError, match="exactly one"):
        Upstream(command=("x",), url="http://127.0.0.1/mcp")
    with pytest.raises(ConfigurationError, match="ToolSpec"):
        PolicyProxyServer(
            ["cat"],
            pep=PolicyEnforcementPoint(create_default_policy_decision_point()),
            specs="tools.toml",  # type: ignore[arg-type]
            context={"task_id": "t", "actor_id": "a", "workspace": "/w", "git_sha": "abcdef1"},
        )
    with pytest.raises(ConfigurationError, match="issue"):
        PolicyProxyServer(
            ["cat"],
            pep=PolicyEnforcementPoint(create_default_policy_decision_point()),
            specs=(),
            context={"task_id": "t", "actor_id": "a", "workspace": "/w", "git_sha": "abcdef1"},
            authority=object(),
        )
