"""client -> jevqueue mcp-proxy -> @modelcontextprotocol/server-filesystem, for real.

What the policy denies never reaches the server: the file system shows it.
"""

from __future__ import annotations

import json
import os

import anyio
from conftest import ProxySetup
from proxy_client import proxy_client


def test_relays_initialize_and_lists_only_declared_tools(fs_proxy: ProxySetup) -> None:
    async def scenario() -> None:
        async with proxy_client(fs_proxy.filesystem(), fs_proxy.env) as client:
            assert client.server_name == "secure-filesystem-server"
            names = await client.list_tools()
            assert sorted(names) == ["list_allowed_directories", "read_text_file", "write_file"]

    anyio.run(scenario)


def test_a_write_inside_the_workspace_runs_with_the_judged_path(fs_proxy: ProxySetup) -> None:
    async def scenario() -> None:
        async with proxy_client(fs_proxy.filesystem(), fs_proxy.env) as client:
            outcome = await client.call("write_file", {"path": "notes.txt", "content": "hi"})
            assert not outcome.is_error, outcome.text
            # The relative path was resolved against the workspace the policy judged.
            assert str(fs_proxy.workspace.resolve() / "notes.txt") in outcome.text
            read = await client.call("read_text_file", {"path": "notes.txt"})
            assert read.text == "hi"

    anyio.run(scenario)
    assert (fs_proxy.workspace / "notes.txt").read_text() == "hi"


def test_writes_the_policy_denies_never_reach_the_server(fs_proxy: ProxySetup) -> None:
    outside = fs_proxy.workspace.parent / "outside.txt"
    sibling = fs_proxy.workspace.parent / "workspace-evil"
    sibling.mkdir()
    link = fs_proxy.workspace / "escape"
    os.symlink(fs_proxy.workspace.parent, link)
    attempts = [
        ({"path": str(outside), "content": "x"}, "outside the workspace"),
        ({"path": str(sibling / "a.txt"), "content": "x"}, "outside the workspace"),
        ({"path": "escape/outside.txt", "content": "x"}, "outside the workspace"),
        ({"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n"}, ".git"),
        (
            {"path": "config.py", "content": "KEY = 'AKIAIOSFODNN7EXAMPLE'"},
            "credential",
        ),
    ]

    async def scenario() -> None:
        async with proxy_client(fs_proxy.filesystem(), fs_proxy.env) as client:
            for arguments, reason in attempts:
                outcome = await client.call("write_file", arguments)
                assert outcome.is_error, arguments
                assert reason in outcome.text, outcome.text
                assert "the call was not run" in outcome.text

    anyio.run(scenario)
    assert not outside.exists()
    assert not (sibling / "a.txt").exists()
    assert not (fs_proxy.workspace / ".git" / "hooks").exists()
    assert not (fs_proxy.workspace / "config.py").exists()


def test_dot_dot_segments_are_sent_back_for_repair_not_run(fs_proxy: ProxySetup) -> None:
    async def scenario() -> None:
        async with proxy_client(fs_proxy.filesystem(), fs_proxy.env) as client:
            outcome = await client.call("write_file", {"path": "sub/../n.txt", "content": "x"})
            assert outcome.is_error
            assert "proposes a repaired call instead, which was not run" in outcome.text
            assert "'arguments': {'path': 'n.txt', 'content': 'x'}" in outcome.text

    anyio.run(scenario)
    assert not (fs_proxy.workspace / "n.txt").exists()


def test_an_undeclared_tool_is_refused_even_when_called_by_name(fs_proxy: ProxySetup) -> None:
    (fs_proxy.workspace / "a.txt").write_text("secret-ish")

    async def scenario() -> None:
        async with proxy_client(fs_proxy.filesystem(), fs_proxy.env) as client:
            for name, arguments in [
                ("read_multiple_files", {"paths": [str(fs_proxy.workspace / "a.txt")]}),
                ("move_file", {"source": "a.txt", "destination": "b.txt"}),
                ("Write_File", {"path": "x.txt", "content": "x"}),
                ("no_such_tool", {}),
            ]:
                outcome = await client.call(name, arguments)
                assert outcome.is_error
                assert "not declared in the proxy's tools file" in outcome.text
                assert "secret-ish" not in outcome.text

    anyio.run(scenario)
    assert (fs_proxy.workspace / "a.txt").exists()
    assert not (fs_proxy.workspace / "b.txt").exists()
    assert not (fs_proxy.workspace / "x.txt").exists()


def test_arguments_that_break_the_declaration_are_refused(fs_proxy: ProxySetup) -> None:
    async def scenario() -> None:
        async with proxy_client(fs_proxy.filesystem(), fs_proxy.env) as client:
            missing = await client.call("write_file", {"content": "no path"})
            assert missing.is_error and "required path field 'path'" in missing.text
            wrong = await client.call("write_file", {"path": 7, "content": "x"})
            assert wrong.is_error and "must be a string" in wrong.text

    anyio.run(scenario)


def test_every_decision_is_in_a_verifiable_audit_log(fs_proxy: ProxySetup) -> None:
    async def scenario() -> None:
        async with proxy_client(fs_proxy.filesystem(), fs_proxy.env) as client:
            await client.call("write_file", {"path": "ok.txt", "content": "fine"})
            await client.call("write_file", {"path": "/etc/evil", "content": "x"})
            await client.call("read_multiple_files", {"paths": []})

    anyio.run(scenario)
    verified = fs_proxy.audit_verify()
    assert verified.returncode == 0, verified.stdout + verified.stderr
    report = json.loads(verified.stdout)
    assert report["ok"] and report["count"] == 3
    import sqlite3

    with sqlite3.connect(fs_proxy.audit) as db:
        rows = db.execute("SELECT tool, result FROM audit_log ORDER BY seq").fetchall()
    assert rows == [
        ("write_file", "ALLOW"),
        ("write_file", "DENY"),
        ("read_multiple_files", "DENY"),
    ]


def test_policy_files_add_rules_and_the_environment_is_judged(fs_proxy: ProxySetup) -> None:
    policy = fs_proxy.tools_file.parent / "freeze.toml"
    policy.write_text(
        '[policy]\nname = "acme"\nversion = 1\n\n'
        '[[rule]]\nid = "acme.prod-freeze"\neffect = "deny"\n'
        'reason = "production is changed by the release pipeline"\n'
        'environments = ["prod"]\nside_effects = ["file_write"]\n',
        encoding="utf-8",
    )
    command = fs_proxy.filesystem("--policy", str(policy), "--environment", "prod")

    async def scenario() -> None:
        async with proxy_client(command, fs_proxy.env) as client:
            frozen = await client.call("write_file", {"path": "a.txt", "content": "x"})
            assert frozen.is_error and "release pipeline" in frozen.text
            listing = await client.call("list_allowed_directories", {})
            assert not listing.is_error

    anyio.run(scenario)
    assert not (fs_proxy.workspace / "a.txt").exists()
