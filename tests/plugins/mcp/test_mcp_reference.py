"""client -> proxy -> the Python reference server: the relay, annotations, crashes, bad input."""

from __future__ import annotations

import os
import sys

import anyio
from conftest import ProxySetup, python_server
from proxy_client import proxy_client
from raw_proxy import RawProxy


def test_resources_prompts_and_instructions_are_relayed_when_asked(ref_proxy: ProxySetup) -> None:
    """Resources are relayed when the tools file declares resources/read (each read judged
    and audited); prompts when --relay-unjudged names them."""
    with ref_proxy.tools_file.open("a", encoding="utf-8") as tools:
        tools.write('\n[[tool]]\nname = "resources/read"\nside_effects = []\n')

    async def scenario() -> None:
        command = ref_proxy.reference("--relay-unjudged", "prompts")
        async with proxy_client(command, ref_proxy.env) as client:
            assert client.server_name == "jevqueue-reference"
            assert client.instructions == "Reference server for the jevqueue proxy tests."
            assert await client.resource_uris() == ["note://greeting"]
            assert (
                await client.read_resource("note://greeting") == "hello from the reference server"
            )
            assert await client.prompt_names() == ["review"]
            assert (
                await client.get_prompt("review", {"topic": "the diff"})
                == "Review the diff carefully."
            )
            echo = await client.call("echo", {"text": "hello"})
            assert not echo.is_error and echo.text == "hello"

    anyio.run(scenario)
    import sqlite3

    with sqlite3.connect(ref_proxy.audit) as db:
        rows = db.execute("SELECT tool, result FROM audit_log ORDER BY seq").fetchall()
    assert rows == [("resources/read", "ALLOW"), ("echo", "ALLOW")]


def test_upstream_annotations_tighten_but_never_loosen(ref_proxy: ProxySetup) -> None:
    victim = ref_proxy.workspace / "keep.txt"
    victim.write_text("keep me")

    async def scenario() -> None:
        async with proxy_client(ref_proxy.reference(), ref_proxy.env) as client:
            names = await client.list_tools()
            # ``wipe`` is declared as a read, but the server itself calls it destructive.
            assert "wipe" not in names
            assert "undeclared" not in names
            assert sorted(names) == ["crash", "echo", "write_note"]
            outcome = await client.call("wipe", {"path": "keep.txt"})
            assert outcome.is_error and "destructive" in outcome.text

    anyio.run(scenario)
    assert victim.read_text() == "keep me"


def test_a_crashing_upstream_stops_the_proxy_and_lets_nothing_through(
    ref_proxy: ProxySetup,
) -> None:
    proxy = RawProxy(ref_proxy.reference(), {**os.environ, **ref_proxy.env})
    proxy.initialize()
    answer = proxy.request("tools/call", {"name": "crash", "arguments": {}})
    if answer is not None:  # the proxy may answer before it stops, never with a success
        assert "error" in answer or answer["result"].get("isError") is True, answer
    status, stderr = proxy.wait()
    assert status == 1
    assert "stopped" in stderr and "no call was let through" in stderr


def test_malformed_requests_get_errors_and_the_proxy_keeps_serving(ref_proxy: ProxySetup) -> None:
    note = ref_proxy.workspace / "n.txt"
    proxy = RawProxy(ref_proxy.reference(), {**os.environ, **ref_proxy.env})
    proxy.initialize()
    proxy.send_line("this is not json")
    proxy.send_line('{"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": ')
    bad_calls = [
        {"name": "write_note", "arguments": ["n.txt", "x"]},
        {"name": 12, "arguments": {}},
        {"arguments": {"path": "n.txt", "text": "x"}},
        {"name": "write_note", "arguments": {"path": "n.txt", "text": float("nan")}},
        {"name": "write_note", "arguments": {"path": {"nested": "n.txt"}, "text": "x"}},
        {"name": "write_note", "arguments": {"path": "n.txt\u0000", "text": "x"}},
    ]
    for params in bad_calls:
        answer = proxy.request("tools/call", params)
        assert answer is not None, params
        assert "error" in answer or answer["result"].get("isError") is True, (params, answer)
    unknown = proxy.request("tools/frobnicate", {})
    assert unknown is not None and "error" in unknown
    assert not note.exists()
    good = proxy.request(
        "tools/call", {"name": "write_note", "arguments": {"path": "n.txt", "text": "ok"}}
    )
    assert good is not None and good["result"].get("isError") is not True, good
    assert note.read_text() == "ok"
    status, _ = proxy.close()
    assert status == 0


def test_an_upstream_that_cannot_start_is_reported(ref_proxy: ProxySetup) -> None:
    for upstream in (["no-such-mcp-server"], [sys.executable, "-c", "raise SystemExit(4)"]):
        proxy = RawProxy(ref_proxy.command(upstream), {**os.environ, **ref_proxy.env})
        status, stderr = proxy.close()
        assert status == 1
        assert "jevqueue mcp-proxy:" in stderr
        assert "not found" in stderr or "did not start" in stderr


def test_the_upstream_gets_the_environment_the_client_gave_the_proxy(
    ref_proxy: ProxySetup,
) -> None:
    ref_proxy.tools_file.write_text(
        '[[tool]]\nname = "read_env"\nside_effects = []\n', encoding="utf-8"
    )

    async def scenario() -> None:
        env = {**ref_proxy.env, "REFERENCE_TOKEN": "token-from-client-config"}
        async with proxy_client(ref_proxy.reference(), env) as client:
            value = await client.call("read_env", {"name": "REFERENCE_TOKEN"})
            assert value.text == "token-from-client-config"

    anyio.run(scenario)


def test_mcp_server_time_a_third_party_python_server(ref_proxy: ProxySetup) -> None:
    ref_proxy.tools_file.write_text(
        '[[tool]]\nname = "get_current_time"\nside_effects = []\n', encoding="utf-8"
    )

    async def scenario() -> None:
        command = ref_proxy.command([python_server("mcp-server-time"), "--local-timezone", "UTC"])
        async with proxy_client(command, ref_proxy.env) as client:
            assert await client.list_tools() == ["get_current_time"]  # convert_time is not declared
            now = await client.call("get_current_time", {"timezone": "UTC"})
            assert not now.is_error and '"timezone": "UTC"' in now.text
            refused = await client.call(
                "convert_time",
                {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"},
            )
            assert refused.is_error and "not declared" in refused.text

    anyio.run(scenario)
