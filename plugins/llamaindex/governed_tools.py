"""Wrapped tools: every call judged by jevqueue's guard before the tool's body runs.

:func:`governed_tools` wraps LlamaIndex tools (or plain functions) in
:class:`GovernedFunctionTool`\\ s with the same metadata, so the model sees the same tools
and an agent dispatches them by the same names. The policy half is one
:class:`~jevqueue.policy.Guard`; this module only speaks LlamaIndex to it. One call:

1. the guard judges the call (:meth:`~jevqueue.policy.Guard.judge`): allowed, refused, or
   pending an approval;
2. a refusal is raised as :class:`~.tool_refused.ToolCallRefusedError`, whose message is
   the guard's; the agent hands it to the model as the tool's error result and the run
   goes on;
3. a pending call is answered by the inline ``approver=`` when one was given (the guard
   asks it, plain or ``async``); otherwise — or when the approver asks to pause,
   ``InboxApprover(pause=True)``, whose request the guard files in the inbox — it pauses
   the workflow LlamaIndex's way: an
   :class:`~.approval_events.ApprovalRequiredEvent` carrying the core
   :class:`~jevqueue.policy.ApprovalRequest` goes to the stream and the step waits for the
   :class:`~.approval_events.ApprovalResponseEvent` with the same digest; the guard then
   judges the records it carries (genuine, fresh, unused, bound to the digest);
4. an allowed call runs through :meth:`~jevqueue.policy.Guard.arun` with the judged
   arguments (path fields as the resolved absolute paths the digest covers), at most once
   per call id.

Each call is judged with what the agent had read when the model made it, read from the
agent's own memory in the workflow's store (:mod:`~.memory_transcript`): the user's
messages and the tool results before the call, each labelled in the call's
:class:`~jevqueue.policy.Provenance`. A run restored from ``ctx.to_dict()`` reads the
same memory, so the call is judged again with the same provenance and digest.

The wait follows LlamaIndex's ``ctx.wait_for_event``: the step is paused and, when the
answer arrives (in this process or another one that resumed from ``ctx.to_dict()``),
replayed from the top. The first judgement leaves a marker in the workflow's store, so a
replay does not judge (nor audit) again. An answer about another action never wakes the
call — also just after ``Context.from_dict``, when LlamaIndex has not yet restored the
waiter's filter: the call keeps waiting for its own answer.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from typing import Any

from jevqueue.errors import (
    ApprovalDeclinedError,
    ApprovalExpiredError,
    ConfigurationError,
    ToolInterruptedError,
)
from jevqueue.plugins.llamaindex._framework import (
    BaseTool,
    FunctionTool,
    ToolOutput,
    adapt_to_async_tool,
)
from jevqueue.plugins.llamaindex.approval_events import (
    ApprovalRequiredEvent,
    ApprovalResponseEvent,
)
from jevqueue.plugins.llamaindex.memory_transcript import HISTORY_KEYS, memory_transcript
from jevqueue.plugins.llamaindex.tool_refused import ToolCallRefusedError
from jevqueue.plugins.llamaindex.tool_spec import as_tool, check_context_annotation
from jevqueue.policy import (
    Approver,
    ExecutionContext,
    Guard,
    Judgement,
    ToolRegistry,
    ToolSpec,
    Transcript,
    canonical_json,
    refusal_message,
)

__all__ = [
    "CONTEXT_PARAMETER",
    "GovernedFunctionTool",
    "ToolPolicy",
    "current_call_id",
    "governed_tools",
]

CONTEXT_PARAMETER = "_jevqueue_ctx"
"""The keyword under which an agent hands a governed tool the workflow ``Context``."""

current_call_id: ContextVar[str | None] = ContextVar("jevqueue_llamaindex_call_id", default=None)
"""The model's id of the call being run; the governed agents' ``call_tool`` step sets it."""

_STORE_PREFIX = "jevqueue_approval_"
_PENDING_LIMIT = 1024


class ToolPolicy:
    """The LlamaIndex side of one :class:`~jevqueue.policy.Guard`, shared by every tool
    :func:`governed_tools` wraps: it judges through the guard and pauses the workflow's way.

    Args:
        guard: The guard (its ``approver``, when set, answers approvals inline).
        approval_timeout: Seconds a paused call waits for its answer (``None``: no limit).

    Attributes:
        history_keys: The workflow store keys where the agent keeps the run in progress
            (a governed agent sets its own ``scratchpad_key`` or ``reasoning_key``).
    """

    def __init__(self, guard: Guard, approval_timeout: float | None = 2000.0) -> None:
        self.guard = guard
        self.approval_timeout = approval_timeout
        self.history_keys: tuple[str, ...] = HISTORY_KEYS
        # Pending judgements of this process, so a decline is settled without judging again.
        self._pending: OrderedDict[str, Judgement] = OrderedDict()

    # --- wrapping -----------------------------------------------------------------------

    def wrap(
        self, tools: Iterable[BaseTool | Callable[..., Any]], *, how: str = ""
    ) -> list[GovernedFunctionTool]:
        """One governed tool per tool; tools this policy already governs are kept.

        Raises:
            ConfigurationError: a tool has no declaration, is governed by another policy,
                or two tools share a name.
        """
        wrapped: list[GovernedFunctionTool] = []
        names: set[str] = set()
        for tool in tools:
            governed = self._governed(tool)
            name = str(governed.metadata.name)
            if name in names:
                raise ConfigurationError(f"two tools are named {name!r}: agents dispatch by name")
            names.add(name)
            wrapped.append(governed)
        self.guard.require_declared(names, how=how)
        return wrapped

    def wrap_retrieved(self, tools: Iterable[Any]) -> list[Any]:
        """Tools a retriever returned, each governed; an undeclared one is refused per call
        by the guard (and audited), since retrieval happens while the agent runs."""
        return [self._governed(tool) for tool in tools]

    def _governed(self, tool: BaseTool | Callable[..., Any]) -> GovernedFunctionTool:
        tool = as_tool(tool)
        if isinstance(tool, GovernedFunctionTool):
            if tool.policy is self:
                return tool
            raise ConfigurationError(
                f"tool {tool.metadata.name!r} is already governed: wrap the original tool once"
            )
        check_context_annotation(tool)
        return GovernedFunctionTool(tool, self)

    # --- judging ------------------------------------------------------------------------

    async def judge(self, tool: str, arguments: Mapping[str, Any], ctx: Any) -> Judgement:
        """Judge one call; pause the workflow for an approval when one is needed.

        With an inline approver that does not pause (``guard.pauses`` is false), or
        outside a workflow (no ``ctx``), the guard asks the approver (or refuses, saying
        how to add one). Raises only what LlamaIndex's wait raises: its pause signal, and
        ``asyncio.TimeoutError`` after ``approval_timeout``.
        """
        call_id = current_call_id.get()
        if not self.guard.pauses or ctx is None:
            transcript = await self._transcript(ctx, call_id)
            if isinstance(transcript, Exception):
                return self._unread(tool, call_id, transcript)
            return await self.guard.acheck(tool, arguments, call_id, transcript=transcript)
        key = _waiter_key(tool, arguments, call_id)
        if key is None:  # not canonical JSON: the guard refuses it before evaluation
            return self.guard.judge(tool, arguments, call_id)
        marker = await ctx.store.get(key, default=None)
        if marker is None:
            transcript = await self._transcript(ctx, call_id)
            if isinstance(transcript, Exception):
                return self._unread(tool, call_id, transcript)
            first = self.guard.judge(tool, arguments, call_id, transcript=transcript)
            if not first.pending or first.request is None:
                return first
            event = ApprovalRequiredEvent.of(first.request)
            marker = {"digest": first.request.action_digest, "event": _fields(event), "strays": 0}
            self._remember(key, first)
            await ctx.store.set(key, marker)
        else:
            # A replayed step waits first, as LlamaIndex restored it, and reads the memory
            # after the answer: nothing may stand between the replay and its wait.
            event = ApprovalRequiredEvent(**marker["event"])
        try:
            answer = await self._wait(ctx, key, marker, event)
        except asyncio.TimeoutError:
            # No answer in time: the agent reports the timeout as the tool's error; a later
            # call is judged afresh.
            self._pending.pop(key, None)
            await ctx.store.set(key, None)
            raise
        await ctx.store.set(key, None)
        transcript = await self._transcript(ctx, call_id)
        if isinstance(transcript, Exception):
            return self._unread(tool, call_id, transcript)
        return self._answered(key, tool, arguments, call_id, answer, transcript)

    async def _transcript(self, ctx: Any, call_id: str | None) -> Transcript | Exception | None:
        """What the agent had read when it made the call (``None`` outside a workflow), or
        why it could not be read."""
        try:
            return await memory_transcript(ctx, self.guard, call_id, self.history_keys)
        except Exception as error:  # fail closed: a call whose origins are unknown does not run
            return error

    def _unread(self, tool: str, call_id: str | None, error: Exception) -> Judgement:
        return self.guard.refuse(
            tool,
            error,
            call_id,
            why="what the agent read could not be read from its memory "
            f"({type(error).__name__}: {error})",
        )

    def judge_now(self, tool: str, arguments: Mapping[str, Any]) -> Judgement:
        """Judge one call synchronously, asking a plain inline approver if one was given."""
        return self.guard.check(tool, arguments, current_call_id.get())

    async def _wait(
        self, ctx: Any, key: str, marker: dict[str, Any], event: ApprovalRequiredEvent
    ) -> ApprovalResponseEvent:
        digest = marker["digest"]
        while True:
            strays = int(marker.get("strays", 0))
            answer = await ctx.wait_for_event(
                ApprovalResponseEvent,
                # The request is shown once; a wait renewed after a stray answer is silent.
                waiter_event=event if strays == 0 else None,
                waiter_id=key if strays == 0 else f"{key}_{strays}",
                requirements={"action_digest": digest},
                timeout=self.approval_timeout,
            )
            if answer.action_digest == digest:
                return answer
            # Only a context just restored with Context.from_dict lets this through: its
            # waiters have lost their filter until the step runs again. Wait on, under a
            # new waiter id (the woken one is spent), counted in the store for the replays.
            marker = {**marker, "strays": strays + 1}
            await ctx.store.set(key, marker)

    def _answered(
        self,
        key: str,
        tool: str,
        arguments: Mapping[str, Any],
        call_id: str | None,
        answer: ApprovalResponseEvent,
        transcript: Transcript | None,
    ) -> Judgement:
        pending = self._pending.pop(key, None)
        records = answer.record_dicts()
        if records:
            # One judgement with the records: the PEP checks and consumes them.
            return self.guard.judge(
                tool, arguments, call_id, records=records, transcript=transcript
            )
        if pending is None:  # paused in another process: judge again to settle the answer
            pending = self.guard.judge(tool, arguments, call_id, transcript=transcript)
            if pending.refused or (pending.allowed and not answer.declined):
                return pending
        if answer.declined:
            refusal = ApprovalExpiredError if answer.expired else ApprovalDeclinedError
            return self.guard.resume(pending, refusal(answer.reason or "no reason given"))
        return self.guard.resume(pending, None)

    def _remember(self, key: str, pending: Judgement) -> None:
        self._pending[key] = pending
        while len(self._pending) > _PENDING_LIMIT:
            self._pending.popitem(last=False)


def _waiter_key(tool: str, arguments: Mapping[str, Any], call_id: str | None) -> str | None:
    try:
        text = canonical_json({"tool": tool, "arguments": dict(arguments), "call": call_id})
    except Exception:
        return None
    return _STORE_PREFIX + hashlib.sha256(text).hexdigest()[:32]


def _fields(event: ApprovalRequiredEvent) -> dict[str, Any]:
    return {name: getattr(event, name) for name in type(event).model_fields}


class GovernedFunctionTool(FunctionTool):
    """A tool whose every call the guard judges before the wrapped tool runs.

    Build them with :func:`governed_tools`. The metadata (name, description, schema,
    ``return_direct``) is the wrapped tool's, so the model sees the same tool.

    Attributes:
        original: The wrapped tool.
        policy: The shared :class:`ToolPolicy` (``policy.guard`` is the guard).
    """

    def __init__(self, original: BaseTool, policy: ToolPolicy) -> None:
        async def guarded(**kwargs: Any) -> Any:  # never called: acall is overridden
            raise AssertionError("unreachable")

        super().__init__(async_fn=guarded, metadata=original.metadata)
        # Set, not inferred from an annotation: under `from __future__ import annotations`
        # a `ctx: Context` annotation is a string, and LlamaIndex would inject nothing.
        self.requires_context = True
        self.ctx_param_name = CONTEXT_PARAMETER
        self.original = original
        self.policy = policy
        self._async_original = adapt_to_async_tool(original)

    @property
    def _name(self) -> str:
        return str(self.metadata.name)

    def _split(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        ctx = kwargs.pop(CONTEXT_PARAMETER, None)
        if args:
            raise ToolCallRefusedError(
                refusal_message(
                    self._name, "a governed tool takes keyword arguments only, not positional"
                ),
                tool=self._name,
            )
        return ctx, kwargs

    def _allowed(self, judgement: Judgement) -> Judgement:
        if not judgement.allowed:
            raise ToolCallRefusedError.of(judgement)
        return judgement

    def _with_context(self, arguments: dict[str, Any], ctx: Any) -> dict[str, Any]:
        original = self.original
        if isinstance(original, FunctionTool) and original.requires_context:
            if ctx is None:
                raise ToolCallRefusedError(
                    refusal_message(
                        self._name,
                        "it needs the workflow Context and was called outside a workflow",
                    ),
                    tool=self._name,
                )
            arguments[original.ctx_param_name] = ctx
        return arguments

    async def acall(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """Judge the call, wait for an approval if one is needed, then run the tool once."""
        ctx, arguments = self._split(args, dict(kwargs))
        judgement = self._allowed(await self.policy.judge(self._name, arguments, ctx))

        async def execute(judged: dict[str, Any]) -> ToolOutput:
            return await self._async_original.acall(**self._with_context(judged, ctx))

        try:
            return await self.policy.guard.arun(judgement, execute)
        except ToolInterruptedError as interrupted:
            # The call's first run was cancelled midway (a run cancelled, then resumed
            # from its context): it may have had its effect, so it does not run again.
            raise ToolCallRefusedError(
                str(interrupted),
                tool=self._name,
                action_digest=judgement.action_digest,
                judgement=judgement,
            ) from None

    def call(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """The synchronous form: a call that needs an approval asks a plain inline
        approver, and is refused without one (no workflow to pause)."""
        ctx, arguments = self._split(args, dict(kwargs))
        judgement = self._allowed(self.policy.judge_now(self._name, arguments))
        return self.policy.guard.run(
            judgement, lambda judged: self.original.call(**self._with_context(judged, ctx))
        )

    def __call__(self, *args: Any, **kwargs: Any) -> ToolOutput:
        return self.call(*args, **kwargs)


def tool_policy(
    *,
    pep: Any,
    specs: Iterable[ToolSpec] | ToolRegistry,
    context: ExecutionContext | Mapping[str, Any],
    approver: Approver | None = None,
    approval_timeout: float | None = 2000.0,
    owner: str = "governed_tools",
) -> ToolPolicy:
    """The :class:`ToolPolicy` over a new guard (the checks of :class:`~jevqueue.policy.Guard`)."""
    guard = Guard(pep, specs=specs, context=context, approver=approver, owner=owner)
    return ToolPolicy(guard, approval_timeout)


def governed_tools(
    tools: Iterable[BaseTool | Callable[..., Any]],
    *,
    pep: Any,
    specs: Iterable[ToolSpec] | ToolRegistry = (),
    context: ExecutionContext | Mapping[str, Any],
    approver: Approver | None = None,
    approval_timeout: float | None = 2000.0,
) -> list[FunctionTool]:
    """Wrap tools so the guard judges every call before the tool's body runs.

    Args:
        tools: LlamaIndex tools (``FunctionTool``, ``QueryEngineTool`` ...) or functions.
        pep: The :class:`~jevqueue.PolicyEnforcementPoint`.
        specs: One declaration per tool (:func:`~.tool_spec.tool_spec` builds them).
        context: The execution context every call is judged in; validated now.
        approver: Answers approvals inline (:class:`~jevqueue.policy.Approver`, plain or
            ``async``). Without one, or with ``InboxApprover(pause=True)`` (which files the
            request in the inbox), a call that needs an approval pauses the workflow with
            an :class:`ApprovalRequiredEvent`; answer it with
            ``ApprovalResponseEvent.of(digest, approver.answer(digest))``.
        approval_timeout: Seconds a paused call waits for its :class:`ApprovalResponseEvent`
            (LlamaIndex's default for ``wait_for_event``; ``None`` waits without limit).

    Returns:
        One :class:`GovernedFunctionTool` per tool, in order, for ``FunctionAgent(tools=...)``.

    Raises:
        ConfigurationError: A tool has no declaration (declare it with ``tool_spec``), is
            already governed, two tools share a name, ``pep`` is not a PEP, or ``approver``
            is not callable.
        InvalidContextError: ``context`` is incomplete or ambient.
    """
    policy = tool_policy(
        pep=pep,
        specs=specs,
        context=context,
        approver=approver,
        approval_timeout=approval_timeout,
    )
    return list(policy.wrap(tools))
