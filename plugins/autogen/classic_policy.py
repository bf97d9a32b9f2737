"""``PolicyCapability``: every tool call a classic AutoGen executor would run, judged first.

``PolicyCapability(pep, specs=..., context=..., approver=...).add_to_agent(executor)``
registers a reply function, plain and ``async``, in front of the executor's own
tool-call replies (``generate_tool_calls_reply`` and the legacy function-call reply):
termination and human input keep their places before it. When the newest message calls
tools, the reply function

1. judges **every** call of the batch with :class:`jevqueue.policy.Guard` (``check`` /
   ``acheck``: audited, the approver asked inline) before any of them runs;
2. runs the allowed ones through :meth:`~jevqueue.policy.Guard.run` — each call id at
   most once — and the executor's own ``execute_function`` / ``a_execute_function``, with
   the arguments that were judged (path fields as resolved);
3. answers every ``tool_call_id`` itself — a refused call with the guard's message as its
   tool response — in the shape ``generate_tool_calls_reply`` returns, so the chat goes on
   and AutoGen's own tool execution never sees the message.

Routes around the guard, refused when the capability is added (``ConfigurationError``):
a function the executor runs without a declaration, and code execution — an executor with
``code_execution_config`` (a ``UserProxyAgent``'s default) runs every code block of a
prose reply with no judgement; declare a shell tool instead (judged as ``shell_command``)
and build the executor with ``code_execution_config=False``. A function registered after
the capability was added is judged per call like any other (an undeclared one is refused).

What the agent read: before it judges a batch, the reply function records the user's words
and the tool responses of the conversation in the guard's transcript
(:mod:`.classic_transcript`), so each call is judged with the provenance of its arguments;
``guard.run`` records each output it runs.

It does not rely on ``register_hook("safeguard_tool_inputs")``, which AutoGen does not run
on the async path; the executor's ``safeguard_tool_inputs`` / ``safeguard_tool_outputs``
hooks are applied here in both paths (a call a hook drops is refused).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from typing import Any

from jevqueue.errors import ConfigurationError
from jevqueue.plugins.autogen._classic_framework import Agent, AgentCapability, ConversableAgent
from jevqueue.plugins.autogen.classic_transcript import read_conversation
from jevqueue.policy import Approver, ExecutionContext, Guard, Judgement, ToolSpec, refusal_message
from jevqueue.policy._approval_request import deprecated_approver

__all__ = ["PolicyCapability"]

_TOOL_REPLIES = (
    ConversableAgent.generate_tool_calls_reply,
    ConversableAgent.a_generate_tool_calls_reply,
    ConversableAgent.generate_function_call_reply,
    ConversableAgent.a_generate_function_call_reply,
)
_CODE_REPLIES = (
    ConversableAgent.generate_code_execution_reply,
    ConversableAgent._generate_code_execution_reply_using_executor,
)


class PolicyCapability(AgentCapability):  # type: ignore[misc]
    """Judge every tool call of a classic AutoGen executor before it runs.

    Args:
        pep: The policy enforcement point; it audits every decision.
        specs: One ``ToolSpec`` per tool the executor runs
            (:func:`~jevqueue.plugins.autogen.tool_spec`).
        context: The execution context (an ``ExecutionContext`` or a mapping of its
            fields), validated now.
        approver: Asked for approval records when a call needs an explicit approval
            (:class:`jevqueue.policy.Approver`: ``(ApprovalRequest) -> ApprovalRecord(s) |
            None``, plain or ``async`` — an ``async`` one in a sync chat refuses the call,
            saying so; raise ``ApprovalDeclinedError(reason)`` to decline). Without one
            such calls are refused with a message saying how to add one.
        approval: The former name of ``approver`` (deprecated).

    Raises:
        ConfigurationError: ``specs`` is malformed, or the approver is not callable or is
            given under two keywords.
        InvalidContextError: ``context`` is incomplete or ambient.
    """

    def __init__(
        self,
        pep: Any,
        *,
        specs: Iterable[ToolSpec],
        context: ExecutionContext | Mapping[str, Any],
        approver: Approver | None = None,
        approval: Approver | None = None,
    ) -> None:
        super().__init__()
        self.guard = Guard(
            pep,
            specs=specs,
            context=context,
            approver=deprecated_approver(approver, "PolicyCapability", approval=approval),
            owner="PolicyCapability",
        )
        self.agents: list[Any] = []

    @property
    def judge(self) -> Guard:
        """The guard (this capability's former attribute name)."""
        return self.guard

    @property
    def last(self) -> Judgement | None:
        """The most recent judgement."""
        return self.guard.last

    def add_to_agent(self, agent: ConversableAgent) -> None:
        """Judge every tool call ``agent`` executes, in sync and async chats.

        Raises:
            ConfigurationError: ``agent`` is not a ``ConversableAgent``, is already governed
                by a policy capability, runs a function that has no spec, or executes code
                blocks (``code_execution_config``).
        """
        if not isinstance(agent, ConversableAgent):
            raise ConfigurationError(
                f"PolicyCapability governs a ConversableAgent, not {type(agent).__name__}"
            )
        entries = agent._reply_func_list
        if any(getattr(e["reply_func"], "__name__", "") == "policy_reply" for e in entries):
            raise ConfigurationError(f"agent {agent.name!r} already has a policy capability")
        refuse_code_execution(agent)
        self.guard.require_declared(agent.function_map, how=f" (agent {agent.name!r} runs them)")
        position = next((i for i, e in enumerate(entries) if e["reply_func"] in _TOOL_REPLIES), 0)
        agent.register_reply(
            [Agent, None], self.a_policy_reply, position=position, ignore_async_in_sync_chat=True
        )
        agent.register_reply([Agent, None], self.policy_reply, position=position)
        self.agents.append(agent)

    # --- the reply functions ---------------------------------------------------------

    def policy_reply(
        self, recipient: Any, messages: Any = None, sender: Any = None, config: Any = None
    ) -> tuple[bool, Any]:
        """The reply function of sync chats."""
        if messages is None:
            messages = recipient._oai_messages[sender]
        batch = _batch(messages)
        if batch is None:
            return False, None
        read_conversation(self.guard, recipient, messages, sender)
        judged = [self._judge_sync(recipient, call) for call in batch.calls]
        results = [
            self._run_sync(recipient, call, j) for call, j in zip(batch.calls, judged, strict=True)
        ]
        return True, batch.reply(recipient, results)

    async def a_policy_reply(
        self, recipient: Any, messages: Any = None, sender: Any = None, config: Any = None
    ) -> tuple[bool, Any]:
        """The reply function of async chats."""
        if messages is None:
            messages = recipient._oai_messages[sender]
        batch = _batch(messages)
        if batch is None:
            return False, None
        read_conversation(self.guard, recipient, messages, sender)
        judged = [await self._judge_async(recipient, call) for call in batch.calls]
        results = [
            await self._run_async(recipient, call, j)
            for call, j in zip(batch.calls, judged, strict=True)
        ]
        return True, batch.reply(recipient, results)

    # --- judging and running -----------------------------------------------------------

    def _judge_sync(self, agent: Any, call: _Call) -> Judgement | str:
        prepared = _prepared(agent, call)
        if isinstance(prepared, str):
            return prepared
        return self.guard.check(prepared[0], prepared[1], call.id)

    async def _judge_async(self, agent: Any, call: _Call) -> Judgement | str:
        prepared = _prepared(agent, call)
        if isinstance(prepared, str):
            return prepared
        return await self.guard.acheck(prepared[0], prepared[1], call.id)

    def _run_sync(self, agent: Any, call: _Call, judged: Judgement | str) -> str:
        if isinstance(judged, str):  # refused before the guard (an input hook, bad JSON)
            return judged
        if not judged.allowed:
            return judged.message

        def execute(run: dict[str, Any]) -> Any:
            request = {"name": judged.tool, "arguments": json.dumps(run)}
            if asyncio.iscoroutinefunction(agent.function_map.get(judged.tool)):
                done = agent._run_async_in_thread(agent.a_execute_function(request, call.id))
            else:
                done = agent.execute_function(request, call_id=call.id)
            return done[1].get("content")  # what the model reads: what guard.run records

        return _content(agent, judged.tool, self.guard.run(judged, execute))

    async def _run_async(self, agent: Any, call: _Call, judged: Judgement | str) -> str:
        if isinstance(judged, str):  # refused before the guard (an input hook, bad JSON)
            return judged
        if not judged.allowed:
            return judged.message

        async def execute(run: dict[str, Any]) -> Any:
            request = {"name": judged.tool, "arguments": json.dumps(run)}
            return (await agent.a_execute_function(request, call_id=call.id))[1].get("content")

        return _content(agent, judged.tool, await self.guard.arun(judged, execute))


def refuse_code_execution(agent: Any) -> None:
    """Code blocks an executor would run are a route around the guard: refused.

    Raises:
        ConfigurationError: ``agent`` has ``code_execution_config`` set (or a code
            execution reply registered).
    """
    enabled = getattr(agent, "_code_execution_config", False) is not False
    registered = any(e["reply_func"] in _CODE_REPLIES for e in agent._reply_func_list)
    if enabled or registered:
        raise ConfigurationError(
            f"agent {agent.name!r} executes code blocks (code_execution_config), which would "
            "run every code block of a reply with no policy judgement and no audit record: "
            "build it with code_execution_config=False and give the model a declared shell "
            "tool instead, tool_spec(run_shell, side_effects={'shell_command'}, "
            "cwd_field=...), which the policy judges as a shell command"
        )


def _prepared(agent: Any, call: _Call) -> tuple[str, Any] | str:
    """The call as the executor's input hooks leave it: (name, arguments), or a refusal."""
    processed = agent._process_tool_input({"name": call.name, "arguments": call.arguments})
    if processed is None:
        return refusal_message(call.name, "a safeguard_tool_inputs hook dropped it")
    name = str(processed.get("name", call.name))
    raw = processed.get("arguments", "{}")
    try:
        return name, json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        return refusal_message(name, f"its arguments are not JSON ({exc})")


class _Call:
    """One call of the newest message: its id, name and raw arguments."""

    def __init__(self, call_id: str | None, name: str, arguments: Any) -> None:
        self.id = call_id
        self.name = name
        self.arguments = arguments


class _Batch:
    """The calls of the newest message, and how to answer them."""

    def __init__(self, calls: list[_Call], legacy: bool) -> None:
        self.calls = calls
        self.legacy = legacy

    def reply(self, agent: Any, results: list[str]) -> dict[str, Any]:
        if self.legacy:  # the shape generate_function_call_reply returns
            return {"name": self.calls[0].name, "role": "function", "content": results[0]}
        responses = []
        for call, content in zip(self.calls, results, strict=True):
            response: dict[str, Any] = {"role": "tool", "content": content}
            if call.id is not None:
                response["tool_call_id"] = call.id
            responses.append(response)
        return {
            "role": "tool",
            "tool_responses": responses,
            "content": "\n\n".join(agent._str_for_tool_response(r) for r in responses),
        }


def _batch(messages: Any) -> _Batch | None:
    if not messages:
        return None
    message = messages[-1]
    calls: list[_Call] = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        calls.append(
            _Call(call.get("id"), str(function.get("name", "")), function.get("arguments"))
        )
    if calls:
        return _Batch(calls, legacy=False)
    legacy = message.get("function_call")
    if isinstance(legacy, Mapping):
        return _Batch(
            [_Call(message.get("id"), str(legacy.get("name", "")), legacy.get("arguments"))], True
        )
    return None


def _content(agent: Any, tool: str, content: Any) -> str:
    """The content after the executor's ``safeguard_tool_outputs`` hooks, which read the
    result in the shape ``execute_function`` returns it."""
    processed = agent._process_tool_output({"name": tool, "role": "function", "content": content})
    if processed is None:
        return "[the tool's output was withheld by a safeguard_tool_outputs hook]"
    content = processed.get("content", "")
    return "" if content is None else content
