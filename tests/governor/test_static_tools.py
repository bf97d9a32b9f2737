"""Static payloads are validated against the tool's schema; an invalid one never goes out."""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

import pytest
from jevqueue import Governor, Path
from jevqueue.errors import ConfigurationError
from jevqueue.testing import ScriptedHost, ScriptedModel, Step, tool_call_response

from .conftest import THRESHOLDS, FixedBallot, user_turn

TASKS = {"list_tasks": 0.95, "read_file": 0.1, "search_files": 0.0}


def run(tools: list[dict[str, Any]], payload: Any) -> tuple[Governor, ScriptedHost]:
    reply = tool_call_response(("list_tasks", {"status": "open"}))
    model = ScriptedModel([Step(reply, force_tool="list_tasks")])
    host = ScriptedHost(tools, user_turn("list my open tasks"), model)
    gov = Governor(FixedBallot(TASKS), thresholds=THRESHOLDS, static_tools={"list_tasks": payload})
    gov.step(host)
    return gov, host


@pytest.mark.parametrize(
    "payload",
    [
        {"status": "archived"},  # not in the enum
        {"limit": 3},  # required field missing
        {"status": "open", "extra": True},  # additionalProperties: false
        {"status": "open", "limit": 0},  # below the minimum
        {"status": "open", "limit": "3"},  # wrong type
        {"status": ("open",)},  # a tuple is not a JSON string
        {"status": "open", 3: "x"},  # a key that is not a string
        lambda messages: ["status", "open"],  # not a mapping
    ],
)
def test_an_invalid_payload_is_never_sent_and_the_tool_is_forced(
    tools: list[dict[str, Any]], payload: Any
) -> None:
    gov, host = run(tools, payload)

    assert [c.kind for c in host.calls] == ["generate"]  # no say_tool_call at all
    assert host.calls[0].force_tool == "list_tasks"
    assert gov.last is not None and gov.last.path is Path.TOOL
    assert gov.last.arguments is None
    assert (
        gov.last.reason is not None
        and "static payload for list_tasks was not sent" in gov.last.reason
    )
    host.model.assert_complete()


def test_a_valid_payload_is_sent_as_a_copy(tools: list[dict[str, Any]]) -> None:
    payload = {"status": "open", "limit": 2}
    host = ScriptedHost(tools, user_turn(), ScriptedModel([]))
    gov = Governor(FixedBallot(TASKS), thresholds=THRESHOLDS, static_tools={"list_tasks": payload})

    gov.step(host)

    (call,) = host.calls
    assert call.kind == "say_tool_call" and call.arguments == payload
    assert call.arguments is not payload  # the host cannot alter the setting
    assert isinstance(call.arguments, dict)
    assert gov.last is not None and isinstance(gov.last.arguments, MappingProxyType)


def test_a_callable_payload_reads_the_messages(tools: list[dict[str, Any]]) -> None:
    seen: list[Sequence[Any]] = []

    def payload(messages: Sequence[Any]) -> dict[str, Any]:
        seen.append(messages)
        return {"status": "done" if "done" in messages[-1]["content"] else "open"}

    host = ScriptedHost(tools, user_turn("show the done tasks"), ScriptedModel([]))
    gov = Governor(FixedBallot(TASKS), thresholds=THRESHOLDS, static_tools={"list_tasks": payload})
    gov.step(host)

    assert seen == [host.conversation]
    assert host.calls[0].arguments == {"status": "done"}
    assert gov.last is not None and gov.last.path is Path.STATIC_TOOL


def test_a_callable_payload_that_returns_garbage_is_not_sent(tools: list[dict[str, Any]]) -> None:
    gov, host = run(tools, lambda messages: None)
    assert [c.kind for c in host.calls] == ["generate"]
    assert gov.last is not None and gov.last.path is Path.TOOL


def test_a_callable_payload_that_raises_fails_the_decision(tools: list[dict[str, Any]]) -> None:
    def payload(messages: Any) -> Any:
        raise ValueError("no database")

    host = ScriptedHost(
        tools,
        user_turn(),
        ScriptedModel([Step(tool_call_response("x"), force_tool=None, directive="")]),
    )
    gov = Governor(FixedBallot(TASKS), thresholds=THRESHOLDS, static_tools={"list_tasks": payload})
    gov.step(host)
    assert gov.last is not None and gov.last.path is Path.ERROR_DELEGATE
    assert "no database" in (gov.last.error or "")


def test_a_broken_tool_schema_means_the_payload_is_not_sent() -> None:
    tools = [
        {"name": "list_tasks", "parameters": {"type": "object", "properties": {"a": {"type": 5}}}}
    ]
    reply = tool_call_response("list_tasks")
    host = ScriptedHost(tools, user_turn(), [reply])
    gov = Governor(
        FixedBallot({"list_tasks": 0.9}),
        thresholds=THRESHOLDS,
        static_tools={"list_tasks": {"a": 1}},
    )
    gov.step(host)
    assert gov.last is not None and gov.last.path is Path.TOOL
    assert "not a valid JSON Schema" in (gov.last.reason or "")


def test_a_tool_without_parameters_accepts_an_empty_payload() -> None:
    host = ScriptedHost([{"name": "ping", "description": "Ping."}], user_turn(), ScriptedModel([]))
    gov = Governor(FixedBallot({"ping": 0.9}), thresholds=THRESHOLDS, static_tools={"ping": {}})
    gov.step(host)
    assert gov.last is not None and gov.last.path is Path.STATIC_TOOL


def test_static_tools_apply_only_to_confident_routes(tools: list[dict[str, Any]]) -> None:
    host = ScriptedHost(tools, user_turn(), [tool_call_response("x")])
    gov = Governor(
        FixedBallot({"list_tasks": 0.4}),
        thresholds=THRESHOLDS,
        static_tools={"list_tasks": {"status": "open"}},
    )
    gov.step(host)
    assert gov.last is not None and gov.last.path is Path.DELEGATE


@pytest.mark.parametrize("setting", [["list_tasks"], {"": {}}, {"list_tasks": "open"}, {3: {}}])
def test_malformed_static_tools_are_a_configuration_error(setting: Any) -> None:
    with pytest.raises(ConfigurationError, match="static_tools"):
        Governor(FixedBallot({}), static_tools=setting)
