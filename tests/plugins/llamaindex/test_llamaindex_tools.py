"""Wrapped tools on real LlamaIndex agents: every call judged before the tool body runs."""

from __future__ import annotations

from typing import Any

import pytest
from jevqueue import ConfigurationError
from jevqueue.errors import InvalidContextError
from jevqueue.plugins.llamaindex import (
    GovernedFunctionAgent,
    GovernedFunctionTool,
    ToolCallRefusedError,
    governed_tools,
    tool_spec,
)
from jevqueue.plugins.llamaindex.testing import ScriptedFunctionCallingLLM, scripted_tool_calls
from llama_index.core import SummaryIndex
from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
from llama_index.core.objects import ObjectIndex
from llama_index.core.tools import FunctionTool
from llama_index.core.workflow import Context
from llamaindex_kit import DELEGATE, Kit, fixed_governor, run


def governed(kit: Kit) -> list[FunctionTool]:
    return governed_tools(kit.tools, pep=kit.pep, specs=kit.specs(), context=kit.context)


async def results_of(handler: Any) -> tuple[Any, list[ToolCallResult]]:
    results = [e async for e in handler.stream_events() if isinstance(e, ToolCallResult)]
    return await handler, results


def test_a_denied_call_reaches_the_model_as_a_tool_error_and_the_run_goes_on(kit: Kit) -> None:
    llm = ScriptedFunctionCallingLLM(
        steps=[scripted_tool_calls(("read_file", {"path": "/etc/passwd"})), "I cannot read it."]
    )
    agent = FunctionAgent(llm=llm, tools=governed(kit), streaming=False)
    result, results = run(lambda: results_of(agent.run(user_msg="Show me /etc/passwd")))
    assert str(result) == "I cannot read it."
    assert kit.runs == [], "a denied call executed"
    (outcome,) = results
    assert outcome.tool_output.is_error
    assert "jevqueue denied the call to 'read_file'" in outcome.tool_output.content
    assert isinstance(outcome.tool_output.exception, ToolCallRefusedError)
    assert outcome.tool_output.exception.action_digest is not None
    # The model's next request carries the denial as the tool's result.
    tool_message = llm.requests[1].messages[-1]
    assert (
        tool_message.role.value == "tool"
        and "jevqueue denied the call to 'read_file'" in tool_message.content
    )
    assert kit.results() == ["DENY"]


def test_an_allowed_call_runs_once_with_the_resolved_path(kit: Kit) -> None:
    (kit.workspace / "notes.txt").write_text("hello")
    llm = ScriptedFunctionCallingLLM(
        steps=[scripted_tool_calls(("read_file", {"path": "notes.txt"})), "It says hello."]
    )
    agent = FunctionAgent(llm=llm, tools=governed(kit), streaming=False)
    _, results = run(lambda: results_of(agent.run(user_msg="Read notes.txt")))
    assert kit.runs == [("read_file", {"path": str((kit.workspace / "notes.txt").resolve())})]
    assert results[0].tool_output.content == "hello"
    assert kit.results() == ["ALLOW"]


def test_bad_arguments_are_refused_before_evaluation_and_audited(kit: Kit) -> None:
    llm = ScriptedFunctionCallingLLM(
        steps=[scripted_tool_calls(("get_weather", {"city": 7})), "Sorry."]
    )
    agent = FunctionAgent(llm=llm, tools=governed(kit), streaming=False)
    _, results = run(lambda: results_of(agent.run(user_msg="weather?")))
    assert kit.runs == []
    assert "refused before evaluation" in results[0].tool_output.content
    assert kit.results() == ["DENY"]


def test_a_batch_runs_each_allowed_call_once_and_refuses_the_rest(kit: Kit) -> None:
    llm = ScriptedFunctionCallingLLM(
        steps=[
            scripted_tool_calls(
                ("get_weather", {"city": "Oslo"}),
                ("delete_file", {"path": "../outside.txt"}),
                ids=["call-weather", "call-delete"],
            ),
            "Done.",
        ]
    )
    agent = GovernedFunctionAgent(
        llm=llm,
        governor=fixed_governor(DELEGATE),
        tools=kit.tools,
        pep=kit.pep,
        specs=kit.specs(),
        context=kit.context,
        streaming=False,
    )
    _, results = run(lambda: results_of(agent.run(user_msg="weather, and tidy up")))
    assert kit.runs == [("get_weather", {"city": "Oslo"})]
    by_name = {r.tool_name: r.tool_output for r in results}
    assert not by_name["get_weather"].is_error
    assert by_name["delete_file"].is_error
    assert sorted(kit.results()) == ["ALLOW", "DENY"]
    # The agent's call_tool step hands the guard the model's call ids (a call runs at most
    # once per id, even when LlamaIndex runs its step again).
    assert agent.guard is not None
    assert sorted((j.call_id, j.kind.value) for j in agent.guard.judgements) == [
        ("call-delete", "refused"),
        ("call-weather", "allowed"),
    ]


