"""``jevqueue demo``: all nine paths, exit 0, and not one byte on the network by default."""

from __future__ import annotations

import re
import socket
from typing import Any

import pytest
from click.testing import CliRunner

pytest.importorskip("httpx", reason='the demo needs pip install "jevqueue[openai]"')

from jevqueue import Path
from jevqueue.cli import main
from jevqueue.demo import SESSION, DemoSession
from jevqueue.plugins.openai import (
    ScriptedChatServer,
    text_completion,
    tool_call_completion,
)

STEP = re.compile(r"^  > (\w+)", re.MULTILINE)


@pytest.fixture
def no_sockets(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record (and refuse) every attempt to resolve or connect, loopback included."""
    attempts: list[str] = []

    def refuse(name: str) -> Any:
        def attempt(*args: Any, **kwargs: Any) -> Any:
            attempts.append(f"{name}{args[1:] if name.startswith('socket.') else args}")
            raise OSError(f"the demo tried the network: {name}")

        return attempt

    monkeypatch.setattr(socket.socket, "connect", refuse("socket.connect"))
    monkeypatch.setattr(socket.socket, "connect_ex", refuse("socket.connect_ex"))
    monkeypatch.setattr(socket, "create_connection", refuse("create_connection"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    return attempts


def test_demo_plays_all_nine_paths_offline_and_exits_0(no_sockets: list[str]) -> None:
    result = CliRunner().invoke(main, ["demo"])

    assert result.exit_code == 0, result.output
    assert set(STEP.findall(result.output)) == {path.value for path in Path}
    assert "Paths taken (9 of 9)" in result.output
    assert no_sockets == []


def test_each_turn_takes_the_path_its_script_names(no_sockets: list[str]) -> None:
    session = DemoSession()
    try:
        reports = list(session.play())
    finally:
        session.close()

    assert [report.path for report in reports] == [p for turn in SESSION for p in turn.expect]
    assert all(report.as_expected for report in reports)
    # Only the generate paths reach the provider, once each.
    for report in reports:
        assert report.provider_calls == (report.path.provider_calls if report.path else 0)
    assert session.host.request_count == sum(report.provider_calls for report in reports)
    assert no_sockets == []


def test_output_shows_user_messages_tools_scores_and_provider_calls() -> None:
    output = CliRunner().invoke(main, ["demo"]).output

    for turn in SESSION:
        assert f'user: "{turn.user}"' in output
    assert "forced: read_file" in output
    assert re.search(r"scores\s+read_file \d\.\d\d", output)
    assert 'tool_choice -> "read_file", parallel_tool_calls: false' in output
    assert 'tool_choice: "none"' in output
    assert "0 calls: the tool call was built locally (say_tool_call)" in output
    assert "\x1b[" not in output  # no colour when the output is not a terminal


def _obedient(body: dict[str, Any]) -> dict[str, Any]:
    """A model on the other end of a real socket: does what each request allows."""
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        name = choice["function"]["name"]
        return tool_call_completion(name, {"path": "README.md"}, model=body["model"])
    return text_completion("Done.", model=body["model"])


@pytest.mark.network_allowed
def test_the_same_session_runs_against_a_real_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEMO_TEST_KEY", "sk-demo-secret")
    with ScriptedChatServer(_obedient) as server:
        result = CliRunner().invoke(
            main,
            [
                "demo",
                "--base-url",
                server.base_url,
                "--model",
                "local-model",
                "--api-key-env",
                "DEMO_TEST_KEY",
            ],
        )

    assert result.exit_code == 0, result.output
    assert set(STEP.findall(result.output)) == {path.value for path in Path}
    assert "induced locally" in result.output
    assert "sk-demo-secret" not in result.output
    assert {h["authorization"] for h in server.headers} == {"Bearer sk-demo-secret"}
    choices = [body.get("tool_choice") for body in server.requests]
    assert {"type": "function", "function": {"name": "read_file"}} in choices
    assert "none" in choices
    assert all(body["model"] == "local-model" for body in server.requests)


@pytest.mark.network_allowed
def test_a_real_endpoint_that_ignores_tool_choice_is_shown_blocked() -> None:
    def stubborn(body: dict[str, Any]) -> dict[str, Any]:
        # A local server that never reads tool_choice and always calls the last tool.
        last = body["tools"][-1]["function"]["name"]
        return tool_call_completion(last, {"tag": "v0", "environment": "production"})

    with ScriptedChatServer(stubborn) as server:
        result = CliRunner().invoke(main, ["demo", "--base-url", server.base_url, "--model", "m"])

    assert result.exit_code == 0, result.output
    assert "ProviderDisobeyedError" in result.output
    assert "deploy_release(" not in result.output.split("Turn 2")[0], "a blocked call ran"


@pytest.mark.network_allowed
def test_an_unreachable_endpoint_fails_with_a_clear_message() -> None:
    with ScriptedChatServer(_obedient) as server:
        base_url = server.base_url
    result = CliRunner().invoke(main, ["demo", "--base-url", base_url, "--model", "m"])

    assert result.exit_code == 1
    assert "failed before any response" in result.output


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--base-url", "http://127.0.0.1:9/v1"], "--base-url needs --model"),
        (["--model", "gpt-4o"], "go with --base-url"),
        (
            ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--api-key-env", "NOPE_X"],
            "NOPE_X is not set",
        ),
    ],
)
def test_misused_options_are_usage_errors(
    arguments: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NOPE_X", raising=False)
    result = CliRunner().invoke(main, ["demo", *arguments])
    assert result.exit_code == 2
    assert message in result.output


def test_the_demo_keeps_the_default_thresholds_unless_prose_is_unreachable() -> None:
    from jevqueue import Thresholds
    from jevqueue.demo.runner import demo_thresholds

    usable = Thresholds(confident=0.7, margin=0.1, floor=0.2)
    assert demo_thresholds(usable) == (usable, None)

    raised, note = demo_thresholds(Thresholds(confident=0.7, margin=0.1, floor=0.0))
    assert (raised.confident, raised.margin) == (0.7, 0.1)
    assert 0.0 < raised.floor <= 0.7
    assert note is not None and "prose" in note
