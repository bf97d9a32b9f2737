"""The OpenAI-compatible host under a real Governor: the four adapter tests every host
needs, over an in-process httpx transport, plus the async host under ``astep``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

httpx = pytest.importorskip(
    "httpx", reason='the openai plugin needs pip install "jevqueue[openai]"'
)

from jevqueue import Governor, Path, Thresholds  # noqa: E402
from jevqueue.errors import ProviderDisobeyedError  # noqa: E402
from jevqueue.host import LOCAL_MODEL_ID  # noqa: E402
from jevqueue.plugins.openai import (  # noqa: E402
    AsyncOpenAIChatHost,
    OpenAIChatHost,
    ScriptedChatTransport,
    text_completion,
    tool_call_completion,
)

BASE_URL = "http://provider.test/v1"
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {
        "name": "book_flight",
        "description": "Book a flight between two cities.",
        "parameters": {"type": "object", "properties": {"to": {"type": "string"}}},
    },
]


class FixedBallot:
    """Scores every turn the same, so the path under test is known whatever the defaults."""

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


CONFIDENT = FixedBallot({"get_weather": 0.95, "book_flight": 0.05})
IN_BETWEEN = FixedBallot({"get_weather": 0.45, "book_flight": 0.40})
NONE_FITS = FixedBallot({"get_weather": 0.0, "book_flight": 0.0})
TIED = FixedBallot({"get_weather": 0.9, "book_flight": 0.88})


def _conversation() -> list[dict[str, Any]]:
    return [{"role": "user", "content": "What's the weather in Lisbon?"}]


def _host(transport: httpx.BaseTransport, messages: list[dict[str, Any]] | None = None) -> Any:
    return OpenAIChatHost(
        model="gpt-test",
        messages=messages if messages is not None else _conversation(),
        tools=TOOLS,
        base_url=BASE_URL,
        request_fields={"temperature": 0},
        transport=transport,
    )


def _calls(name: str, **arguments: Any) -> Any:
    return lambda body: tool_call_completion(name, arguments, model=body["model"])


def _refuse(request: httpx.Request) -> httpx.Response:
    raise AssertionError(f"a local reply sent a request to {request.url}")


# 1. A confident tool route reaches the provider with the constraint set.
def test_confident_route_reaches_the_provider_with_the_constraint() -> None:
    transport = ScriptedChatTransport(_calls("get_weather", city="Lisbon"))
    messages = _conversation()
    snapshot = json.loads(json.dumps(messages))
    governor = governed(CONFIDENT)

    response = governor.step(_host(transport, messages))

    assert governor.last is not None and governor.last.path is Path.TOOL
    (sent,) = transport.requests
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert sent["parallel_tool_calls"] is False
    assert sent["messages"][-1] == {"role": "system", "content": governor.last.directive}
    assert messages == snapshot  # the directive went onto a copy
    assert response["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"


# 2. A provider that ignores the constraint raises; nothing executes.
@pytest.mark.parametrize(
    "disobedient",
    [
        _calls("book_flight", to="Lisbon"),
        lambda body: text_completion("It is sunny.", model="gpt-test"),
        lambda body: {
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "tool_calls": [
                            {"type": "function", "function": {"name": "get_weather"}},
                            {"type": "function", "function": {"name": "get_weather"}},
                        ],
                    },
                }
            ]
        },
    ],
    ids=["another-tool", "prose", "two-calls"],
)
def test_a_provider_that_ignores_the_constraint_raises(disobedient: Any) -> None:
    executed: list[Any] = []
    governor = governed(CONFIDENT)

    with pytest.raises(ProviderDisobeyedError) as caught:
        executed.append(governor.step(_host(ScriptedChatTransport(disobedient))))

    assert executed == []
    assert caught.value.expected == ["get_weather"]
    assert governor.last is not None and governor.last.error is not None


def test_a_tool_call_on_a_prose_turn_is_blocked() -> None:
    transport = ScriptedChatTransport(_calls("get_weather", city="Lisbon"))
    governor = governed(NONE_FITS)

    with pytest.raises(ProviderDisobeyedError):
        governor.step(_host(transport))

    assert governor.last is not None and governor.last.path is Path.PROSE
    assert transport.requests[0]["tool_choice"] == "none"


# 3. Delegation is a true passthrough: no directive, no tool_choice, the same bytes.
def test_delegation_is_a_true_passthrough() -> None:
    bodies: list[bytes] = []

    def record(request: httpx.Request) -> httpx.Response:
        bodies.append(request.content)
        return httpx.Response(200, json=text_completion("Let me check.", model="gpt-test"))

    messages = _conversation()
    ungoverned = _host(httpx.MockTransport(record), messages)
    ungoverned.send(ungoverned.request_body(force_tool=None, directive=""))
    governor = governed(IN_BETWEEN)

    governor.step(_host(httpx.MockTransport(record), messages))

    assert governor.last is not None and governor.last.path is Path.DELEGATE
    assert governor.last.directive == ""
    assert bodies[1] == bodies[0]
    sent = json.loads(bodies[1])
    assert "tool_choice" not in sent and "parallel_tool_calls" not in sent
    assert sent["messages"] == messages


def test_the_step_after_a_tool_result_is_not_forced_again() -> None:
    transport = ScriptedChatTransport(lambda body: text_completion("Sunny, 24 C."))
    messages = [
        *_conversation(),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Lisbon"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24 C"},
    ]
    governor = governed(CONFIDENT)

    governor.step(_host(transport, messages))

    assert governor.last is not None and governor.last.path is Path.DELEGATE
    assert "tool_choice" not in transport.requests[0]


# 4. say makes no network call.
@pytest.mark.parametrize(
    ("governor", "path"),
    [
        (governed(TIED), Path.CLARIFY),
        (governed(CONFIDENT, risk_rules=(lambda m, t, s: "Not today.",)), Path.RISK_STOP),
        (governed(CONFIDENT, static_tools={"get_weather": {"city": "Lisbon"}}), Path.STATIC_TOOL),
    ],
    ids=["clarify", "risk_stop", "static_tool"],
)
def test_local_replies_make_no_network_call(governor: Governor, path: Path) -> None:
    host = _host(httpx.MockTransport(_refuse))

    response = governor.step(host)

    assert governor.last is not None and governor.last.path is path
    assert host.request_count == 0
    assert response["model"] == LOCAL_MODEL_ID


def test_async_host_under_astep_forces_and_checks() -> None:
    transport = ScriptedChatTransport(_calls("get_weather", city="Lisbon"))
    disobedient = ScriptedChatTransport(_calls("book_flight", to="Lisbon"))

    def host(t: ScriptedChatTransport) -> AsyncOpenAIChatHost:
        return AsyncOpenAIChatHost(
            model="gpt-test", messages=_conversation(), tools=TOOLS, base_url=BASE_URL, transport=t
        )

    async def run() -> None:
        governor = governed(CONFIDENT)
        response = await governor.astep(host(transport))
        assert governor.last is not None and governor.last.path is Path.TOOL
        assert host(transport).called_tools(response) == ["get_weather"]
        with pytest.raises(ProviderDisobeyedError):
            await governor.astep(host(disobedient))

    asyncio.run(run())
    assert transport.requests[0]["parallel_tool_calls"] is False
    assert disobedient.requests[0]["tool_choice"]["function"]["name"] == "get_weather"
