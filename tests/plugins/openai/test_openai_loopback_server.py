"""The host against a real HTTP server on 127.0.0.1: the constraint really leaves the
process, and a server that ignores it is caught before anything executes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

httpx = pytest.importorskip(
    "httpx", reason='the openai plugin needs pip install "jevqueue[openai]"'
)

from jevqueue import Governor, Path, Thresholds  # noqa: E402
from jevqueue.errors import ProviderDisobeyedError, ProviderHTTPError  # noqa: E402
from jevqueue.plugins.openai import (  # noqa: E402
    OpenAIChatHost,
    ScriptedChatServer,
    called_tool_names,
    text_completion,
    tool_call_completion,
)

pytestmark = pytest.mark.network_allowed

KEY = "sk-loopback-secret-42"
TOOLS: list[dict[str, Any]] = [
    {
        "name": "read_file",
        "description": "Read a file from the repository and return its text.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
    {
        "name": "delete_branch",
        "description": "Delete a git branch.",
        "parameters": {"type": "object", "properties": {"branch": {"type": "string"}}},
    },
]


class FixedBallot:
    def __init__(self, scores: Mapping[str, float]) -> None:
        self.scores = dict(scores)

    def score(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> Mapping[str, float]:
        return self.scores


# Fixed thresholds: the paths under test must not move when the defaults are recalibrated.
THRESHOLDS = Thresholds(confident=0.7, margin=0.2, floor=0.2)


def governed(ballot: FixedBallot, **settings: Any) -> Governor:
    return Governor(ballot, thresholds=THRESHOLDS, **settings)


def obedient_model(body: dict[str, Any]) -> dict[str, Any]:
    """Does what the request allows: calls the forced tool, else answers in prose."""
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        return tool_call_completion(choice["function"]["name"], {"path": "README.md"}, model="m")
    return text_completion("Done.", model="m")


def ignores_tool_choice(body: dict[str, Any]) -> dict[str, Any]:
    """A server that never reads tool_choice: it always picks the last tool offered."""
    last = body["tools"][-1]["function"]["name"]
    return tool_call_completion(last, {"branch": "main"}, model="m")


def _host(base_url: str) -> OpenAIChatHost:
    return OpenAIChatHost(
        model="local-model",
        messages=[{"role": "user", "content": "Show me README.md"}],
        tools=TOOLS,
        base_url=base_url,
        api_key=KEY,
    )


def test_tool_choice_and_parallel_tool_calls_leave_the_process() -> None:
    with ScriptedChatServer(obedient_model) as server:
        governor = governed(FixedBallot({"read_file": 0.95, "delete_branch": 0.0}))
        with _host(server.base_url) as host:
            response = governor.step(host)
        prose = governed(FixedBallot({"read_file": 0.0, "delete_branch": 0.0}))
        with _host(server.base_url) as host:
            prose.step(host)
        delegate = governed(FixedBallot({"read_file": 0.4, "delete_branch": 0.3}))
        with _host(server.base_url) as host:
            delegate.step(host)

    forced, prose_body, passthrough = server.requests
    assert governor.last is not None and governor.last.path is Path.TOOL
    assert forced["tool_choice"] == {"type": "function", "function": {"name": "read_file"}}
    assert forced["parallel_tool_calls"] is False
    assert [tool["type"] for tool in forced["tools"]] == ["function", "function"]
    assert called_tool_names(response) == ["read_file"]
    assert prose_body["tool_choice"] == "none"
    assert "tool_choice" not in passthrough and "parallel_tool_calls" not in passthrough
    assert passthrough["messages"] == [{"role": "user", "content": "Show me README.md"}]
    assert {headers["authorization"] for headers in server.headers} == {f"Bearer {KEY}"}


def test_a_server_that_ignores_tool_choice_is_blocked_and_nothing_executes() -> None:
    executed: list[str] = []
    governor = governed(FixedBallot({"read_file": 0.95, "delete_branch": 0.0}))

    with (
        ScriptedChatServer(ignores_tool_choice) as server,
        _host(server.base_url) as host,
        pytest.raises(ProviderDisobeyedError) as caught,
    ):
        response = governor.step(host)
        executed.extend(called_tool_names(response))  # the agent loop would run these

    assert executed == []
    assert caught.value.expected == ["read_file"]
    assert caught.value.called == ["delete_branch"]
    assert server.requests[0]["tool_choice"]["function"]["name"] == "read_file"


def test_a_server_error_is_typed_and_the_key_stays_secret() -> None:
    def broken(body: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError(f"model {body['model']} is not loaded")

    with (
        ScriptedChatServer(broken) as server,
        _host(server.base_url) as host,
        pytest.raises(ProviderHTTPError) as caught,
    ):
        governed(FixedBallot({"read_file": 0.95, "delete_branch": 0.0})).step(host)

    assert caught.value.status == 500
    assert "not loaded" in caught.value.body_excerpt
    assert KEY not in str(caught.value)


def test_a_server_that_is_not_running_is_a_typed_error() -> None:
    with ScriptedChatServer(obedient_model) as server:
        base_url = server.base_url  # the port is free again once the server stops
    with _host(base_url) as host, pytest.raises(ProviderHTTPError) as caught:
        host.generate(force_tool=None, directive="")
    assert caught.value.status is None