def test_unregistered_tools_are_refused_when_wrapped(kit: Kit) -> None:
    weather = [s for s in kit.specs() if s.name == "get_weather"]
    with pytest.raises(ConfigurationError, match="tool_spec") as raised:
        governed_tools(kit.tools, pep=kit.pep, specs=weather, context=kit.context)
    assert "delete_file" in str(raised.value) and "run_command" in str(raised.value)
    assert kit.runs == []


def test_wrapping_is_checked(kit: Kit) -> None:
    tools = governed(kit)
    with pytest.raises(ConfigurationError, match="already governed"):
        governed_tools(tools, pep=kit.pep, specs=kit.specs(), context=kit.context)
    with pytest.raises(ConfigurationError, match="PolicyEnforcementPoint"):
        governed_tools(kit.tools, pep=object(), specs=kit.specs(), context=kit.context)
    with pytest.raises(InvalidContextError):
        governed_tools(
            kit.tools,
            pep=kit.pep,
            specs=kit.specs(),
            context={**kit.context.as_dict(), "git_sha": "HEAD"},
        )
    with pytest.raises(ConfigurationError, match="ToolSpec"):
        governed_tools(kit.tools, pep=kit.pep, specs=["get_weather"], context=kit.context)  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="not parameters"):
        tool_spec(kit.tools[0], side_effects={"network"}, path_fields=["town"])
    with pytest.raises(ConfigurationError, match="LlamaIndex tool"):
        tool_spec(42, side_effects={"network"})  # type: ignore[arg-type]


def test_the_wrapper_keeps_the_metadata_the_model_sees(kit: Kit) -> None:
    for original, wrapped in zip(kit.tools, governed(kit), strict=True):
        assert isinstance(wrapped, GovernedFunctionTool)
        assert wrapped.metadata is original.metadata
        assert wrapped.metadata.to_openai_tool() == original.metadata.to_openai_tool()


def test_plain_functions_are_wrapped_and_declared_alike(kit: Kit) -> None:
    calls: list[str] = []

    def lookup(term: str) -> str:
        """Look a term up in the glossary."""
        calls.append(term)
        return f"{term}: a word"

    (tool,) = governed_tools(
        [lookup],
        pep=kit.pep,
        specs=[tool_spec(lookup, side_effects={"network"})],
        context=kit.context,
    )
    assert tool.call(term="jev").content == "jev: a word"
    assert calls == ["jev"]


def test_synchronous_calls_are_judged_and_cannot_wait_for_an_approval(kit: Kit) -> None:
    by_name = {t.metadata.name: t for t in governed(kit)}
    assert by_name["get_weather"].call(city="Oslo").content == "Sunny in Oslo, 21 C"
    with pytest.raises(ToolCallRefusedError, match="approval"):
        by_name["run_command"].call(command="ls", cwd=".")
    with pytest.raises(
        ToolCallRefusedError, match=r"denied the call to 'read_file': path resolves outside"
    ):
        by_name["read_file"].call(path="/etc/passwd")
    with pytest.raises(ToolCallRefusedError, match="approval"):
        run(by_name["run_command"].acall(command="ls", cwd="."))
    assert kit.names_run() == ["get_weather"]


def test_a_tool_that_takes_the_context_still_receives_it(kit: Kit) -> None:
    seen: list[Any] = []

    async def remember(ctx: Context, fact: str) -> str:
        """Remember a fact in the workflow state."""
        seen.append(ctx)
        await ctx.store.set("fact", fact)
        return "remembered"

    # The module is compiled with `from __future__ import annotations`: the annotation is a
    # string, so LlamaIndex itself would not see the Context parameter. Resolve it here the
    # way a module without the future import would have it.
    remember.__annotations__["ctx"] = Context
    original = FunctionTool.from_defaults(async_fn=remember)
    assert original.requires_context
    (tool,) = governed_tools(
        [original],
        pep=kit.pep,
        specs=[tool_spec(original, side_effects={"network"})],
        context=kit.context,
    )
    llm = ScriptedFunctionCallingLLM(
        steps=[scripted_tool_calls(("remember", {"fact": "sky is blue"})), "Noted."]
    )
    agent = FunctionAgent(llm=llm, tools=[tool], streaming=False)
    run(lambda: agent.run(user_msg="remember that the sky is blue"))
    assert len(seen) == 1 and isinstance(seen[0], Context)


