"""The policy-enforcing tool node: every call is judged by the PEP before it runs.

A :class:`PolicyToolNode` wraps a LangGraph ``ToolNode`` whose ``wrap_tool_call`` /
``awrap_tool_call`` interception is the enforcement point. One run of the node:

1. takes the newest ``AIMessage``'s tool calls that have no ``ToolMessage`` answer yet;
2. builds each call's canonical :class:`~jevqueue.policy.Action` (fail closed: an
   unregistered tool or a bad argument is refused before evaluation) and evaluates it
   with the PEP (audited);
3. when any call needs an explicit approval, pauses the graph **once**, with
   ``interrupt()``, listing every such call with its canonical action and digest —
   *before* any call of the batch runs, so resuming (which re-runs the whole node)
   never runs a call twice;
4. runs the batch through the ``ToolNode``: the interceptor returns a
   ``ToolMessage(status="error")`` for a denied, declined or unapproved call — the tool
   never runs — and otherwise lets it run. Every call id gets exactly one ``ToolMessage``.

The execution context comes from the run's config,
``config["configurable"]["jevqueue_context"]`` (an ``ExecutionContext`` or a mapping of
its fields), else from the node's ``context=``; with neither, the node raises
``ConfigurationError``. It never comes from the graph state: the state is what the
conversation wrote, the config is what the caller who runs the graph says. Resume with
the same context: the digest covers it, so an approval issued under one context
authorises nothing under another.
"""

from __future__ import annotations

import contextvars
import copy
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jevqueue.approvals import EXPLICIT_APPROVAL
from jevqueue.errors import (
    ConfigurationError,
    PolicyDeniedError,
    UnfulfilledObligationError,
    UsageError,
)
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
from jevqueue.plugins.langgraph.approval_request import (
    PendingApproval,
    approval_request,
    read_approval_answer,
)
from jevqueue.policy import (
    Action,
    ExecutionContext,
    ToolRegistry,
    ToolSpec,
    Verdict,
    VerdictKind,
    registry_from_specs,
)

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
    )


@dataclass
class _Judgement:
    """The plan for one call in this run of the node."""

    call_id: str
    tool: str
    arguments: Any = None
    action: Action | None = None
    verdict: Verdict | None = None
    refusal: str | None = None
    approval: PendingApproval | None = None


# Immutable values: a dict holding only these is snapshotted by a shallow copy.
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _snapshot(arguments: Any) -> Any:
    """A private copy of a call's arguments, as ``copy.deepcopy`` would make it."""
    if type(arguments) is dict:
        for value in arguments.values():
            if type(value) not in _SCALARS:
                return copy.deepcopy(arguments)
        return dict(arguments)
    return copy.deepcopy(arguments)


@dataclass(frozen=True)
class _Refused:
    """A batch refused whole: the refusal messages stand in for running it."""

    messages: list[Any]


class _RanCalls:
    """The answers of calls that ran, by replay key; bounded, thread-safe."""

    _LIMIT = 4096

    def __init__(self) -> None:
        self._answers: dict[tuple[str, ...], Any] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple[str, ...]) -> Any:
        with self._lock:
            return self._answers.get(key)

    def remember(self, key: tuple[str, ...], answer: Any) -> None:
        with self._lock:
            if len(self._answers) >= self._LIMIT:
                self._answers.pop(next(iter(self._answers)))
            self._answers[key] = answer


def _as_judged(request: ToolCallRequest, judgement: _Judgement) -> ToolCallRequest:
    """The request with exactly the judged arguments, paths resolved as judged."""
    action = judgement.action
    assert action is not None
    judged = action.arguments_to_run(judgement.arguments)
    return request.override(tool_call={**request.tool_call, "args": judged})


_PLANS: contextvars.ContextVar[dict[str, _Judgement] | None] = contextvars.ContextVar(
    "jevqueue_langgraph_plans", default=None
)


def _needs_approval(verdict: Verdict) -> bool:
    return (
        verdict.kind is VerdictKind.ALLOW_WITH_OBLIGATIONS
        and EXPLICIT_APPROVAL in verdict.obligations
    )


