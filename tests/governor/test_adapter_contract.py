"""The seed's four adapter tests, and the promises about the caller's messages."""

from __future__ import annotations

import copy
import socket
from typing import Any

import pytest
from jevqueue import LOCAL_MODEL_ID, Governor, Host, Path
from jevqueue.errors import NetworkAccessError, ProviderDisobeyedError
from jevqueue.testing import ScriptedHost, ScriptedModel, text_response, tool_call_response
from jevqueue.testing.network import NetworkGuard

from .conftest import CONFIDENT, LOW, MIDDLE, THRESHOLDS, TIED, FixedBallot, user_turn


def governor(scores: dict[str, float], **settings: Any) -> Governor:
    return Governor(FixedBallot(scores), thresholds=THRESHOLDS, **settings)


def test_the_scripted_host_is_a_host() -> None:
    assert isinstance(ScriptedHost(), Host)


# 1. A confident tool route reaches the provider with the constraint set.
def test_a_confident_route_reaches_the_provider_with_the_constraint_set(
    tools: list[dict[str, Any]],
) -> None:
    host = ScriptedHost(tools, user_turn(), [tool_call_response(("read_file", {"path": "a"}))])
    governor(CONFIDENT).step(host)

    (call,) = host.generate_calls
    assert call.request is not None
    assert call.request["tool_choice"] == {"type": "function", "function": {"name": "read_file"}}
    assert call.request["parallel_tool_calls"] is False
    assert call.messages is not None
    assert call.messages[-1] == {"role": "system", "content": call.directive}
    assert "read_file" in call.directive


# 2. A provider that ignores the constraint raises.
def test_a_provider_that_ignores_the_constraint_raises(tools: list[dict[str, Any]]) -> None:
    host = ScriptedHost(tools, user_turn(), [tool_call_response(("search_files", {"query": "a"}))])
    gov = governor(CONFIDENT)

    with pytest.raises(ProviderDisobeyedError, match="ignored the selected tool"):
        gov.step(host)

    assert [c.kind for c in host.calls] == ["generate"]  # nothing said, nothing executed
    assert gov.last is not None and gov.last.path is Path.TOOL
    assert gov.last.error is not None and "ProviderDisobeyedError" in gov.last.error


# 3. Delegation is a true passthrough: no directive, no tool_choice.
def test_delegation_is_a_true_passthrough(tools: list[dict[str, Any]]) -> None:
    messages = user_turn("notes")
    snapshot = copy.deepcopy(messages)
    host = ScriptedHost(tools, messages, [text_response("ok")])
    governor(MIDDLE).step(host)

    (call,) = host.generate_calls
    assert call.force_tool is None and call.directive == ""
    assert call.request == {"model": "scripted-model", "messages": snapshot, "tools": tools}
    assert "tool_choice" not in call.request and "parallel_tool_calls" not in call.request
    assert call.messages == snapshot  # exactly the caller's messages, nothing added
    assert all(sent is mine for sent, mine in zip(call.messages, messages, strict=True))


# 4. say makes no network call.
@pytest.mark.parametrize(
    ("scores", "settings"),
    [
        (TIED, {}),
        (CONFIDENT, {"risk_rules": (lambda *_: "stopped",)}),
        (CONFIDENT, {"static_tools": {"read_file": {"path": "notes.txt"}}}),
    ],
    ids=["clarify", "risk_stop", "static_tool"],
)
def test_say_makes_no_provider_call_and_no_network_call(
    tools: list[dict[str, Any]],
    scores: dict[str, float],
    settings: dict[str, Any],
    no_network: NetworkGuard,
) -> None:
    host = ScriptedHost(tools, user_turn(), ScriptedModel([]))  # any provider call would fail
    gov = governor(scores, **settings)

    response = gov.step(host)

    assert host.provider_calls == 0 and host.generate_calls == []
    assert gov.last is not None and gov.last.provider_calls == 0
    assert response["model"] == LOCAL_MODEL_ID
    assert no_network.blocked == []
    assert no_network.installed
    with pytest.raises(NetworkAccessError):  # the guard is really on while these paths run
        socket.create_connection(("192.0.2.1", 443), timeout=1)
    no_network.take_blocked()


@pytest.mark.parametrize(
    ("scores", "settings"),
    [
        (CONFIDENT, {}),
        (LOW, {}),
        (MIDDLE, {}),
        (TIED, {}),
        (CONFIDENT, {"static_tools": {"read_file": {"path": "notes.txt"}}}),
        (CONFIDENT, {"risk_rules": (lambda *_: "no",)}),
    ],
    ids=["tool", "prose", "delegate", "clarify", "static_tool", "risk_stop"],
)
def test_the_callers_message_list_is_unchanged(
    tools: list[dict[str, Any]], scores: dict[str, float], settings: dict[str, Any]
) -> None:
    messages = user_turn()
    snapshot = copy.deepcopy(messages)
    tools_snapshot = copy.deepcopy(tools)
    replies = {
        "read_file": tool_call_response(("read_file", {"path": "a"})),
    }
    reply = replies["read_file"] if scores is CONFIDENT else text_response("ok")
    host = ScriptedHost(tools, messages, [reply])
    gov = governor(scores, **settings)

    gov.step(host)

    assert host.messages() is messages
    assert messages == snapshot
    assert len(messages) == 2
    assert tools == tools_snapshot
    for call in host.generate_calls:
        assert call.messages is not messages  # the directive went onto a copy


def test_each_turn_makes_exactly_one_effect(tools: list[dict[str, Any]]) -> None:
    host = ScriptedHost(tools, user_turn(), [tool_call_response("read_file")])
    governor(CONFIDENT).step(host)
    assert len(host.calls) == 1
