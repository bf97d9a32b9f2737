"""The policy-enforcing tool node: a LangGraph adapter of the core :class:`~jevqueue.policy.Guard`.

A :class:`PolicyToolNode` wraps a LangGraph ``ToolNode`` whose ``wrap_tool_call`` /
``awrap_tool_call`` interception is the enforcement point. One run of the node:

1. reads the newest ``AIMessage``'s tool calls that have no ``ToolMessage`` answer yet
   into ``(tool, arguments, tool_call_id)``;
2. has the guard judge each one (``Guard.judge`` when the guard pauses — no approver, or
   ``InboxApprover(pause=True)``, whose request the guard files in the inbox — else
   ``Guard.check``, which asks the inline approver): allowed, refused, or pending an
   approval. What the agent read is the state's messages: each call is judged with the
   :class:`~jevqueue.policy.Transcript` of the messages before the ``AIMessage`` that
   proposed it (what the user wrote, each tool output with its tool and call id; see
   :mod:`~jevqueue.plugins.langgraph.transcript`), so where each argument came from is
   labelled from the checkpointed state — the same in a resumed run as in the run that
   paused, in any process;
3. when calls are pending, pauses the graph **once**, with ``interrupt()``, whose payload
   is built from the core :class:`~jevqueue.policy.ApprovalRequest` of each pending call
   (see :mod:`~jevqueue.plugins.langgraph.approval_request`) — *before* any call of the
   batch runs; on ``Command(resume=answer)`` the node runs again, and each paused call is
   judged again with its answer (``Guard.resume``);
4. runs the batch through the ``ToolNode``: the interceptor answers a refused call with a
   ``ToolMessage(status="error")`` carrying the guard's message — the tool never runs —
   and runs an allowed one through ``Guard.run`` with the judged arguments (each path
   field as the resolved absolute path the policy judged), so a call id runs at most once
   even when LangGraph re-executes the node. Every call id gets exactly one ``ToolMessage``.

The execution context comes from the run's config,
``config["configurable"]["jevqueue_context"]`` (an ``ExecutionContext`` or a mapping of
its fields), else from the node's ``context=``; with neither, the node raises
``ConfigurationError``. It never comes from the graph state: the state is what the
conversation wrote, the config is what the caller who runs the graph says. Resume with
the same context: the digest covers it, so an approval issued under one context
authorises nothing under another.

Refused when the node is built (``ConfigurationError``): a tool without a declaration
(``tool_spec``), and a provider-executed tool (a dict such as ``{"type": "web_search"}``),
which runs at the provider where no guard can judge it.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from jevqueue.errors import ConfigurationError, UsageError
from jevqueue.plugins.langgraph._framework import (
    AIMessage,
    Runnable,
    RunnableConfig,
    ToolCallRequest,
    ToolMessage,
    ToolNode,
    convert_to_openai_tool,
    interrupt,
)
from jevqueue.plugins.langgraph.approval_request import approval_request, read_approval_answer
from jevqueue.plugins.langgraph.transcript import state_messages, transcript_of
from jevqueue.policy import (
    ApprovalRequest,
    Approver,
    ExecutionContext,
    Guard,
    Judgement,
    ToolRegistry,
    ToolSpec,
    Transcript,
    registry_from_specs,
)
from jevqueue.policy._approval_request import check_approver

__all__ = ["CONTEXT_CONFIG_KEY", "PolicyToolNode", "policy_tool_node", "tool_spec"]

_TOOLNODE_DEFAULT: Any = object()

CONTEXT_CONFIG_KEY = "jevqueue_context"
"""``config["configurable"][CONTEXT_CONFIG_KEY]`` carries a run's execution context."""