def _reasons(verdict: Verdict | None) -> str:
    if verdict is None or not verdict.reasons:
        return "no reason given"
    return "; ".join(verdict.reasons)


class PolicyToolNode(Runnable):  # type: ignore[type-arg]
    """A tool node whose every call the PEP judges first; approvals through ``interrupt()``.

    Build it with :func:`policy_tool_node`. ``node.tool_node`` is the inner LangGraph
    ``ToolNode``; ``node.wrap_tool_call`` / ``node.awrap_tool_call`` are its interceptors,
    which can also be given to a ``ToolNode`` of your own (then a call that needs an
    approval interrupts inside the interceptor, and the resume re-runs the batch: each call
    that already ran is answered from memory instead of running again, within this
    process; across processes, run one call per task, as ``create_agent`` does). A batch
    with a missing or repeated call id is refused whole.

    Attributes:
        pep: The policy enforcement point.
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
        messages_key: str = "messages",
        handle_tool_errors: Any = _TOOLNODE_DEFAULT,
        name: str = "tools",
    ) -> None:
        if not callable(getattr(pep, "enforce", None)) or not callable(
            getattr(pep, "evaluate", None)
        ):
            raise ConfigurationError(
                f"pep must be a jevqueue PolicyEnforcementPoint, not {type(pep).__name__}"
            )
        self.pep = pep
        self.registry = registry_from_specs(specs, registry=registry, owner="policy_tool_node")
        self.context = None if context is None else ExecutionContext.coerce(context)
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
        missing = [tool for tool in self.tool_node.tools_by_name if tool not in self.registry]
        if missing:
            raise ConfigurationError(
                f"tools {missing} are not registered: declare each once with "
                "tool_spec(tool, side_effects=..., path_fields=...) and pass specs=[...]; "
                "an undeclared tool can never run"
            )
        self.name = name
        self._ran = _RanCalls()

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

    # --- judging -----------------------------------------------------------------------

    def _judge(self, call: Mapping[str, Any], context: ExecutionContext) -> _Judgement:
        """Build and evaluate one call (audited); no effect."""
        name = str(call.get("name"))
        # A snapshot of what was judged: the call runs only while its arguments still equal it.
        # The action is built from the snapshot too (Action.build keeps a copy of its own).
        arguments = _snapshot(call.get("args") or {})
        judgement = _Judgement(call_id=str(call.get("id")), tool=name, arguments=arguments)
        try:
            judgement.action = Action.build(self.registry, name, arguments, context)
        except UsageError as error:
            audit_rejection = getattr(self.pep, "audit_rejection", None)
            if callable(audit_rejection):
                audit_rejection(name, context, error)
            judgement.refusal = (
                f"Rejected before policy evaluation: {error}. The call to {name} was not executed."
            )
            return judgement
        verdict = self.pep.evaluate(judgement.action)
        judgement.verdict = verdict
        if _needs_approval(verdict):
            judgement.approval = PendingApproval(judgement.call_id, judgement.action, verdict)
        elif verdict.kind is VerdictKind.DENY:
            judgement.refusal = (
                f"Denied by policy: {_reasons(verdict)}. The call to {name} was not executed; "
                "do not retry it unchanged."
            )
        elif verdict.kind is VerdictKind.REPAIR:
            repaired = verdict.repaired or {}
            judgement.refusal = (
                f"Not executed as proposed ({_reasons(verdict)}). The policy suggests calling "
                f"{repaired.get('tool')} with "
                f"{json.dumps(dict(repaired.get('arguments') or {}), sort_keys=True)} "
                "instead; make that call if it still does what the user asked."
            )
        return judgement

    def _settle(self, judgement: _Judgement) -> str | None:
        """Right before the call would run: ``None`` to run it, else the refusal text."""
        if judgement.refusal is not None:
            return judgement.refusal
        action = judgement.action
        assert action is not None and judgement.verdict is not None
        pending = judgement.approval
        if pending is None:
            if judgement.verdict.allowed:
                # Evaluated (and audited) in this same run, with nothing run in between.
                return None
            records: tuple[Any, ...] = ()
        elif pending.declined is not None:
            return (
                f"Not executed: {action.tool} needed an explicit approval and "
                f"{pending.declined} (action {action.digest})."
            )
        else:
            records = pending.records
        try:
            verdict = self.pep.enforce(action, records)
        except PolicyDeniedError as error:
            judgement.verdict = error.verdict
            return (
                f"Denied by policy: {_reasons(error.verdict)}. The call to {action.tool} was "
                "not executed."
            )
        except UnfulfilledObligationError as error:
            verdict = judgement.verdict = error.verdict
            return (
                f"Not executed: {action.tool} needs {list(verdict.obligations)} and it was "
                f"not fulfilled ({_reasons(verdict)}). Action {action.digest}."
            )
        if not verdict.allowed:
            # enforce() returns a REPAIR instead of raising: it still does not allow the call.
            judgement.verdict = verdict
            return f"Not executed as proposed ({_reasons(verdict)}); the call was not run."
        return None

    def _refusal_message(
        self, call: Mapping[str, Any], text: str, judgement: _Judgement | None
    ) -> ToolMessage:
        verdict = judgement.verdict if judgement is not None else None
        action = judgement.action if judgement is not None else None
        return ToolMessage(
            content=text,
            tool_call_id=str(call.get("id")),
            name=str(call.get("name")),
            status="error",
            artifact={
                "jevqueue": {
                    "executed": False,
                    "action_digest": action.digest if action is not None else None,
                    "verdict": verdict.as_dict() if verdict is not None else None,
                }
            },
        )

    def _judgement_for(self, request: ToolCallRequest) -> _Judgement:
        call = request.tool_call
        plans = _PLANS.get()
        planned = plans.get(str(call.get("id"))) if plans is not None else None
        if planned is not None and (
            planned.action is None
            or (call.get("name") == planned.tool and call.get("args") == planned.arguments)
        ):
            # The call is still the one judged: same name, same arguments (so same digest).
            return planned
        # Standalone interceptor use, or a call changed since it was judged: judge it now;
        # an approval, if needed, is asked for this one call.
        judgement = self._judge(call, self.context_for(request.runtime.config))
        if judgement.approval is not None:
            answer = interrupt(approval_request([judgement.approval]))
            read_approval_answer(answer, [judgement.approval])
        return judgement

    # --- the ToolNode interceptors -------------------------------------------------------

    def wrap_tool_call(self, request: ToolCallRequest, execute: Any) -> Any:
        """Judge the call, then run it through ``execute`` only if the policy allows."""
        standalone = _PLANS.get() is None
        judgement = self._judgement_for(request)
        refusal = self._settle(judgement)
        if refusal is not None:
            return self._refusal_message(request.tool_call, refusal, judgement)
        key = self._replay_key(request, judgement) if standalone else None
        if key is not None:
            done = self._ran.get(key)
            if done is not None:
                return done
        result = execute(_as_judged(request, judgement))
        if key is not None:
            self._ran.remember(key, result)
        return result

    async def awrap_tool_call(self, request: ToolCallRequest, execute: Any) -> Any:
        """The async form of :meth:`wrap_tool_call`."""
        standalone = _PLANS.get() is None
        judgement = self._judgement_for(request)
        refusal = self._settle(judgement)
        if refusal is not None:
            return self._refusal_message(request.tool_call, refusal, judgement)
        key = self._replay_key(request, judgement) if standalone else None
        if key is not None:
            done = self._ran.get(key)
            if done is not None:
                return done
        result = await execute(_as_judged(request, judgement))
        if key is not None:
            self._ran.remember(key, result)
        return result

    @staticmethod
    def _replay_key(request: ToolCallRequest, judgement: _Judgement) -> tuple[str, ...] | None:
        """Identify a call within a thread's run, for interceptors in a ToolNode of your own.

        Such a ToolNode runs the whole batch in one task: a resume after an approval
        interrupt re-runs the calls before the interrupted one. Each call that ran is
        remembered by thread, namespace, call id and digest, and answered from memory
        when the batch comes round again, so it runs at most once (in this process).
        """
        runtime = getattr(request, "runtime", None)
        config = getattr(runtime, "config", None) or {}
        configurable = config.get("configurable") or {}
        thread = configurable.get("thread_id")
        action = judgement.action
        if thread is None or action is None:
            return None  # no checkpointer, so no interrupt and no resume
        namespace = str(configurable.get("checkpoint_ns", ""))
        return (str(thread), namespace, judgement.call_id, action.digest)

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

    def _prepare(
        self, state: Any, config: RunnableConfig | None
    ) -> tuple[dict[str, _Judgement], Any]:
        calls, tool_input = self._pending(state)
        if not calls:
            return {}, None
        context = self.context_for(config)
        ids = [call.get("id") for call in calls]
        if any(not isinstance(i, str) or not i for i in ids) or len(set(ids)) != len(ids):
            # Plans, answers and resumes are matched by id: with a missing or repeated id a
            # call could run twice across an interrupt. Nothing of such a batch runs.
            return {}, self._refuse_batch(calls, context)
        plans = {str(call.get("id")): self._judge(call, context) for call in calls}
        waiting = [j.approval for j in plans.values() if j.approval is not None]
        if waiting:
            # Asked before anything of the batch runs: the resume re-runs this node from
            # the top, and nothing has executed yet that could execute twice.
            read_approval_answer(interrupt(approval_request(waiting)), waiting)
        return plans, tool_input

    def _refuse_batch(self, calls: list[dict[str, Any]], context: ExecutionContext) -> _Refused:
        error = UsageError(
            "a batch of tool calls with a missing or repeated id: each call needs its own id "
            "so that it runs at most once; nothing of the batch was run"
        )
        messages = []
        for call in calls:
            audit_rejection = getattr(self.pep, "audit_rejection", None)
            if callable(audit_rejection):
                audit_rejection(str(call.get("name")), context, error)
            text = f"Rejected before policy evaluation: {error}. Call the tools again."
            messages.append(self._refusal_message(call, text, None))
        return _Refused(messages)

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Judge the pending calls, ask for approvals once, then run the allowed ones."""
        plans, tool_input = self._prepare(input, config)
        if tool_input is None:
            return {self.messages_key: []}
        if isinstance(tool_input, _Refused):
            return {self.messages_key: tool_input.messages}
        token = _PLANS.set(plans)
        try:
            return self.tool_node.invoke(tool_input, config)
        finally:
            _PLANS.reset(token)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """The async form of :meth:`invoke`."""
        plans, tool_input = self._prepare(input, config)
        if tool_input is None:
            return {self.messages_key: []}
        if isinstance(tool_input, _Refused):
            return {self.messages_key: tool_input.messages}
        token = _PLANS.set(plans)
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
    messages_key: str = "messages",
    handle_tool_errors: Any = _TOOLNODE_DEFAULT,
    name: str = "tools",
) -> PolicyToolNode:
    """Build the policy-enforcing tool node.

    Args:
        tools: The LangChain tools to run.
        pep: The :class:`~jevqueue.policy.PolicyEnforcementPoint` that judges every call.
        registry: Deprecated: pass the declarations as ``specs`` (a ToolRegistry is
            accepted there too).
        specs: Declarations to add, one per tool: :func:`tool_spec` builds them.
        context: The default execution context; a run's
            ``config["configurable"]["jevqueue_context"]`` overrides it.
        messages_key: The state key holding the messages.
        handle_tool_errors: Passed to the inner ``ToolNode`` when given (how a tool's own
            exception is handled); LangGraph's default otherwise.
        name: The node's run name.

    Raises:
        ConfigurationError: A tool has no declaration, or ``pep`` is not a PEP.
    """
    return PolicyToolNode(
        tools,
        pep=pep,
        registry=registry,
        specs=specs,
        context=context,
        messages_key=messages_key,
        handle_tool_errors=handle_tool_errors,
        name=name,
    )
