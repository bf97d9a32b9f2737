"""The guard as a Pydantic AI capability: every tool call is judged before it runs.

::

    policy = PolicyCapability(pep=pep, specs=[tool_spec(t, side_effects={"network"}) ...],
                              context=ExecutionContext(...))
    agent = Agent(model, tools=[...], output_type=[str, DeferredToolRequests],
                  capabilities=[policy])

:class:`PolicyCapability` is a thin adapter of :class:`jevqueue.policy.Guard`. Pydantic AI
calls its ``before_tool_execute`` with the validated arguments of each call, right before
the tool function; the guard judges the call, and the capability writes the judgement
back in Pydantic AI's idiom:

* **allowed** — the hook returns the judged arguments (each path field as the resolved
  absolute path the policy judged); its ``wrap_tool_execute`` runs the tool with exactly
  those, through ``guard.arun`` (a call id runs at most once), and refuses a call whose
  arguments another capability changed after the check (list this capability last, so
  that it wraps the tool innermost);
* **refused** — ``ModelRetry`` with the guard's message: the tool does not run, and the
  model reads why as the call's retry prompt (each refusal counts against the tool's
  ``retries``);
* **pending** (an explicit approval is needed) — with ``approver=`` the approver is asked
  inline (plain or ``async``) and the call runs with the records it gives, or is refused
  with the guard's message (no record, a record for another action or already used, a
  decline, an approver that failed). Without an approver — or with one that asks to
  pause, ``InboxApprover(pause=True)``, whose request the guard files in the inbox — the
  call raises ``ApprovalRequired`` carrying the core :class:`~jevqueue.policy.ApprovalRequest`
  as ``request.to_dict()`` in its metadata: the run ends with ``DeferredToolRequests``;
  :meth:`PolicyCapability.approval_requests` gives the request objects, and
  ``deferred_tool_results=approval_results(requests, records)`` resumes the run with
  the records, which the guard checks against that call's own digest (or with a decline:
  ``approval_results(requests, approver.answer(digest))`` carries whatever the inbox's
  reviewers decided, expired included). Pydantic AI's own
  approval (``True``, ``ToolApproved()``) is never enough on its own, and an approved
  call whose arguments were changed (``override_args``) has another digest, so its
  approval does not match.

Each call is judged with what the agent had read when the model made it, read from the
run's own messages (``ctx.messages``, see :mod:`~.message_transcript`): the user's prompts
and the tools' returns before the model response that made the call. The policy knows
which argument came from the user's request and which from an untrusted tool's output, and
the approval request (``request.to_dict()["provenance"]``) says which. A run resumed from
``message_history=`` reads the same messages, so a paused call is judged again with the
same provenance and the record for the digest shown still matches.

Routes around the guard, refused when the agent is built (``ConfigurationError``):

* **an undeclared tool** — every tool the agent has must be declared (``specs=``, see
  :func:`tool_spec`): tools passed to ``Agent(tools=...)`` are checked when the agent is
  built, any other toolset's tools (``@agent.tool`` added later, MCP servers, run-time
  ``toolsets=``) when a run prepares its tools, before the model is called;
* **output functions** — ``output_type=[fn]``, ``ToolOutput(fn)``, ``TextOutput(fn)``,
  ``NativeOutput(fn)``, ``PromptedOutput(fn)``: Pydantic AI runs them through its output
  hooks, never through ``before_tool_execute``, so the guard could not judge them. They
  are refused outright on a governed agent, whether declared or not; one given at run
  time (``agent.run(output_type=...)``) is refused before it runs. Make such a function
  a declared tool the model calls, and give the agent a plain output type.

Not routes of the agent: provider-side native tools (web search, code execution in the
provider's sandbox) run on the provider, not here, and are not judged; external tools
(``ExternalToolset``, ``kind="external"``) are never run by the agent but by your code —
judge each with :meth:`PolicyCapability.judge` and run ``judgement.run_arguments()``.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from jevqueue.errors import (
    ApprovalDeclinedError,
    ApprovalExpiredError,
    ApprovalRequiredError,
    ConfigurationError,
)
from jevqueue.plugins.pydantic_ai._framework import (
    AbstractCapability,
    ApprovalRequired,
    DeferredToolRequests,
    DeferredToolResults,
    FunctionToolset,
    ModelRetry,
    NativeOutput,
    OutputContext,
    PromptedOutput,
    RunContext,
    TextOutput,
    ToolApproved,
    ToolCallPart,
    ToolDefinition,
    ToolOutput,
)
from jevqueue.plugins.pydantic_ai.message_transcript import message_transcript
from jevqueue.policy import (
    ApprovalAnswer,
    ApprovalRequest,
    Approver,
    ExecutionContext,
    Guard,
    Judgement,
    ToolSpec,
    approval_records,
    refusal_message,
)
from jevqueue.policy._approval_request import deprecated_approver

__all__ = [
    "APPROVALS_METADATA_KEY",
    "DECLINED_METADATA_KEY",
    "ApprovalRequest",
    "Judgement",
    "PolicyCapability",
    "approval_results",
]

APPROVALS_METADATA_KEY = "jevqueue_approvals"
"""The key of ``DeferredToolResults.metadata[call_id]`` that carries approval records."""

DECLINED_METADATA_KEY = "jevqueue_declined"
"""The key of ``DeferredToolResults.metadata[call_id]`` that carries a decline: its
``reason``, and ``expired`` when nobody decided in time."""

_HOW = " to PolicyCapability for every tool the agent has"


class PolicyCapability(AbstractCapability[Any]):
    """Judges every tool call of a Pydantic AI agent with the guard before it runs.

    Args:
        pep: The policy enforcement point (it audits every decision).
        specs: One declaration per tool (:func:`~jevqueue.plugins.pydantic_ai.tool_spec`).
        context: The execution context (an ``ExecutionContext`` or a mapping of its
            fields); validated now, so a bad context fails here.
        approver: Who approves inline (:class:`~jevqueue.policy.Approver`, plain or
            ``async``): shown the core :class:`~jevqueue.policy.ApprovalRequest` of each
            call that needs an approval, it returns ``ApprovalRecord`` s (the guard checks
            them), ``None`` (the call is refused), or raises
            :class:`~jevqueue.errors.ApprovalDeclinedError` to decline with a reason.
            Without one, or with ``InboxApprover(pause=True)`` (which files the request in
            the inbox), such a call pauses the run with ``DeferredToolRequests``.
        approvals: Deprecated name of ``approver``.

    Attributes:
        guard: The :class:`~jevqueue.policy.Guard` that judges, approves and runs.

    Raises:
        ConfigurationError: ``pep`` has no ``enforce`` method, a spec is not a ToolSpec,
            or the approver is not callable.
        InvalidContextError: ``context`` is incomplete or ambient.
    """

    def __init__(
        self,
        *,
        pep: Any,
        specs: Iterable[ToolSpec],
        context: ExecutionContext | Mapping[str, Any],
        approver: Approver | None = None,
        approvals: Approver | None = None,
    ) -> None:
        super().__init__()
        approver = deprecated_approver(approver, "PolicyCapability", approvals=approvals)
        self.guard = Guard(
            pep, specs=specs, context=context, approver=approver, owner="PolicyCapability"
        )
        # The judgement of each allowed call, by call id, until the call runs.
        self._judged: dict[str, Judgement] = {}

    @property
    def pep(self) -> Any:
        """The policy enforcement point."""
        return self.guard.pep

    @property
    def registry(self) -> Any:
        """The tools' declarations."""
        return self.guard.registry

    @property
    def context(self) -> ExecutionContext:
        """The execution context."""
        return self.guard.context

    @property
    def approver(self) -> Approver | None:
        """The inline approver, if any."""
        return self.guard.approver

    # --- routes around the guard, refused when the agent is built --------------------

    def for_agent(self, agent: Any) -> PolicyCapability:
        """Refuse undeclared function tools and output functions when the agent is built."""
        self.guard.require_declared(
            [
                name
                for toolset in getattr(agent, "toolsets", ())
                if isinstance(toolset, FunctionToolset)
                for name in toolset.tools
            ],
            how=_HOW,
        )
        functions = _output_functions(getattr(agent, "output_type", None))
        if functions:
            raise ConfigurationError(_output_function_refusal(functions))
        return self

    async def prepare_tools(
        self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]
    ) -> list[ToolDefinition]:
        """Refuse, before the model is called, a tool of any toolset without a declaration."""
        self.guard.require_declared([tool.name for tool in tool_defs], how=_HOW)
        return tool_defs

    async def wrap_output_process(
        self, ctx: RunContext[Any], *, output_context: OutputContext, output: Any, handler: Any
    ) -> Any:
        """Refuse, before it runs, an output function given at run time."""
        if output_context.has_function:
            raise ConfigurationError(
                _output_function_refusal([output_context.function_name or "<output function>"])
            )
        return await handler(output)

    # --- the check ------------------------------------------------------------------

    async def before_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
    ) -> dict[str, Any]:
        """Judge the call: return the judged arguments, or refuse / pause it."""
        name, call_id = call.tool_name, call.tool_call_id
        try:
            read = message_transcript(self.guard, ctx.messages, call_id)
        except Exception as error:  # fail closed: a call whose origins are unknown does not run
            raise ModelRetry(
                self.guard.refuse(
                    name,
                    error,
                    call_id,
                    why="what the agent read could not be read from the run's messages "
                    f"({type(error).__name__}: {error})",
                ).message
            ) from None
        declined = _declined(ctx.tool_call_metadata) if ctx.tool_call_approved else None
        records = _records(ctx.tool_call_metadata) if ctx.tool_call_approved else None
        if declined is not None:  # resumed with approval_results(requests, a decline)
            judgement = self._declined(name, args, call_id, read, declined)
        elif records is not None:  # resumed with approval_results
            judgement = self.guard.judge(name, args, call_id, records=records, transcript=read)
        elif self.guard.pauses:
            judgement = self.guard.judge(name, args, call_id, transcript=read)
        else:
            judgement = await self.guard.acheck(name, args, call_id, transcript=read)
        if judgement.pending:
            if ctx.tool_call_approved:  # approved without a record: nothing to verify
                raise ModelRetry(refusal_message(name, _unsigned(records, judgement)))
            assert judgement.request is not None
            raise ApprovalRequired(metadata=judgement.request.to_dict())
        if not judgement.allowed:
            raise ModelRetry(judgement.message)
        self._judged[call_id] = judgement
        return judgement.run_arguments()

    def _declined(
        self,
        name: str,
        args: dict[str, Any],
        call_id: str,
        read: Any,
        declined: ApprovalDeclinedError,
    ) -> Judgement:
        """The paused call judged again and settled with the decline it was resumed with."""
        first = self.guard.judge(name, args, call_id, transcript=read)
        if first.pending:
            return self.guard.resume(first, declined)
        if first.allowed:  # the policy no longer asks: the decline still holds
            return self.guard.refuse(
                name, declined, call_id, why=f"the approver declined: {declined}"
            )
        return first

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        handler: Any,
    ) -> Any:
        """Run the call only as it was judged: same tool, same arguments, once."""
        judgement = self._judged.pop(call.tool_call_id, None)
        if (
            judgement is None
            or judgement.tool != call.tool_name
            or args != dict(judgement.arguments)
        ):
            raise ModelRetry(
                refusal_message(
                    call.tool_name,
                    "it was not the call the policy judged (its arguments changed after the "
                    "check, or it was never checked)",
                )
            )
        return await self.guard.arun(judgement, handler)

    def judge(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        call_id: str | None = None,
        *,
        records: Sequence[Any] = (),
        messages: Sequence[Any] | None = None,
    ) -> Judgement:
        """Judge one call once (``guard.judge``), for callers who run tools themselves.

        ``messages`` are the run's messages (``result.all_messages()``): the call is judged
        with what the model had read before the response that made ``call_id``. Never
        raises an ``Exception``. Run an allowed call with ``judgement.run_arguments()``.
        """
        if messages is None:
            return self.guard.judge(tool, arguments, call_id, records=records)
        try:
            read = message_transcript(self.guard, messages, call_id)
        except Exception as error:  # fail closed
            return self.guard.refuse(tool, error, call_id)
        return self.guard.judge(tool, arguments, call_id, records=records, transcript=read)

    def approval_requests(self, requests: DeferredToolRequests) -> list[ApprovalRequest]:
        """The core approval request of each call of a paused run that this guard paused.

        ``requests.metadata[call_id]`` holds the same request as ``request.to_dict()``.
        """
        waiting = {call.tool_call_id for call in requests.approvals}
        found: dict[str, ApprovalRequest] = {}
        for judgement in reversed(self.guard.judgements):
            if (
                judgement.pending
                and judgement.request is not None
                and judgement.call_id in waiting
                and judgement.call_id not in found
            ):
                found[judgement.call_id] = judgement.request
        return [
            found[call.tool_call_id] for call in requests.approvals if call.tool_call_id in found
        ]


