"""OpenAIChatHost on its own: the request bodies of the three modes, the read-back, local
replies, errors. Every request goes to an in-process httpx transport."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Any

import pytest

httpx = pytest.importorskip(
    "httpx", reason='the openai plugin needs pip install "jevqueue[openai]"'
)

from jevqueue.errors import (  # noqa: E402
    ConfigurationError,
    InvalidToolSchemaError,
    ProviderHTTPError,
    UsageError,
)
from jevqueue.host import LOCAL_MODEL_ID, Host  # noqa: E402
from jevqueue.plugins.openai import (  # noqa: E402
    UNNAMED_CALL,
    AsyncOpenAIChatHost,
    OpenAIChatHost,
    ScriptedChatTransport,
    text_completion,
    tool_call_completion,
)

BASE_URL = "http://provider.test/v1"
SECRET = "sk-test-do-not-leak-0123456789"

READ_FILE = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a text file from the repository and return its contents.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "Repository path."}},
            "required": ["path"],
        },
        "strict": True,
    },
}
SEARCH_FLAT = {
    "name": "search_issues",
    "description": "Search the issue tracker by keywords.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
}


def _conversation() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a repository assistant."},
        {"role": "user", "content": "Show me README.md"},
    ]


def _host(transport: httpx.BaseTransport, **overrides: Any) -> OpenAIChatHost:
    arguments: dict[str, Any] = {
        "model": "gpt-test",
        "messages": _conversation(),
        "tools": [READ_FILE, SEARCH_FLAT],
        "base_url": BASE_URL,
        "transport": transport,
    }
    arguments.update(overrides)
    return OpenAIChatHost(**arguments)


def _prose_model(body: dict[str, Any]) -> dict[str, Any]:
    return text_completion("Here you are.", model=body["model"])


def test_is_a_host() -> None:
    assert isinstance(_host(ScriptedChatTransport(_prose_model)), Host)


def test_forced_route_sends_tool_choice_and_no_parallel_calls_on_a_copy() -> None:
    transport = ScriptedChatTransport(
        lambda body: tool_call_completion("read_file", {"path": "README.md"}, model="gpt-test")
    )
    messages = _conversation()
    snapshot = json.loads(json.dumps(messages))
    host = _host(transport, messages=messages, request_fields={"temperature": 0.2})

    response = host.generate(force_tool="read_file", directive="Call read_file now.")

    (sent,) = transport.requests
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "read_file"}}
    assert sent["parallel_tool_calls"] is False
    assert sent["temperature"] == 0.2
    assert sent["messages"] == [*snapshot, {"role": "system", "content": "Call read_file now."}]
    assert host.messages() is messages
    assert messages == snapshot
    assert host.called_tools(response) == ["read_file"]
    assert host.request_count == 1


def test_prose_sends_tool_choice_none_and_keeps_the_tools() -> None:
    transport = ScriptedChatTransport(_prose_model)
    host = _host(transport, request_fields={"parallel_tool_calls": True})

    host.generate(force_tool=None, directive="Answer in prose.")

    (sent,) = transport.requests
    assert sent["tool_choice"] == "none"
    assert [tool["function"]["name"] for tool in sent["tools"]] == ["read_file", "search_issues"]
    assert "parallel_tool_calls" not in sent
    assert sent["messages"][-1] == {"role": "system", "content": "Answer in prose."}


def test_passthrough_is_byte_for_byte_the_ungoverned_request() -> None:
    bodies: list[bytes] = []

    def record(request: httpx.Request) -> httpx.Response:
        bodies.append(request.content)
        return httpx.Response(200, json=_prose_model(json.loads(request.content)))

    fields = {"temperature": 0.7, "max_tokens": 256, "tool_choice": "auto", "user": "ünïcode"}
    messages = _conversation()
    tools = [READ_FILE, {"type": "function", "function": SEARCH_FLAT}]
    # The request a caller sends without jevqueue, with a plain httpx client.
    ungoverned = {"model": "gpt-test", "messages": messages, "tools": tools, **fields}
    with httpx.Client(transport=httpx.MockTransport(record)) as client:
        client.post(f"{BASE_URL}/chat/completions", json=ungoverned)

    host = _host(httpx.MockTransport(record), messages=messages, tools=tools, request_fields=fields)
    host.generate(force_tool=None, directive="")

    assert bodies[1] == bodies[0]
    assert b"jevqueue" not in bodies[1]


def test_flat_tools_go_out_in_the_nested_shape_with_their_fields() -> None:
    transport = ScriptedChatTransport(_prose_model)
    flat_strict = {**SEARCH_FLAT, "strict": True}
    host = _host(transport, tools=[READ_FILE, flat_strict])

    host.generate(force_tool=None, directive="")

    wire = transport.requests[0]["tools"]
    assert wire[0] == READ_FILE
    assert wire[1] == {"type": "function", "function": flat_strict}


def test_say_and_say_tool_call_never_touch_the_network() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"say made a request to {request.url}")

    host = _host(httpx.MockTransport(refuse))

    text = host.say("Which file do you mean?")
    call = host.say_tool_call("read_file", {"path": "README.md"})

    assert host.request_count == 0
    assert text["model"] == call["model"] == LOCAL_MODEL_ID
    assert text["choices"][0]["message"]["content"] == "Which file do you mean?"
    assert host.called_tools(text) == []
    assert host.called_tools(call) == ["read_file"]
    function = call["choices"][0]["message"]["tool_calls"][0]["function"]
    assert json.loads(function["arguments"]) == {"path": "README.md"}


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"role": "assistant", "content": "prose"}, []),
        ({"role": "assistant", "content": None, "tool_calls": []}, []),
        (
            {
                "role": "assistant",
                "tool_calls": [
                    {"type": "function", "function": {"name": "a", "arguments": "{}"}},
                    {"type": "function", "function": {"name": "b", "arguments": "{}"}},
                ],
            },
            ["a", "b"],
        ),
        ({"role": "assistant", "function_call": {"name": "a", "arguments": "{}"}}, ["a"]),
        ({"role": "assistant", "tool_calls": [{"type": "function"}]}, [UNNAMED_CALL]),
        (
            {"role": "assistant", "tool_calls": [{"type": "custom", "custom": {"name": "c"}}]},
            [UNNAMED_CALL],
        ),
        ({"role": "assistant", "tool_calls": "garbage"}, [UNNAMED_CALL]),
    ],
)
def test_called_tools_reads_tool_calls_and_legacy_function_call(
    message: dict[str, Any], expected: list[str]
) -> None:
    host = _host(ScriptedChatTransport(_prose_model))
    assert host.called_tools({"choices": [{"index": 0, "message": message}]}) == expected


def test_bearer_token_is_sent_only_when_given() -> None:
    seen: list[str | None] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return httpx.Response(200, json=_prose_model({"model": "m"}))

    _host(httpx.MockTransport(record), api_key=SECRET).generate(force_tool=None, directive="")
    _host(httpx.MockTransport(record)).generate(force_tool=None, directive="")

    assert seen == [f"Bearer {SECRET}", None]


def test_http_error_is_typed_and_never_shows_the_key() -> None:
    def reject(request: httpx.Request) -> httpx.Response:
        echoed = request.headers["authorization"]
        return httpx.Response(401, json={"error": {"message": f"bad key {echoed}"}})

    host = _host(httpx.MockTransport(reject), api_key=SECRET)

    with pytest.raises(ProviderHTTPError) as caught:
        host.generate(force_tool="read_file", directive="Call read_file.")

    error = caught.value
    assert error.status == 401
    assert "bad key" in error.body_excerpt
    assert "check the API key" in str(error)
    for text in (str(error), repr(error), error.body_excerpt, repr(host)):
        assert SECRET not in text


def test_refused_connection_is_typed_with_no_status() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(ProviderHTTPError, match="failed before any response") as caught:
        _host(httpx.MockTransport(refuse)).generate(force_tool=None, directive="")
    assert caught.value.status is None


def test_a_reply_that_is_not_a_chat_completion_is_an_error() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, text="<html>proxy</html>"))
    with pytest.raises(ProviderHTTPError, match="no chat completion"):
        _host(transport).generate(force_tool=None, directive="")


def test_misuse_fails_at_the_edge() -> None:
    transport = ScriptedChatTransport(_prose_model)
    with pytest.raises(ConfigurationError, match="request_fields"):
        _host(transport, request_fields={"model": "other"})
    with pytest.raises(InvalidToolSchemaError):
        _host(transport, tools=[{"description": "no name"}])
    with pytest.raises(ConfigurationError, match="either client or transport"):
        _host(transport, client=httpx.Client())
    with pytest.raises(UsageError, match="cannot force 'delete_everything'"):
        _host(transport).generate(force_tool="delete_everything", directive="Do it.")
    assert transport.requests == []


def test_interrupted_reads_the_flag() -> None:
    flag = threading.Event()
    host = _host(ScriptedChatTransport(_prose_model), interrupt=flag)
    assert host.interrupted() is False
    flag.set()
    assert host.interrupted() is True


def test_async_host_sends_the_same_forced_request() -> None:
    import asyncio

    transport = ScriptedChatTransport(
        lambda body: tool_call_completion("read_file", {"path": "README.md"})
    )

    async def run() -> dict[str, Any]:
        async with AsyncOpenAIChatHost(
            model="gpt-test",
            messages=_conversation(),
            tools=[READ_FILE, SEARCH_FLAT],
            base_url=BASE_URL,
            transport=transport,
        ) as host:
            response = await host.generate(force_tool="read_file", directive="Call it.")
            assert host.called_tools(response) == ["read_file"]
            return response

    asyncio.run(run())
    (sent,) = transport.requests
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "read_file"}}
    assert sent["parallel_tool_calls"] is False


def test_missing_httpx_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['httpx'] = None\n"
        "try:\n    import jevqueue.plugins.openai\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 'pip install "jevqueue[openai]"' in out.stdout


def test_public_surface_is_pinned() -> None:
    import jevqueue.plugins.openai as plugin

    assert set(plugin.__all__) == {
        "DEFAULT_BASE_URL",
        "UNNAMED_CALL",
        "AsyncOpenAIChatHost",
        "InterruptFlag",
        "OpenAIChatHost",
        "PolicyToolRunner",
        "ScriptedChatServer",
        "ScriptedChatTransport",
        "called_tool_names",
        "ToolCallResult",
        "text_completion",
        "tool_call_completion",
        "tool_calls_completion",
        "tool_spec",
    }
    for name in plugin.__all__:
        assert getattr(plugin, name) is not None
