"""A provider that does not make exactly the constrained call: blocked, nothing executes."""

from __future__ import annotations

from typing import Any

import pytest
from jevqueue import Governor, Path
from jevqueue.errors import JevError, JevRuntimeError, ProviderDisobeyedError
from jevqueue.testing import ScriptedHost, text_response, tool_call_response

from .conftest import CONFIDENT, LOW, THRESHOLDS, FixedBallot, user_turn


@pytest.mark.parametrize(
    ("reply", "called"),
    [
        (tool_call_response(("search_files", {"query": "x"})), ["search_files"]),
        (text_response("I'd rather not call a tool."), []),
        (tool_call_response(), []),
        (tool_call_response("read_file", "read_file"), ["read_file", "read_file"]),
        (tool_call_response("read_file", "search_files"), ["read_file", "search_files"]),
        (tool_call_response("search_files", "read_file"), ["search_files", "read_file"]),
    ],
    ids=["other-tool", "no-tool", "empty-tool-calls", "two-calls", "extra-call", "extra-first"],
)
def test_a_forced_turn_that_is_not_exactly_the_forced_call_raises(
    tools: list[dict[str, Any]], reply: dict[str, Any], called: list[str]
) -> None:
    host = ScriptedHost(tools, user_turn(), [reply])
    gov = Governor(FixedBallot(CONFIDENT), thresholds=THRESHOLDS)

    with pytest.raises(ProviderDisobeyedError) as caught:
        gov.step(host)

    error = caught.value
    assert str(error).startswith("The provider ignored the selected tool; execution blocked")
    assert isinstance(error, JevRuntimeError) and isinstance(error, JevError)
    assert error.expected == ["read_file"]
    assert error.called == called
    assert [c.kind for c in host.calls] == ["generate"]
    assert gov.last is not None and gov.last.path is Path.TOOL
    assert gov.last.error is not None and "ProviderDisobeyedError" in gov.last.error
    assert gov.last.provider_calls == 1
    assert "effect" in gov.last.timings


@pytest.mark.parametrize(
    "reply",
    [
        tool_call_response(("read_file", {"path": "x"})),
        tool_call_response("read_file", "search_files"),
    ],
    ids=["one-call", "two-calls"],
)
def test_a_tool_call_on_the_prose_path_raises(
    tools: list[dict[str, Any]], reply: dict[str, Any]
) -> None:
    host = ScriptedHost(tools, user_turn("what is 2 + 2"), [reply])
    gov = Governor(FixedBallot(LOW), thresholds=THRESHOLDS)

    with pytest.raises(ProviderDisobeyedError, match="prose") as caught:
        gov.step(host)

    assert caught.value.expected == []
    assert caught.value.called == host.called_tools(reply)
    assert gov.last is not None and gov.last.path is Path.PROSE
    assert gov.last.error is not None


def test_the_obedient_provider_passes(tools: list[dict[str, Any]]) -> None:
    reply = tool_call_response(("read_file", {"path": "x"}))
    host = ScriptedHost(tools, user_turn(), [reply])
    gov = Governor(FixedBallot(CONFIDENT), thresholds=THRESHOLDS)
    assert gov.step(host) is reply
    assert gov.last is not None and gov.last.error is None


def test_a_host_whose_read_back_fails_withholds_the_response(
    tools: list[dict[str, Any]],
) -> None:
    class BlindHost(ScriptedHost):
        def called_tools(self, response: Any) -> list[str]:
            raise RuntimeError("cannot parse the response")

    host = BlindHost(tools, user_turn(), [tool_call_response("read_file")])
    gov = Governor(FixedBallot(CONFIDENT), thresholds=THRESHOLDS)
    with pytest.raises(RuntimeError, match="cannot parse"):
        gov.step(host)
    assert gov.last is not None and gov.last.error is not None


def test_delegate_does_not_check_what_the_provider_called(tools: list[dict[str, Any]]) -> None:
    # The passthrough is the un-governed agent: any tool call is its own business.
    reply = tool_call_response("read_file", "search_files")
    host = ScriptedHost(tools, user_turn(), [reply])
    gov = Governor(FixedBallot({"read_file": 0.4}), thresholds=THRESHOLDS)
    assert gov.step(host) is reply
    assert gov.last is not None and gov.last.path is Path.DELEGATE