def _output_functions(spec: Any) -> list[str]:
    """The names of the functions Pydantic AI would call on the run's output."""
    if spec is None or isinstance(spec, (str, bytes)):
        return []
    if isinstance(spec, Sequence):
        return [name for item in spec for name in _output_functions(item)]
    if isinstance(spec, ToolOutput):
        return _output_functions(spec.output)
    if isinstance(spec, (NativeOutput, PromptedOutput)):
        return _output_functions(spec.outputs)
    if isinstance(spec, TextOutput):
        return [getattr(spec.output_function, "__name__", repr(spec.output_function))]
    if inspect.isfunction(spec) or inspect.ismethod(spec):
        return [spec.__name__]
    return []


def _output_function_refusal(names: Sequence[str]) -> str:
    return (
        f"PolicyCapability: output functions {sorted(set(names))} would run on the model's "
        "output without the policy judging them (Pydantic AI calls them outside "
        "before_tool_execute): make each a declared tool the model calls "
        "(Agent(tools=[Tool(fn)]) with specs=[tool_spec(Tool(fn), side_effects=...)]) and give "
        "the agent a plain output type (str, a model class, DeferredToolRequests)"
    )


def _records(metadata: Any) -> tuple[Any, ...] | None:
    """The records ``approval_results`` handed to a call; ``None`` when it handed none."""
    if not isinstance(metadata, Mapping) or APPROVALS_METADATA_KEY not in metadata:
        return None
    return tuple(metadata[APPROVALS_METADATA_KEY] or ())


