"""``governed_tool`` for executors other code builds: ``run()``'s own, and async tools."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "autogen", reason='classic AutoGen is not installed: pip install "jevqueue[ag2]"'
)

from autogen import ConversableAgent
from autogen.tools import Tool
from autogen_kit import build_policy
from jevqueue.plugins.autogen import governed_tool, tool_spec
from jevqueue.plugins.autogen.testing import ScriptedModel, classic_tool_call

openai_plugin = pytest.importorskip("jevqueue.plugins.openai")


@pytest.mark.network_allowed
def test_run_builds_its_own_executor_and_the_governed_tool_still_judges(workspace: Path) -> None:
    ran: list[str] = []

    def write_note(path: str, text: str) -> str:
        """Write a text note to a file in the workspace."""
        ran.append(path)
        return "written"

    specs = [tool_spec(write_note, side_effects={"file_write"}, path_fields=["path"])]
    policy = build_policy(workspace, specs)
    governed = governed_tool(write_note, pep=policy.pep, specs=specs, context=policy.context)
    replies = [
        openai_plugin.tool_calls_completion(
            [
                ("write_note", {"path": "a.txt", "text": "x"}),
                ("write_note", {"path": "../b.txt", "text": "y"}),
            ],
            model="gpt-4o-mini",
        ),
        openai_plugin.text_completion(
            "Wrote a.txt; b.txt is outside the workspace.", model="gpt-4o-mini"
        ),
    ]
    with openai_plugin.ScriptedChatServer(lambda body: replies.pop(0)) as server:
        llm_config = {
            "config_list": [
                {"model": "gpt-4o-mini", "api_key": "sk-test-not-real", "base_url": server.base_url}
            ],
            "cache_seed": None,
        }
        assistant = ConversableAgent("assistant", llm_config=llm_config, human_input_mode="NEVER")
        response = assistant.run(
            message="Write a.txt and ../b.txt", tools=[governed], max_turns=2, user_input=False
        )
        response.process()
    assert ran == [str(workspace / "a.txt")]
    second = server.requests[1]["messages"]
    contents = [m["content"] for m in second if m["role"] == "tool"]
    assert contents[0] == "written" and "denied" in contents[1]


def test_an_async_governed_tool_in_an_async_chat(workspace: Path) -> None:
    ran: list[str] = []

    async def fetch_page(url: str) -> str:
        """Fetch a web page and return its text."""
        ran.append(url)
        return "<html>ok</html>"

    specs = [tool_spec(Tool(func_or_tool=fetch_page), side_effects={"network"})]
    policy = build_policy(workspace, specs)
    tool = governed_tool(fetch_page, pep=policy.pep, specs=specs, context=policy.context)
    model = ScriptedModel(
        [classic_tool_call("fetch_page", {"url": "https://example.org"}), "Fetched."]
    )
    assistant = ConversableAgent(
        "assistant", llm_config=model.llm_config(), human_input_mode="NEVER"
    )
    executor = ConversableAgent("executor", llm_config=False, human_input_mode="NEVER")
    tool.register_for_llm(assistant)
    tool.register_for_execution(executor)
    model.install(assistant)

    async def talk() -> Any:
        return await executor.a_initiate_chat(
            assistant, message="Fetch it", max_turns=2, silent=True
        )

    asyncio.run(talk())
    assert ran == ["https://example.org"]
    assert tool.guard.last is not None and tool.guard.last.allowed
    assert ("fetch_page", "ALLOW") in policy.results()


def test_a_governed_tool_refuses_an_executor_that_runs_code_blocks(workspace: Path) -> None:
    from autogen import UserProxyAgent
    from jevqueue.errors import ConfigurationError

    def write_note(path: str, text: str) -> str:
        """Write a text note to a file in the workspace."""
        return "written"

    specs = [tool_spec(write_note, side_effects={"file_write"}, path_fields=["path"])]
    policy = build_policy(workspace, specs)
    tool = governed_tool(write_note, pep=policy.pep, specs=specs, context=policy.context)
    executor = UserProxyAgent("executor", human_input_mode="NEVER")  # code execution: {}
    with pytest.raises(ConfigurationError, match="code_execution_config=False"):
        tool.register_for_execution(executor)
    assert "write_note" not in executor.function_map
    plain = ConversableAgent("executor", llm_config=False, human_input_mode="NEVER")
    tool.register_for_execution(plain)
    assert "write_note" in plain.function_map