def test_a_context_annotation_llamaindex_cannot_see_is_refused(kit: Kit) -> None:
    async def remember(ctx: Context, fact: str) -> str:
        """Remember a fact in the workflow state."""
        return "remembered"

    # This module uses `from __future__ import annotations`: the annotation is a string.
    tool = FunctionTool.from_defaults(async_fn=remember)
    assert not tool.requires_context
    with pytest.raises(ConfigurationError, match="from __future__ import annotations"):
        tool_spec(tool, side_effects={"network"})
    spec = tool_spec(kit.tools[0], side_effects={"network"})
    with pytest.raises(ConfigurationError, match="will not inject"):
        governed_tools([tool], pep=kit.pep, specs=[spec], context=kit.context)


def retriever_of(*tools: FunctionTool) -> Any:
    """A real LlamaIndex tool retriever (an ObjectIndex over a SummaryIndex: no embeddings)."""
    return ObjectIndex.from_objects(list(tools), index_cls=SummaryIndex).as_retriever()


def test_retrieved_tools_are_judged_like_any_other(kit: Kit) -> None:
    by_name = {t.metadata.name: t for t in kit.tools}
    llm = ScriptedFunctionCallingLLM(
        steps=[scripted_tool_calls(("read_file", {"path": "/etc/passwd"})), "I cannot read it."]
    )
    agent = GovernedFunctionAgent(
        llm=llm,
        governor=fixed_governor({"read_file": 0.4}),
        tool_retriever=retriever_of(by_name["read_file"]),
        pep=kit.pep,
        specs=kit.specs(),
        context=kit.context,
        streaming=False,
    )
    _, results = run(lambda: results_of(agent.run(user_msg="Show me /etc/passwd")))
    assert kit.runs == [], "a retrieved tool ran around the guard"
    assert "jevqueue denied the call to 'read_file'" in results[0].tool_output.content
    assert kit.results() == ["DENY"]


def test_a_retrieved_tool_without_a_declaration_is_refused_per_call_and_audited(kit: Kit) -> None:
    ran: list[str] = []

    def send_money(city: str) -> str:
        """Send money to a city's treasury."""
        ran.append(city)
        return "sent"

    llm = ScriptedFunctionCallingLLM(
        steps=[scripted_tool_calls(("send_money", {"city": "Oslo"})), "Not sent."]
    )
    agent = GovernedFunctionAgent(
        llm=llm,
        governor=fixed_governor({"send_money": 0.4}),
        tool_retriever=retriever_of(FunctionTool.from_defaults(send_money)),
        pep=kit.pep,
        specs=kit.specs(),
        context=kit.context,
        streaming=False,
    )
    _, results = run(lambda: results_of(agent.run(user_msg="send money to Oslo")))
    assert ran == []
    assert "refused before evaluation" in results[0].tool_output.content
    assert kit.results() == ["DENY"]


def test_tools_assigned_after_the_build_are_governed_too(kit: Kit) -> None:
    agent = GovernedFunctionAgent(
        llm=ScriptedFunctionCallingLLM(steps=[]),
        governor=fixed_governor(DELEGATE),
        tools=kit.tools[:1],
        pep=kit.pep,
        specs=kit.specs(),
        context=kit.context,
    )
    agent.tools = [*agent.tools, kit.tools[2]]  # read_file, declared
    assert all(isinstance(t, GovernedFunctionTool) for t in agent.tools)
    assert agent.tools[0].policy is agent.tools[1].policy
    assert agent.guard is agent.tools[0].policy.guard
    with pytest.raises(ToolCallRefusedError):
        agent.tools[1].call(path="/etc/passwd")

    def undeclared(city: str) -> str:
        """Not declared."""
        return city

    with pytest.raises(ConfigurationError, match="no policy declaration"):
        agent.tools = [undeclared]
    with pytest.raises(ConfigurationError, match="no policy declaration"):
        GovernedFunctionAgent(
            llm=ScriptedFunctionCallingLLM(steps=[]),
            governor=fixed_governor(DELEGATE),
            tools=[undeclared],
            pep=kit.pep,
            specs=kit.specs(),
            context=kit.context,
        )
    assert kit.runs == []
