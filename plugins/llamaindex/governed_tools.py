"""Wrapped tools: every call judged by the PEP before the tool's body runs.

:func:`governed_tools` wraps LlamaIndex tools (or plain functions) in
:class:`GovernedFunctionTool`\\ s with the same metadata, so the model sees the same tools
and an agent dispatches them by the same names. One call:

1. builds the canonical :class:`~jevqueue.policy.Action` from a private copy of the
   arguments (fail closed: an unregistered tool or a non-canonical argument is refused
   before evaluation, and the refusal is audited);
2. asks the PEP (audited); an ALLOW runs the tool, a DENY or REPAIR raises
   :class:`~.tool_refused.ToolCallRefusedError`, which the agent hands to the model as
   the tool's error result — the run goes on;
3. on an ``explicit_approval`` obligation, writes an
   :class:`~.approval_events.ApprovalRequiredEvent` to the stream and waits for the
   :class:`~.approval_events.ApprovalResponseEvent` with the same digest; the PEP then
   checks the record (genuine, fresh, unused, bound to the digest — and it is consumed).

The wait follows LlamaIndex's ``ctx.wait_for_event``: the step is paused and, when the
answer arrives (in this process or another one that resumed from ``ctx.to_dict()``),
replayed from the top. The first evaluation leaves a marker in the workflow's store, so
a replay does not evaluate (nor audit) again, and the tool body runs only once, after
the approval. The tool runs with the judged copy of the arguments, path fields replaced
by the resolved absolute paths the digest covers.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from jevqueue.approvals import EXPLICIT_APPROVAL
from jevqueue.errors import (
    ConfigurationError,
    InvalidApprovalError,
    JevError,
    PolicyDeniedError,
    UnfulfilledObligationError,
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
from jevqueue.plugins.llamaindex.tool_refused import ToolCallRefusedError
from jevqueue.plugins.llamaindex.tool_spec import as_tool, check_context_annotation
from jevqueue.policy import (
    Action,
    ExecutionContext,
    ToolRegistry,
    ToolSpec,
    Verdict,
    VerdictKind,
    registry_from_specs,
)

__all__ = ["CONTEXT_PARAMETER", "GovernedFunctionTool", "ToolPolicy", "governed_tools"]

CONTEXT_PARAMETER = "_jevqueue_ctx"
"""The keyword under which an agent hands a governed tool the workflow ``Context``."""

_STORE_PREFIX = "jevqueue_approval_"


def _reasons(verdict: Verdict | None) -> str:
    if verdict is None or not verdict.reasons:
        return "no reason given"
    return "; ".join(verdict.reasons)


def _needs_approval(verdict: Verdict) -> bool:
    return (
        verdict.kind is VerdictKind.ALLOW_WITH_OBLIGATIONS
        and EXPLICIT_APPROVAL in verdict.obligations
    )


class ToolPolicy:
    """The fail-closed check shared by every tool :func:`governed_tools` wraps.

    Args:
        pep: The policy enforcement point (it audits every decision).
        registry: The tools' declarations.
        context: The execution context every call is judged in.
        approval_timeout: Seconds a call waits for its approval (``None``: no limit).
    """

    def __init__(
        self,
        pep: Any,
        registry: ToolRegistry,
        context: ExecutionContext,
        approval_timeout: float | None,
    ) -> None:
        self.pep = pep
        self.registry = registry
        self.context = context
        self.approval_timeout = approval_timeout

    def _refused(
        self, message: str, tool: str, action: Action | None = None, **extra: Any
    ) -> ToolCallRefusedError:
        return ToolCallRefusedError(
            message, tool=tool, action_digest=action.digest if action is not None else None, **extra
        )

    def action(self, tool: str, arguments: Mapping[str, Any]) -> Action:
        """The canonical action of one call, or the refusal (audited) when it cannot be built."""
        try:
            return Action.build(self.registry, tool, copy.deepcopy(dict(arguments)), self.context)
        except JevError as error:
            audit = getattr(self.pep, "audit_rejection", None)
            if callable(audit):
                audit(tool, self.context, error)
            raise self._refused(
                f"Rejected before policy evaluation: {error}. The call to {tool} was not executed.",
                tool,
            ) from None

    def refusal(self, action: Action, verdict: Verdict) -> ToolCallRefusedError:
        """The error for a verdict that does not let the call run."""
        if verdict.kind is VerdictKind.REPAIR:
            repaired = verdict.repaired or {}
            return self._refused(
                f"Not executed as proposed ({_reasons(verdict)}). The policy suggests calling "
                f"{repaired.get('tool')} with "
                f"{json.dumps(dict(repaired.get('arguments') or {}), sort_keys=True)} instead; "
                "make that call if it still does what the user asked.",
                action.tool,
                action,
                verdict=verdict,
            )
        if verdict.kind is VerdictKind.DENY:
            return self._refused(
                f"Denied by policy: {_reasons(verdict)}. The call to {action.tool} was not "
                "executed; do not retry it unchanged.",
                action.tool,
                action,
                verdict=verdict,
            )
        return self._refused(
            f"Not executed: {action.tool} needs {list(verdict.obligations)} and it was not "
            f"fulfilled ({_reasons(verdict)}). Action {action.digest}.",
            action.tool,
            action,
            verdict=verdict,
        )

    def settle(self, action: Action, records: tuple[Any, ...]) -> Verdict:
        """``enforce`` with the offered records; the refusal when the call may not run."""
        try:
            verdict = self.pep.enforce(action, records)
        except (PolicyDeniedError, UnfulfilledObligationError) as error:
            raise self.refusal(action, error.verdict) from None
        if not verdict.allowed:
            raise self.refusal(action, verdict)
        return verdict

    async def judge(self, tool: str, arguments: Mapping[str, Any], ctx: Any) -> Action:
        """Judge one call; return its action when it may run, else raise the refusal.

        Waits for an approval through ``ctx`` when the policy asks for one.
        """
        action = self.action(tool, arguments)
        key = _STORE_PREFIX + action.digest.removeprefix("sha256:")
        pending = await ctx.store.get(key, default=None) if ctx is not None else None
        if pending is None:
            verdict = self.pep.evaluate(action)
            if verdict.allowed:
                return action
            if not _needs_approval(verdict):
                raise self.refusal(action, verdict)
            if ctx is None:
                raise self._refused(
                    f"Not executed: {tool} needs an explicit approval of action "
                    f"{action.digest}, and it was called outside a workflow, where no approval "
                    "can be asked for. Run it through an agent (agent.run(...)).",
                    tool,
                    action,
                    verdict=verdict,
                    approval_requested=False,
                )
            # The first evaluation is audited once; the replays of this step read the marker.
            pending = verdict.as_dict()
            await ctx.store.set(key, pending)
        answer = await ctx.wait_for_event(
            ApprovalResponseEvent,
            waiter_event=ApprovalRequiredEvent.for_action(action, pending),
            waiter_id=key,
            requirements={"action_digest": action.digest},
            timeout=self.approval_timeout,
        )
        await ctx.store.set(key, None)
        if answer.declined:
            why = f": {answer.reason}" if answer.reason else ""
            raise self._refused(
                f"Not executed: {tool} needed an explicit approval and the approver declined "
                f"it{why} (action {action.digest}). Do not retry it unchanged.",
                tool,
                action,
                approval_requested=True,
            )
        try:
            records = answer.approval_records()
        except InvalidApprovalError as error:
            raise self._refused(
                f"Not executed: the approval answer could not be read ({error}).",
                tool,
                action,
                approval_requested=True,
            ) from None
        self.settle(action, records)
        return action

    def judge_now(self, tool: str, arguments: Mapping[str, Any]) -> Action:
        """Judge one call synchronously; a call that needs an approval is refused."""
        action = self.action(tool, arguments)
        verdict = self.pep.evaluate(action)
        if verdict.allowed:
            return action
        if _needs_approval(verdict):
            raise self._refused(
                f"Not executed: {tool} needs an explicit approval of action {action.digest}; "
                "a synchronous call cannot wait for one. Run it through an agent's workflow.",
                tool,
                action,
                verdict=verdict,
            )
        raise self.refusal(action, verdict)


def run_arguments(action: Action) -> dict[str, Any]:
    """The arguments the tool runs with: the judged copy, path fields as resolved."""
    arguments = copy.deepcopy(dict(action.arguments))
    for field, target in zip(action.target_fields, action.targets, strict=True):
        arguments[field] = target
    if action.cwd is not None and action.spec is not None and action.spec.cwd_field:
        arguments[action.spec.cwd_field] = action.cwd
    return arguments


class GovernedFunctionTool(FunctionTool):
    """A tool whose every call the PEP judges before the wrapped tool runs.

    Build them with :func:`governed_tools`. The metadata (name, description, schema,
    ``return_direct``) is the wrapped tool's, so the model sees the same tool.

    Attributes:
        original: The wrapped tool.
        policy: The shared check.
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

    def _split(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        ctx = kwargs.pop(CONTEXT_PARAMETER, None)
        if args:
            raise self.policy._refused(
                f"Rejected: {self.metadata.name} was called with positional arguments; a "
                "governed tool takes keyword arguments only. It was not executed.",
                str(self.metadata.name),
            )
        return ctx, kwargs

    def _original_kwargs(self, action: Action, ctx: Any) -> dict[str, Any]:
        arguments = run_arguments(action)
        original = self.original
        if isinstance(original, FunctionTool) and original.requires_context:
            if ctx is None:
                raise self.policy._refused(
                    f"{self.metadata.name} needs the workflow Context and was called outside "
                    "a workflow; it was not executed.",
                    str(self.metadata.name),
                    action,
                )
            arguments[original.ctx_param_name] = ctx
        return arguments

    async def acall(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """Judge the call, wait for an approval if one is needed, then run the tool once."""
        ctx, arguments = self._split(args, dict(kwargs))
        action = await self.policy.judge(str(self.metadata.name), arguments, ctx)
        return await self._async_original.acall(**self._original_kwargs(action, ctx))

    def call(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """The synchronous form; a call that needs an approval is refused."""
        ctx, arguments = self._split(args, dict(kwargs))
        action = self.policy.judge_now(str(self.metadata.name), arguments)
        return self.original.call(**self._original_kwargs(action, ctx))

    def __call__(self, *args: Any, **kwargs: Any) -> ToolOutput:
        return self.call(*args, **kwargs)


def governed_tools(
    tools: Iterable[BaseTool | Callable[..., Any]],
    *,
    pep: Any,
    specs: Iterable[ToolSpec] | ToolRegistry = (),
    context: ExecutionContext | Mapping[str, Any],
    approval_timeout: float | None = 2000.0,
) -> list[FunctionTool]:
    """Wrap tools so the PEP judges every call before the tool's body runs.

    Args:
        tools: LlamaIndex tools (``FunctionTool``, ``QueryEngineTool`` ...) or functions.
        pep: The :class:`~jevqueue.PolicyEnforcementPoint`.
        specs: One declaration per tool (:func:`~.tool_spec.tool_spec` builds them).
        context: The execution context every call is judged in; validated now.
        approval_timeout: Seconds a call waits for its :class:`ApprovalResponseEvent`
            (LlamaIndex's default for ``wait_for_event``; ``None`` waits without limit).

    Returns:
        One :class:`GovernedFunctionTool` per tool, in order, for ``FunctionAgent(tools=...)``.

    Raises:
        ConfigurationError: A tool has no declaration (declare it with ``tool_spec``), is
            already governed, two tools share a name, or ``pep`` is not a PEP.
        InvalidContextError: ``context`` is incomplete or ambient.
    """
    if not callable(getattr(pep, "evaluate", None)) or not callable(getattr(pep, "enforce", None)):
        raise ConfigurationError(
            f"pep must be a jevqueue PolicyEnforcementPoint, not {type(pep).__name__}"
        )
    context = ExecutionContext.coerce(context)
    registry = registry_from_specs(specs, owner="governed_tools")
    policy = ToolPolicy(pep, registry, context, approval_timeout)
    wrapped: list[FunctionTool] = []
    names: set[str] = set()
    missing: list[str] = []
    for tool in tools:
        tool = as_tool(tool)
        if isinstance(tool, GovernedFunctionTool):
            raise ConfigurationError(
                f"tool {tool.metadata.name!r} is already governed: wrap the original tool once"
            )
        check_context_annotation(tool)
        name = str(tool.metadata.name)
        if name in names:
            raise ConfigurationError(f"two tools are named {name!r}: agents dispatch by name")
        names.add(name)
        if name not in registry:
            missing.append(name)
            continue
        wrapped.append(GovernedFunctionTool(tool, policy))
    if missing:
        raise ConfigurationError(
            f"tools {missing} are not registered: declare each once with "
            "tool_spec(tool, side_effects=..., path_fields=...) and pass specs=[...]; an "
            "undeclared tool can never run"
        )
    return wrapped
