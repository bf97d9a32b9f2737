"""Proof on the wire: ChatOpenAI against a fake OpenAI-compatible server on 127.0.0.1.

The server records every request body, so the tests read what LangChain actually sent:
the forced turn carries the named ``tool_choice`` and ``parallel_tool_calls: false``, the
prose turn ``tool_choice: "none"``, the delegated turn neither.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytest.importorskip(
    "langgraph", reason='the LangGraph extra is not installed: pip install "jevqueue[langgraph]"'
)
from langgraph_support import Toolbox, fixed_governor

langchain_openai = pytest.importorskip(
    "langchain_openai", reason="langchain-openai is not installed"
)

from jevqueue.errors import ProviderDisobeyedError  # noqa: E402
from jevqueue.plugins.langgraph import governed_model_node  # noqa: E402
from langchain_core.messages import HumanMessage  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402

pytestmark = pytest.mark.network_allowed


class FakeOpenAI:
    """A chat-completions endpoint that answers from a script and keeps every body."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.replies: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                owner.bodies.append(json.loads(self.rfile.read(length)))
                message = owner.replies.pop(0) if owner.replies else {"content": "(unscripted)"}
                payload = json.dumps(
                    {
                        "id": f"chatcmpl-{len(owner.bodies)}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "gpt-fake",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": None, **message},
                                "finish_reason": "tool_calls"
                                if "tool_calls" in message
                                else "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"


def tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "tool_calls": [
            {
                "id": "call_wire_1",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ]
    }


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    fake.thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()


def turn(server: FakeOpenAI, toolbox: Toolbox, scores: dict[str, float]) -> dict[str, Any]:
    model = langchain_openai.ChatOpenAI(
        model="gpt-fake", base_url=server.base_url, api_key="test", max_retries=0
    )
    graph = StateGraph(MessagesState)
    graph.add_node(
        "agent", governed_model_node(model, toolbox.tools, governor=fixed_governor(**scores))
    )
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile().invoke({"messages": [HumanMessage("Show me notes.txt")]})  # type: ignore[no-any-return]


def test_the_forced_turn_carries_the_named_tool_choice(
    server: FakeOpenAI, toolbox: Toolbox
) -> None:
    server.replies.append(tool_call("read_file", {"path": "notes.txt"}))
    result = turn(server, toolbox, {"read_file": 0.95, "write_file": 0.1, "run_command": 0.1})
    (body,) = server.bodies
    assert body["tool_choice"] == {"type": "function", "function": {"name": "read_file"}}
    assert body["parallel_tool_calls"] is False
    assert body["messages"][-1]["role"] == "system"  # the directive, on a copy
    assert result["messages"][-1].tool_calls[0]["args"] == {"path": "notes.txt"}


def test_the_prose_turn_forbids_tools(server: FakeOpenAI, toolbox: Toolbox) -> None:
    server.replies.append({"content": "Hello!"})
    turn(server, toolbox, {"read_file": 0.05, "write_file": 0.05, "run_command": 0.05})
    (body,) = server.bodies
    assert body["tool_choice"] == "none"
    assert "parallel_tool_calls" not in body


def test_the_delegated_turn_carries_neither(server: FakeOpenAI, toolbox: Toolbox) -> None:
    server.replies.append({"content": "Sure."})
    turn(server, toolbox, {"read_file": 0.4, "write_file": 0.1, "run_command": 0.1})
    (body,) = server.bodies
    assert "tool_choice" not in body and "parallel_tool_calls" not in body
    assert [m["role"] for m in body["messages"]] == ["user"], "no directive on a passthrough"
    assert [t["function"]["name"] for t in body["tools"]] == [
        "read_file",
        "write_file",
        "run_command",
    ]


def test_a_server_that_ignores_tool_choice_is_caught(server: FakeOpenAI, toolbox: Toolbox) -> None:
    server.replies.append(tool_call("run_command", {"command": "rm -rf .", "cwd": "."}))
    with pytest.raises(ProviderDisobeyedError):
        turn(server, toolbox, {"read_file": 0.95, "write_file": 0.1, "run_command": 0.1})
    assert server.bodies[0]["tool_choice"]["function"]["name"] == "read_file"
    assert toolbox.runs == []
