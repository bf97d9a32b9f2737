"""astep: the same turn, for hosts whose methods are coroutines."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from jevqueue import LOCAL_MODEL_ID, Governor, Path
from jevqueue.errors import ProviderDisobeyedError, TurnInterruptedError
from jevqueue.testing import (
    AsyncScriptedHost,
    ScriptedHost,
    ScriptedModel,
    Step,
    text_response,
    tool_call_response,
)

from .conftest import CONFIDENT, MIDDLE, THRESHOLDS, TIED, FixedBallot, user_turn


def governor(scores: dict[str, float], **settings: Any) -> Governor:
    return Governor(FixedBallot(scores), thresholds=THRESHOLDS, **settings)


def test_astep_forces_and_checks_like_step(tools: list[dict[str, Any]]) -> None:
    reply = tool_call_response(("read_file", {"path": "a"}))
    messages = user_turn()
    snapshot = copy.deepcopy(messages)
    host = AsyncScriptedHost(tools, messages, ScriptedModel([Step(reply, force_tool="read_file")]))
    gov = governor(CONFIDENT)

    assert asyncio.run(gov.astep(host)) is reply
    assert gov.last is not None and gov.last.path is Path.TOOL
    assert messages == snapshot
    host.model.assert_complete()


def test_astep_raises_on_disobedience(tools: list[dict[str, Any]]) -> None:
    host = AsyncScriptedHost(tools, user_turn(), [tool_call_response("search_files")])
    gov = governor(CONFIDENT)
    with pytest.raises(ProviderDisobeyedError):
        asyncio.run(gov.astep(host))
    assert gov.last is not None and gov.last.error is not None


def test_astep_says_locally(tools: list[dict[str, Any]]) -> None:
    host = AsyncScriptedHost(tools, user_turn(), ScriptedModel([]))
    response = asyncio.run(governor(TIED).astep(host))
    assert response["model"] == LOCAL_MODEL_ID
    assert host.provider_calls == 0


def test_astep_honours_an_interruption(tools: list[dict[str, Any]]) -> None:
    host = AsyncScriptedHost(tools, user_turn(), ScriptedModel([]), interrupted=True)
    gov = governor(CONFIDENT)
    with pytest.raises(TurnInterruptedError):
        asyncio.run(gov.astep(host))
    assert gov.last is not None and gov.last.path is Path.INTERRUPTED
    assert host.calls == []


def test_astep_accepts_a_plain_sync_host(tools: list[dict[str, Any]]) -> None:
    host = ScriptedHost(tools, user_turn(), [text_response("ok")])
    gov = governor(MIDDLE)
    asyncio.run(gov.astep(host))
    assert gov.last is not None and gov.last.path is Path.DELEGATE


def test_astep_with_a_mixed_host_and_a_failing_await(tools: list[dict[str, Any]]) -> None:
    class FlakyHost(ScriptedHost):
        async def generate(self, *, force_tool: str | None, directive: str) -> Any:  # type: ignore[override]
            await asyncio.sleep(0)
            raise TimeoutError("provider timed out")

    gov = governor(CONFIDENT)
    with pytest.raises(TimeoutError):
        asyncio.run(gov.astep(FlakyHost(tools, user_turn())))
    assert gov.last is not None and "provider timed out" in (gov.last.error or "")
    assert gov.last.path is Path.TOOL


def test_astep_turns_can_run_concurrently_with_a_governor_each(
    tools: list[dict[str, Any]],
) -> None:
    async def both() -> list[Any]:
        first = AsyncScriptedHost(tools, user_turn(), [tool_call_response("read_file")])
        second = AsyncScriptedHost(tools, user_turn(), ScriptedModel([]))
        return await asyncio.gather(governor(CONFIDENT).astep(first), governor(TIED).astep(second))

    forced, asked = asyncio.run(both())
    assert forced["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "read_file"
    assert asked["model"] == LOCAL_MODEL_ID