def tool_spec(
    tool: Any,
    *,
    side_effects: Iterable[str],
    path_fields: Sequence[str] = (),
    required_path_fields: Sequence[str] | None = None,
    cwd_field: str | None = None,
    content_fields: Sequence[str] = (),
    with_schema: bool = True,
    output_trust: str = "untrusted",
) -> ToolSpec:
    """Declare a LangChain tool to the registry: its side effects and path fields, once.

    Args:
        tool: A LangChain tool (or anything ``convert_to_openai_tool`` accepts).
        side_effects: What the tool does, e.g. ``{"file_write"}`` or ``{"network"}``.
        path_fields: Argument names that hold paths (resolved against the workspace).
        required_path_fields: Path fields a call must carry; every path field and the
            ``cwd_field`` when omitted.
        cwd_field: The argument naming a working directory, for shell-like tools.
        content_fields: Where the tool's payload lives (for credential scanning).
        with_schema: Also check arguments against the tool's own JSON Schema.
        output_trust: ``"untrusted"`` (the default: e-mail, web pages, messages, files
            others wrote) or ``"trusted"`` (the user's own or the system's data): how far
            a value read in what the tool returns is trusted when it reaches another call.

    Returns:
        The :class:`~jevqueue.policy.ToolSpec`, named after the tool.
    """
    function = convert_to_openai_tool(tool)["function"]
    return ToolSpec.declare(
        function["name"],
        side_effects=side_effects,
        path_fields=path_fields,
        required_path_fields=required_path_fields,
        cwd_field=cwd_field,
        content_fields=content_fields,
        schema=function.get("parameters") if with_schema else None,
        output_trust=output_trust,
    )


def refuse_provider_tools(tools: Sequence[Any], owner: str) -> None:
    """Refuse provider-executed tools (dicts such as ``{"type": "web_search"}``).

    Raises:
        ConfigurationError: ``tools`` holds one; the message names the alternative.
    """
    served = [tool for tool in tools if isinstance(tool, Mapping)]
    if served:
        names = [str(tool.get("type") or tool.get("name") or "?") for tool in served]
        raise ConfigurationError(
            f"{owner}: the tools {names} run at the model provider, where no guard can judge "
            "them: remove them, or give the agent a client-side LangChain tool for the same "
            "capability, declared with tool_spec(tool, side_effects=..., path_fields=...)"
        )


def require_declared(registry: ToolRegistry, names: Iterable[str], owner: str) -> None:
    """Refuse tools that have no declaration, so could never run.

    ``Guard.require_declared`` says the same, but the node has no guard before its first
    run when its context comes only from the run's config.

    Raises:
        ConfigurationError: some of ``names`` have no declaration.
    """
    missing = sorted({name for name in names if name not in registry})
    if missing:
        raise ConfigurationError(
            f"{owner}: tools {missing} have no policy declaration, so they could never run: "
            "declare each once with tool_spec(tool, side_effects=..., path_fields=...) and "
            "pass specs=[...]"
        )


def _refusal_message(call: Mapping[str, Any], judgement: Judgement) -> ToolMessage:
    verdict = judgement.verdict
    return ToolMessage(
        content=judgement.message,
        tool_call_id=str(call.get("id")),
        name=str(call.get("name")),
        status="error",
        artifact={
            "jevqueue": {
                "executed": False,
                "action_digest": judgement.action_digest or judgement.approval_requested,
                "verdict": verdict.as_dict() if verdict is not None else None,
            }
        },
    )


def _with_arguments(request: ToolCallRequest, arguments: dict[str, Any]) -> ToolCallRequest:
    """The request with exactly the judged arguments, paths resolved as judged."""
    return request.override(tool_call={**request.tool_call, "args": arguments})


def _call_id(call: Mapping[str, Any]) -> str | None:
    value = call.get("id")
    return value if isinstance(value, str) and value else None


# The judgements of the batch the node is running, by tool call id, with the call judged.
_PLANS: contextvars.ContextVar[dict[str, tuple[Mapping[str, Any], Judgement]] | None] = (
    contextvars.ContextVar("jevqueue_langgraph_plans", default=None)
)