def _declined(metadata: Any) -> ApprovalDeclinedError | None:
    """The decline ``approval_results`` handed to a call; ``None`` when it handed none."""
    if not isinstance(metadata, Mapping) or not isinstance(
        metadata.get(DECLINED_METADATA_KEY), Mapping
    ):
        return None
    given = metadata[DECLINED_METADATA_KEY]
    reason = str(given.get("reason") or "no reason given")
    return (
        ApprovalExpiredError(reason)
        if given.get("expired") is True
        else (ApprovalDeclinedError(reason))
    )


def _unsigned(records: tuple[Any, ...] | None, judgement: Judgement) -> str:
    how = (
        f"pass a signed approval record for action {judgement.action_digest} with "
        "deferred_tool_results=approval_results(requests, records)"
    )
    if records is None:
        return f"Pydantic AI's own approval (True, ToolApproved()) is not enough: {how}"
    return f"the approval gave no record: {how}"


def approval_results(
    requests: DeferredToolRequests, records: ApprovalAnswer | ApprovalDeclinedError
) -> DeferredToolResults:
    """The ``deferred_tool_results`` that resume a paused run with approval records.

    Every call awaiting approval is marked approved and handed all ``records``; the guard
    then lets a call run only with a fresh, unused record bound to that call's own action
    digest, so a record for another action authorises nothing. An
    :class:`~jevqueue.errors.ApprovalDeclinedError` (what ``InboxApprover.answer(digest)``
    returns for a denied or withdrawn request; an
    :class:`~jevqueue.errors.ApprovalExpiredError` for an expired one) is handed instead:
    the guard refuses each call with it, and the model reads why.

    Args:
        requests: The ``DeferredToolRequests`` the paused run ended with.
        records: What the approver answered: ``ApprovalRecord`` (s) from a trusted approver
            (or the dicts ``jevqueue approve`` prints) — ``requests.metadata[call_id]
            ["action_digest"]`` is the digest each must be bound to — ``None``, or a
            declined error.

    Raises:
        ConfigurationError: ``records`` is not approval records.
    """
    handed: dict[str, Any]
    if isinstance(records, ApprovalRequiredError):
        handed = {
            DECLINED_METADATA_KEY: {
                "reason": str(records),
                "expired": isinstance(records, ApprovalExpiredError),
            }
        }
    else:
        handed = {APPROVALS_METADATA_KEY: approval_records(records)}
    approvals: dict[str, Any] = {}
    metadata: dict[str, dict[str, Any]] = {}
    for call in requests.approvals:
        approvals[call.tool_call_id] = ToolApproved()
        metadata[call.tool_call_id] = dict(handed)
    return DeferredToolResults(approvals=approvals, metadata=metadata)
