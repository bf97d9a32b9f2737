"""The PEP as a Pydantic AI capability: every tool call is judged before it runs.

::

    policy = PolicyCapability(pep=pep, specs=[tool_spec(t, side_effects={"network"}) ...],
                              context=ExecutionContext(...))
    agent = Agent(model, tools=[...], output_type=[str, DeferredToolRequests],
                  capabilities=[policy])

:class:`PolicyCapability` hooks ``before_tool_execute``, which Pydantic AI calls with the
validated arguments of each call, right before the tool function. For one call it builds
the canonical :class:`~jevqueue.policy.Action` (an unregistered tool or non-canonical
arguments is refused before evaluation), asks the PEP (audited) and then:

* **allow** — returns a private copy of the judged arguments; its ``wrap_tool_execute``
  then hands the tool function another copy of exactly those, and refuses a call whose
  arguments something changed after the check (list this capability last, so that it
  wraps the tool innermost);
* **deny**, **repair**, or any failure inside the check — raises ``ModelRetry`` with the
  reason: the tool does not run, and the model reads the denial as the call's retry
  prompt (each denial counts against the tool's ``retries``);
* **explicit approval needed** — raises ``ApprovalRequired`` with the action digest in
  its metadata (``{"action_digest", "tool", "reasons"}``): the run ends with
  ``DeferredToolRequests``. Resume with ``deferred_tool_results=approval_results(
  requests, records)``, which hands the :class:`~jevqueue.ApprovalRecord` s to the call;
  the PEP checks they are bound to that call's digest. Pydantic AI's own approval
  (``True``, ``ToolApproved()``) is never enough on its own, and an approved call whose
  arguments were changed (``override_args``) has another digest, so its approval does
  not match. With ``approvals=callable`` the capability asks inline instead
  (``handle_deferred_tool_calls``): the run goes on with the records the callable returns,
  or pauses as above when it returns none.

Every tool the agent has must be declared (``specs=``, see :func:`tool_spec`): tools
passed to ``Agent(tools=...)`` are checked when the agent is built, any other toolset's
tools when a run prepares its tools, before the model is called; an undeclared tool is a
``ConfigurationError``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jevqueue.approvals import ApprovalRecord
from jevqueue.errors import (
    ConfigurationError,
    JevError,
    PolicyDeniedError,
    UnfulfilledObligationError,
)
from jevqueue.plugins.pydantic_ai._framework import (
    AbstractCapability,
    ApprovalRequired,
    DeferredToolRequests,
    DeferredToolResults,
    FunctionToolset,
    ModelRetry,
    RunContext,
    ToolApproved,
    ToolCallPart,
    ToolDefinition,
)
from jevqueue.policy import (
    Action,
    ExecutionContext,
    ToolSpec,
    VerdictKind,
    registry_from_specs,
)

__all__ = [
    "APPROVALS_METADATA_KEY",
    "ApprovalRequest",
    "Judgement",
    "PolicyCapability",
    "approval_results",
]

APPROVALS_METADATA_KEY = "jevqueue_approvals"
"""The key of ``DeferredToolResults.metadata[call_id]`` that carries approval records."""


def _undeclared_message(names: Sequence[str]) -> str:
    return (
        f"tools {sorted(names)} have no policy declaration: pass specs=[tool_spec(tool, "
        "side_effects=...), ...] to PolicyCapability for every tool the agent has"
    )


@dataclass(frozen=True)
class Judgement:
    """What the check decided for one call: run it, ask for an approval, or refuse it.

    Attributes:
        arguments: The judged arguments to run the call with (a private copy), when allowed.
        ask: The approval request's metadata (``action_digest``, ``tool``, ``reasons``),
            when the call needs an explicit approval.
        refusal: What the model is told, when the call is refused.
    """

    arguments: dict[str, Any] | None = None
    ask: dict[str, Any] | None = None
    refusal: str | None = None


class PolicyCapability(AbstractCapability[Any]):
    """Judges every tool call of a Pydantic AI agent with the PEP before it runs.

    Args:
        pep: The policy enforcement point (it audits every decision).
        specs: One declaration per tool (:func:`~jevqueue.plugins.pydantic_ai.tool_spec`).
        context: The execution context (an ``ExecutionContext`` or a mapping of its
            fields); validated now, so a bad context fails here.
        approvals: Who approves inline: called with an :class:`ApprovalRequest` for each
            call awaiting approval, it returns ``ApprovalRecord`` s (the run goes on, and
            the PEP checks them) or ``None`` (the run pauses with ``DeferredToolRequests``,
            as without a callback).

    Raises:
        ConfigurationError: ``pep`` has no ``enforce`` method, or a spec is not a ToolSpec.
        InvalidContextError: ``context`` is incomplete or ambient.
    """

    def __init__(
        self,
        *,
        pep: Any,
        specs: Iterable[ToolSpec],
        context: ExecutionContext | Mapping[str, Any],
        approvals: Callable[[ApprovalRequest], Any] | None = None,
    ) -> None:
        super().__init__()
        if not callable(getattr(pep, "enforce", None)):
            raise ConfigurationError(
                "PolicyCapability needs a PolicyEnforcementPoint (an object with "
                f"enforce(action, approval_records)); got {type(pep).__name__}"
            )
        self.pep = pep
        self.registry = registry_from_specs(specs, owner=type(self).__name__)
        self.context = ExecutionContext.coerce(context)
        self.approvals = approvals
        # The judged arguments of each allowed call, by call id, until the call runs.
        self._judged: dict[str, tuple[str, dict[str, Any]]] = {}

    # --- declarations ---------------------------------------------------------------

    def for_agent(self, agent: Any) -> PolicyCapability:
        """Refuse, when the agent is built, any of its function tools without a declaration."""
        names = [
            name
            for toolset in getattr(agent, "toolsets", ())
            if isinstance(toolset, FunctionToolset)
            for name in toolset.tools
        ]
        undeclared = [name for name in names if name not in self.registry]
        if undeclared:
            raise ConfigurationError(_undeclared_message(undeclared))
        return self

    async def prepare_tools(
        self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]
    ) -> list[ToolDefinition]:
        """Refuse, before the model is called, a tool of any toolset without a declaration."""
        undeclared = [tool.name for tool in tool_defs if tool.name not in self.registry]
        if undeclared:
            raise ConfigurationError(_undeclared_message(undeclared))
        return tool_defs

    # --- inline approvals -------------------------------------------------------------

    async def handle_deferred_tool_calls(
        self, ctx: RunContext[Any], *, requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        """Ask the ``approvals`` callback for records for each call this capability paused."""
        if self.approvals is None:
            return None
        approvals: dict[str, Any] = {}
        metadata: dict[str, dict[str, Any]] = {}
        for call in requests.approvals:
            asked = requests.metadata.get(call.tool_call_id) or {}
            digest = asked.get("action_digest")
            if not isinstance(digest, str):
                continue  # paused by something else: not ours to answer
            action = Action.build(self.registry, call.tool_name, call.args_as_dict(), self.context)
            if action.digest != digest:
                continue  # not the call that was judged: leave it paused
            request = ApprovalRequest(action=action, reasons=tuple(asked.get("reasons") or ()))
            records = _answer(self.approvals(request))
            if records:
                approvals[call.tool_call_id] = ToolApproved()
                metadata[call.tool_call_id] = {APPROVALS_METADATA_KEY: records}
        if not approvals:
            return None
        return DeferredToolResults(approvals=approvals, metadata=metadata)

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
        judgement = self.judge(
            call.tool_name,
            args,
            approved=bool(ctx.tool_call_approved),
            records=_records(ctx.tool_call_metadata) if ctx.tool_call_approved else (),
        )
        if judgement.ask is not None:
            raise ApprovalRequired(metadata=judgement.ask)
        if judgement.refusal is not None:
            raise ModelRetry(judgement.refusal)
        assert judgement.arguments is not None
        self._judged[call.tool_call_id] = (call.tool_name, judgement.arguments)
        return copy.deepcopy(judgement.arguments)

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        handler: Callable[[dict[str, Any]], Any],
    ) -> Any:
        """Run the call only as it was judged: same tool, same arguments, once."""
        judged = self._judged.pop(call.tool_call_id, None)
        if judged is None or judged[0] != call.tool_name or judged[1] != args:
            raise ModelRetry(
                f"jevqueue denied the call to {call.tool_name!r}: it was not the call the "
                "policy judged (its arguments changed after the check, or it was never "
                "checked); the call was not run"
            )
        return await handler(copy.deepcopy(judged[1]))

    def judge(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        approved: bool = False,
        records: Sequence[ApprovalRecord] = (),
    ) -> Judgement:
        """Decide one call. Never raises an ``Exception``: a failed check is a refusal.

        Args:
            tool: The tool's name.
            arguments: The validated arguments it would run with.
            approved: True on the resumed run after an approval was given.
            records: The approval records handed to this call.
        """
        try:
            return self._judge(tool, arguments, approved, records)
        except Exception as exc:  # fail closed: a failed check is a denial
            return Judgement(
                refusal=(
                    f"jevqueue denied the call to {tool!r}: the policy check could not complete "
                    f"({type(exc).__name__}: {exc}); the call was not run"
                )
            )

    def _judge(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        approved: bool,
        records: Sequence[ApprovalRecord],
    ) -> Judgement:
        # The PEP judges a private copy; the tool gets another copy of exactly that.
        judged = copy.deepcopy(dict(arguments))
        try:
            action = Action.build(self.registry, tool, judged, self.context)
        except JevError as rejected:
            audit = getattr(self.pep, "audit_rejection", None)
            if callable(audit):
                audit(tool, self.context, rejected)
            return Judgement(
                refusal=(
                    f"jevqueue denied the call to {tool!r}: it was refused before evaluation: "
                    f"{rejected}; the call was not run"
                )
            )
        try:
            verdict = self.pep.enforce(action, tuple(records))
        except UnfulfilledObligationError as pending:
            if approved:
                return Judgement(
                    refusal=(
                        f"jevqueue denied the call to {tool!r}: the approval given does not "
                        f"authorise this exact action ({action.digest}): "
                        + ("; ".join(pending.verdict.reasons) or "no matching approval record")
                        + "; the call was not run"
                    )
                )
            return Judgement(
                ask={
                    "action_digest": action.digest,
                    "tool": tool,
                    "reasons": list(pending.verdict.reasons),
                }
            )
        except PolicyDeniedError as denied:
            why = "; ".join(denied.verdict.reasons) or "the policy denied it"
            return Judgement(
                refusal=f"jevqueue denied the call to {tool!r}: {why}; the call was not run"
            )
        if verdict.kind is VerdictKind.REPAIR:
            return Judgement(
                refusal=(
                    f"jevqueue denied the call to {tool!r}: the policy proposes a repaired call "
                    f"instead, which was not run: {dict(verdict.repaired or {})!r}; resubmit "
                    "it if it does what you need"
                )
            )
        if not verdict.allowed:
            why = "; ".join(verdict.reasons) or "the policy did not allow it"
            return Judgement(
                refusal=f"jevqueue denied the call to {tool!r}: {why}; the call was not run"
            )
        return Judgement(arguments=copy.deepcopy(dict(action.arguments)))


@dataclass(frozen=True)
class ApprovalRequest:
    """What the inline approver is shown: the canonical action and why it needs approval."""

    action: Action
    reasons: tuple[str, ...] = ()

    @property
    def action_digest(self) -> str:
        """The digest an approval record must be bound to."""
        return self.action.digest


def _answer(answer: Any) -> tuple[ApprovalRecord, ...]:
    if answer is None:
        return ()
    if isinstance(answer, ApprovalRecord):
        return (answer,)
    records = tuple(answer)
    for record in records:
        if not isinstance(record, ApprovalRecord):
            raise ConfigurationError(
                "an approval callback must return ApprovalRecord(s) or None, not "
                f"{type(record).__name__}"
            )
    return records


def _records(metadata: Any) -> tuple[ApprovalRecord, ...]:
    if not isinstance(metadata, Mapping):
        return ()
    records = tuple(metadata.get(APPROVALS_METADATA_KEY) or ())
    return tuple(record for record in records if isinstance(record, ApprovalRecord))


def approval_results(
    requests: DeferredToolRequests, records: Iterable[ApprovalRecord]
) -> DeferredToolResults:
    """The ``deferred_tool_results`` that resume a paused run with approval records.

    Every call awaiting approval is marked approved and handed all ``records``; the PEP
    then lets a call run only with a fresh, unused record bound to that call's own action
    digest, so a record for another action authorises nothing.

    Args:
        requests: The ``DeferredToolRequests`` the paused run ended with.
        records: Approval records from a trusted approver (``requests.metadata[call_id]
            ["action_digest"]`` is the digest each one must be bound to).

    Raises:
        ConfigurationError: An entry of ``records`` is not an ``ApprovalRecord``.
    """
    given = tuple(records)
    for record in given:
        if not isinstance(record, ApprovalRecord):
            raise ConfigurationError(
                f"approval_results needs ApprovalRecord objects, not {type(record).__name__}"
            )
    approvals: dict[str, Any] = {}
    metadata: dict[str, dict[str, Any]] = {}
    for call in requests.approvals:
        approvals[call.tool_call_id] = ToolApproved()
        metadata[call.tool_call_id] = {APPROVALS_METADATA_KEY: given}
    return DeferredToolResults(approvals=approvals, metadata=metadata)