class PolicyToolNode(Runnable):  # type: ignore[type-arg]
    """A tool node whose every call the guard judges first; approvals through ``interrupt()``.

    Build it with :func:`policy_tool_node`. ``node.tool_node`` is the inner LangGraph
    ``ToolNode``; ``node.wrap_tool_call`` / ``node.awrap_tool_call`` are its interceptors,
    which can also be given to a ``ToolNode`` of your own (then a call that needs an
    approval interrupts inside the interceptor, and the resume re-runs the batch: each call
    that already ran is answered with its first result instead of running again, within
    this process; across processes, run one call per task, as ``create_agent`` does). A
    batch with a missing or repeated call id is refused whole.

    Attributes:
        guard: The core guard that judges, asks and runs (``None`` until the first run when
            the node has no default context).
        registry: The tools' declarations (built from ``specs``).
        context: The default execution context (a run's config may override it).
        tool_node: The inner ``ToolNode``.
    """

    def __init__(
        self,
        tools: Sequence[Any],
        *,
        pep: Any,
        registry: ToolRegistry | None = None,
        specs: Iterable[ToolSpec] | ToolRegistry = (),
        context: ExecutionContext | Mapping[str, Any] | None = None,
        approver: Approver | None = None,
        messages_key: str = "messages",
        handle_tool_errors: Any = _TOOLNODE_DEFAULT,
        name: str = "tools",
        owner: str = "policy_tool_node",
    ) -> None:
        if not callable(getattr(pep, "enforce", None)):
            raise ConfigurationError(
                f"pep must be a jevqueue PolicyEnforcementPoint, not {type(pep).__name__}"
            )
        refuse_provider_tools(tools, owner)
        self.pep = pep
        self.owner = owner
        self.registry = registry_from_specs(specs, registry=registry, owner=owner)
        self.context = None if context is None else ExecutionContext.coerce(context)
        self.approver = check_approver(approver)
        self.messages_key = messages_key
        options: dict[str, Any] = {}
        if handle_tool_errors is not _TOOLNODE_DEFAULT:
            options["handle_tool_errors"] = handle_tool_errors
        self.tool_node = ToolNode(
            tools,
            wrap_tool_call=self.wrap_tool_call,
            awrap_tool_call=self.awrap_tool_call,
            messages_key=messages_key,
            name=name,
            **options,
        )
        require_declared(self.registry, self.tool_node.tools_by_name, owner)
        self.name = name
        self._lock = threading.Lock()
        # Without a default context the guard is made with the first run's; every call is
        # judged with its own run's context either way.
        self.guard: Guard | None = None
        if self.context is not None:
            self.guard = self._new_guard(self.context)

    def _new_guard(self, context: ExecutionContext) -> Guard:
        # Every judgement reads the state's messages (transcript=): no copy of its own.
        return Guard(
            self.pep,
            specs=self.registry,
            context=context,
            approver=self.approver,
            owner=self.owner,
            keep_transcripts=False,
        )

    # --- context ---------------------------------------------------------------------

    def context_for(self, config: Mapping[str, Any] | None) -> ExecutionContext:
        """The execution context of a run: the config's, else the node's.

        Raises:
            ConfigurationError: Neither the config nor the node carries one.
            InvalidContextError: The context given is incomplete or ambient.
        """
        configurable = (config or {}).get("configurable") or {}
        value = configurable.get(CONTEXT_CONFIG_KEY)
        if value is not None:
            return ExecutionContext.coerce(value)
        if self.context is not None:
            return self.context
        raise ConfigurationError(
            "no execution context for this run: pass context=ExecutionContext(...) to "
            "policy_tool_node(), or run the graph with config={'configurable': "
            f"{{'{CONTEXT_CONFIG_KEY}': {{'task_id': ..., 'actor_id': ..., 'workspace': ..., "
            "'git_sha': ...}}}}"
        )

    def _guard_for(self, context: ExecutionContext) -> Guard:
        if self.guard is None:
            with self._lock:
                if self.guard is None:
                    self.guard = self._new_guard(context)
        return self.guard

    def approval_requests(self, paused: Any) -> list[ApprovalRequest]:
        """The core :class:`~jevqueue.policy.ApprovalRequest` s behind a pause of this node.

        Answer each with any :class:`~jevqueue.policy.Approver`, in the process that
        paused, then resume with ``Command(resume={request.call_id: answer, ...})``.

        Args:
            paused: The ``Interrupt`` (``result["__interrupt__"][0]``) or its value.

        Raises:
            ConfigurationError: the pause is not this node's, or not from this process.
        """
        value = getattr(paused, "value", paused)
        actions = value.get("actions") if isinstance(value, Mapping) else None
        if not isinstance(actions, list):
            raise ConfigurationError("approval_requests() takes a pause of a jevqueue tool node")
        wanted = [(action.get("tool_call_id"), action.get("action_digest")) for action in actions]
        found: dict[tuple[Any, Any], ApprovalRequest] = {}
        guard = self.guard
        for judgement in reversed(guard.judgements.copy() if guard is not None else ()):
            key = (judgement.call_id, judgement.action_digest)
            if judgement.pending and key in wanted and key not in found:
                assert judgement.request is not None
                found[key] = judgement.request
        missing = [key for key in wanted if key not in found]
        if missing:
            raise ConfigurationError(
                f"{self.owner}: no pending approval request for {missing} in this process: "
                "answer the pause's dicts instead (resume with the records issued for each "
                "action_digest)"
            )
        return [found[key] for key in wanted]

    # --- one call --------------------------------------------------------------------------

    def transcript(self, messages: Sequence[Any] | None, call_id: str | None) -> Transcript:
        """What the agent had read when it proposed ``call_id``, from the state's messages
        (see :mod:`~jevqueue.plugins.langgraph.transcript`); empty without messages."""
        if messages is None:
            return Transcript()
        return transcript_of(messages, self.registry, call_id)

    def _read(
        self, state: Any, config: RunnableConfig | None, call_id: str | None
    ) -> Transcript | Exception:
        """:meth:`transcript` of the state's messages, or the error that makes every call
        it was for refused."""
        try:
            return self.transcript(self._state_messages(state, config), call_id)
        except Exception as error:  # fail closed: a call whose history cannot be read
            return error

    def _judge(
        self, call: Mapping[str, Any], context: ExecutionContext, read: Transcript | Exception
    ) -> Judgement:
        guard = self._guard_for(context)
        judge = guard.judge if guard.pauses else guard.check
        call_id = _call_id(call)
        if isinstance(read, Exception):
            return guard.refuse(call.get("name"), read, call_id, context=context)
        return judge(call.get("name"), call.get("args"), call_id, context=context, transcript=read)

    async def _ajudge(
        self, call: Mapping[str, Any], context: ExecutionContext, read: Transcript | Exception
    ) -> Judgement:
        guard = self._guard_for(context)
        call_id = _call_id(call)
        if isinstance(read, Exception):
            return guard.refuse(call.get("name"), read, call_id, context=context)
        if guard.pauses:
            return guard.judge(
                call.get("name"), call.get("args"), call_id, context=context, transcript=read
            )
        return await guard.acheck(
            call.get("name"), call.get("args"), call_id, context=context, transcript=read
        )

    def _pause(self, judgements: list[Judgement], context: ExecutionContext) -> list[Judgement]:
        """Pause once for every pending judgement; each judged again with its answer."""
        waiting = [j for j in judgements if j.pending]
        if not waiting:
            return judgements
        guard = self._guard_for(context)
        answer = interrupt(approval_request([j.request for j in waiting if j.request]))
        answers = read_approval_answer(answer, [j.call_id for j in waiting])
        return [
            guard.resume(j, answers[j.call_id], context=context) if j.pending else j
            for j in judgements
        ]

    def _planned(self, request: ToolCallRequest) -> Judgement | None:
        plans = _PLANS.get()
        call = request.tool_call
        planned = plans.get(str(call.get("id"))) if plans is not None else None
        if planned is None:
            return None
        judged, judgement = planned
        # Still the call judged: same name, same arguments (so the same digest).
        if judged.get("name") == call.get("name") and judged.get("args") == call.get("args"):
            return judgement
        return None

    def _judge_alone(self, request: ToolCallRequest) -> Judgement:
        context = self.context_for(request.runtime.config)
        read = self._read(request.state, request.runtime.config, _call_id(request.tool_call))
        (judgement,) = self._pause([self._judge(request.tool_call, context, read)], context)
        return judgement

    async def _ajudge_alone(self, request: ToolCallRequest) -> Judgement:
        context = self.context_for(request.runtime.config)
        read = self._read(request.state, request.runtime.config, _call_id(request.tool_call))
        judged = await self._ajudge(request.tool_call, context, read)
        (judgement,) = self._pause([judged], context)
        return judgement

    # --- the ToolNode interceptors -------------------------------------------------------

    def wrap_tool_call(self, request: ToolCallRequest, execute: Any) -> Any:
        """Run the call through ``execute`` with the judged arguments, once, if allowed."""
        judgement = self._planned(request) or self._judge_alone(request)
        if not judgement.allowed:
            return _refusal_message(request.tool_call, judgement)
        guard = self.guard
        assert guard is not None
        return guard.run(judgement, lambda arguments: execute(_with_arguments(request, arguments)))

    async def awrap_tool_call(self, request: ToolCallRequest, execute: Any) -> Any:
        """The async form of :meth:`wrap_tool_call` (an ``async`` approver is awaited)."""
        judgement = self._planned(request) or await self._ajudge_alone(request)
        if not judgement.allowed:
            return _refusal_message(request.tool_call, judgement)
        guard = self.guard
        assert guard is not None
        return await guard.arun(
            judgement, lambda arguments: execute(_with_arguments(request, arguments))
        )

    # --- the node ------------------------------------------------------------------------

    def _pending(self, state: Any) -> tuple[list[dict[str, Any]], Any]:
        """The calls still unanswered, and the input to hand the inner ToolNode."""
        if (
            isinstance(state, list)
            and state
            and isinstance(state[-1], dict)
            and (state[-1].get("type") == "tool_call")
        ):
            return list(state), state
        messages = (
            state.get(self.messages_key)
            if isinstance(state, Mapping)
            else getattr(state, self.messages_key, None)
        )
        if not isinstance(messages, list):
            raise ConfigurationError(
                f"the tool node reads state[{self.messages_key!r}] as a list of messages"
            )
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if isinstance(message, AIMessage):
                answered = {
                    m.tool_call_id for m in messages[index + 1 :] if isinstance(m, ToolMessage)
                }
                calls = [dict(c) for c in message.tool_calls if c.get("id") not in answered]
                if len(calls) == len(message.tool_calls):
                    return calls, state
                narrowed = message.model_copy(update={"tool_calls": calls})
                rest = {**state, self.messages_key: [*messages[:index], narrowed]}
                return calls, rest
        return [], state

    def _state_messages(self, input: Any, config: RunnableConfig | None) -> list[Any] | None:
        """The messages of the graph state the node runs on. A bare list of tool calls (a
        ``Send``) carries none: the state is read the way the ``ToolNode`` reads it."""
        messages = state_messages(input, self.messages_key)
        if messages is not None or not isinstance(input, list):
            return messages
        read_state = getattr(self.tool_node, "_extract_state", None)
        if not callable(read_state):  # pragma: no cover - a LangGraph without it
            return None
        return state_messages(read_state(input, config or {}), self.messages_key)

    def _refused_batch(
        self, calls: list[dict[str, Any]], context: ExecutionContext
    ) -> list[ToolMessage] | None:
        """Refusals for a batch with a missing or repeated id, else ``None``.

        Judgements, answers and runs are matched by id: with a missing or repeated id a
        call could run twice across an interrupt. Nothing of such a batch runs.
        """
        ids = [call.get("id") for call in calls]
        if all(isinstance(i, str) and i for i in ids) and len(set(ids)) == len(ids):
            return None
        error = UsageError(
            "a batch of tool calls with a missing or repeated id: each call needs its own id "
            "so that it runs at most once; nothing of the batch was run, call the tools again"
        )
        guard = self._guard_for(context)
        return [
            _refusal_message(call, guard.refuse(call.get("name"), error, context=context))
            for call in calls
        ]

    def _plans(
        self, calls: list[dict[str, Any]], judgements: list[Judgement]
    ) -> dict[str, tuple[Mapping[str, Any], Judgement]]:
        return {str(call["id"]): (call, j) for call, j in zip(calls, judgements, strict=True)}

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Judge the pending calls, ask for approvals once, then run the allowed ones."""
        calls, tool_input = self._pending(input)
        if not calls:
            return {self.messages_key: []}
        context = self.context_for(config)
        refused = self._refused_batch(calls, context)
        if refused is not None:
            return {self.messages_key: refused}
        # Every call of the batch was proposed by one AIMessage: one transcript serves all.
        read = self._read(input, config, _call_id(calls[0]))
        judgements = self._pause([self._judge(call, context, read) for call in calls], context)
        token = _PLANS.set(self._plans(calls, judgements))
        try:
            return self.tool_node.invoke(tool_input, config)
        finally:
            _PLANS.reset(token)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """The async form of :meth:`invoke` (an ``async`` approver is awaited)."""
        calls, tool_input = self._pending(input)
        if not calls:
            return {self.messages_key: []}
        context = self.context_for(config)
        refused = self._refused_batch(calls, context)
        if refused is not None:
            return {self.messages_key: refused}
        read = self._read(input, config, _call_id(calls[0]))
        judged = [await self._ajudge(call, context, read) for call in calls]
        judgements = self._pause(judged, context)
        token = _PLANS.set(self._plans(calls, judgements))
        try:
            return await self.tool_node.ainvoke(tool_input, config)
        finally:
            _PLANS.reset(token)


def policy_tool_node(
    tools: Sequence[Any],
    *,
    pep: Any,
    registry: ToolRegistry | None = None,
    specs: Iterable[ToolSpec] | ToolRegistry = (),
    context: ExecutionContext | Mapping[str, Any] | None = None,
    approver: Approver | None = None,
    messages_key: str = "messages",
    handle_tool_errors: Any = _TOOLNODE_DEFAULT,
    name: str = "tools",
) -> PolicyToolNode:
    """Build the policy-enforcing tool node.

    Args:
        tools: The LangChain tools to run (client-side: a provider-executed dict tool is
            refused).
        pep: The :class:`~jevqueue.policy.PolicyEnforcementPoint` that judges every call.
        registry: Deprecated: pass the declarations as ``specs`` (a ToolRegistry is
            accepted there too).
        specs: Declarations to add, one per tool: :func:`tool_spec` builds them.
        context: The default execution context; a run's
            ``config["configurable"]["jevqueue_context"]`` overrides it.
        approver: An :class:`~jevqueue.policy.Approver` (plain, or ``async`` when the graph
            runs with ``ainvoke``) asked inline for a call that needs an explicit approval;
            without one the graph pauses with ``interrupt()``. With
            ``InboxApprover(..., pause=True)`` the graph pauses too, its request filed in
            the inbox; resume with ``Command(resume=approver.answer(digest))``.
        messages_key: The state key holding the messages.
        handle_tool_errors: Passed to the inner ``ToolNode`` when given (how a tool's own
            exception is handled); LangGraph's default otherwise.
        name: The node's run name.

    Raises:
        ConfigurationError: A tool has no declaration or runs at the provider, ``pep`` is
            not a PEP, or ``approver`` is not callable.
    """
    return PolicyToolNode(
        tools,
        pep=pep,
        registry=registry,
        specs=specs,
        context=context,
        approver=approver,
        messages_key=messages_key,
        handle_tool_errors=handle_tool_errors,
        name=name,
    )
