"""A workbench whose every tool call the guard judges before the inner workbench runs it.

``AssistantAgent(..., workbench=PolicyWorkbench(StaticWorkbench(tools), pep=pep,
specs=[...], context=context, approver=approver))`` — or around an ``McpWorkbench`` — and
every call the agent dispatches to the workbench goes through
:meth:`jevqueue.policy.Guard.acheck` first (an approver, plain or ``async``, is asked
inline). A refused call returns ``ToolResult(is_error=True)`` whose text is the guard's
message: the model reads the denial as the tool's result and the conversation goes on. An
allowed call reaches the inner workbench through :meth:`~jevqueue.policy.Guard.arun`, with
the arguments that were judged (path fields as resolved), at most once per call id.

Routes around the workbench: a tool of a ``StaticWorkbench`` without a declaration is a
``ConfigurationError`` when the wrapper is built (you handed that tool over, so it is
meant to be offered). A workbench that serves someone else's tools (``McpWorkbench``, any
other) offers only the declared ones: declare the three of a server's fourteen tools the
agent may use, and ``list_tools`` shows those three; a call of any other is refused by
the guard and audited, and never reaches the server. A path field may hold a list of
paths (the filesystem server's ``read_multiple_files``): each element is judged, and the
call is refused whole when one is. Handoffs (``AssistantAgent(handoffs=...)``,
``Swarm``) never reach a workbench: :class:`~.agentchat_client.GovernedChatCompletionClient`
refuses a turn that offers one. A call carrying an argument its declared schema does not
name is refused, naming it, before anything runs: a schema that does not close its
properties would otherwise let it through to the tool unjudged. The allowed names are the
declared schema's ``properties`` (else the pinned listing's; a ``StaticWorkbench`` tool
declared without a schema is the user's own function, not narrowed) and the declared path,
working-directory and content fields.

Someone else's tools are also pinned (:class:`~jevqueue.policy.ListingPins`, the rule the
MCP proxy holds): every ``list_tools`` of a workbench that is not a ``StaticWorkbench`` is
read into the core's :class:`~jevqueue.policy.ListedTool` (a ``ToolSchema``'s ``name``,
``description`` and ``parameters``). A name listed twice, a declared tool listed with a
description or schema other than its declaration's (``ToolSpec.description``,
``ToolSpec.schema``; a tools file's ``description`` and ``[tool.schema]``), and one whose
description or schema changed since the wrapper first listed it are withdrawn: hidden from
``list_tools``, refused by the guard when called (audited), one warning logged
(``jevqueue.plugins.autogen``), for the wrapper's life. A call that arrives before any
``list_tools`` (``AssistantAgent`` lists before each call; a caller of ``call_tool`` may
not) lists first, so it is judged against what the server lists, never against a listing
nobody read; a listing that fails refuses the call. Later calls are judged against the
latest listing read, which is what the model was shown. A declared schema is compared as
``McpWorkbench`` lists it: ``type``, ``properties``, ``required`` and
``additionalProperties``.

The wrapper is deliberately *not* a ``StreamWorkbench``: ``AssistantAgent`` sends every
call of a workbench that is one through ``call_tool_stream``, and this wrapper governs
``call_tool``. Streamed progress events of the inner tools are therefore not forwarded;
each call returns its final result.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from jevqueue.errors import (
    ConfigurationError,
    InvalidToolArgumentsError,
    JevRuntimeError,
    UnregisteredToolError,
)
from jevqueue.plugins.autogen._agentchat_framework import (
    StaticWorkbench,
    TextResultContent,
    ToolResult,
    Workbench,
)
from jevqueue.policy import (
    Approver,
    ExecutionContext,
    Guard,
    Judgement,
    ListedTool,
    ListingPins,
    ToolSpec,
    declared_arguments,
)
from jevqueue.policy._approval_request import deprecated_approver

__all__ = ["PolicyWorkbench"]

_logger = logging.getLogger("jevqueue.plugins.autogen")


class PolicyWorkbench(Workbench):
    """Front any AgentChat ``Workbench`` with the policy enforcement point.

    Args:
        inner: The workbench that runs allowed calls (``StaticWorkbench``,
            ``McpWorkbench``, ...).
        pep: The policy enforcement point; it audits every decision.
        specs: One ``ToolSpec`` per tool the agent may call
            (:func:`~jevqueue.plugins.autogen.tool_spec`): every tool of a
            ``StaticWorkbench``, the chosen subset of any other workbench's.
        context: The execution context (an ``ExecutionContext`` or a mapping of its
            fields), validated now.
        approver: Asked for approval records when a call needs an explicit approval
            (:class:`jevqueue.policy.Approver`: ``(ApprovalRequest) -> ApprovalRecord(s) |
            None``, plain or ``async``; raise ``ApprovalDeclinedError(reason)`` to
            decline). Without one such calls are refused with a message saying how to add
            one.
        approval_func: The former name of ``approver`` (deprecated).

    Attributes:
        guard: The :class:`~jevqueue.policy.Guard` that judges, runs and audits each call.
        pins: The :class:`~jevqueue.policy.ListingPins` of any other workbench's listing
            (``pins.withdrawn``: the tools hidden and refused, and why); ``None`` for a
            ``StaticWorkbench``.

    Raises:
        ConfigurationError: ``inner`` is not a ``Workbench``, ``specs`` is malformed, a
            ``StaticWorkbench`` holds a tool that has no spec, or an approver is given
            under two keywords or is not callable.
        InvalidContextError: ``context`` is incomplete or ambient.
    """

    def __init__(
        self,
        inner: Workbench,
        *,
        pep: Any,
        specs: Iterable[ToolSpec],
        context: ExecutionContext | Mapping[str, Any],
        approver: Approver | None = None,
        approval_func: Approver | None = None,
    ) -> None:
        if not isinstance(inner, Workbench):
            raise ConfigurationError(
                "PolicyWorkbench wraps an AgentChat Workbench (StaticWorkbench(tools), "
                f"McpWorkbench(...)); got {type(inner).__name__}"
            )
        self.inner = inner
        self.guard = Guard(
            pep,
            specs=specs,
            context=context,
            approver=deprecated_approver(approver, "PolicyWorkbench", approval_func=approval_func),
            owner="PolicyWorkbench",
        )
        # A StaticWorkbench lists the tools its user handed over, without waiting on
        # anything: each must be declared, checked now. Other workbenches (McpWorkbench)
        # serve someone else's tools: only the declared ones are offered (list_tools), and
        # their listing is pinned.
        self.pins: ListingPins | None = None
        if isinstance(inner, StaticWorkbench):
            listed = _now(inner.list_tools())
            if listed is not None:
                self._check(listed)
        else:
            self.pins = ListingPins(self.guard.registry.specs(), schema_view=_as_parameters)
        self._listed = False

    @property
    def judge(self) -> Guard:
        """The guard (this wrapper's former attribute name)."""
        return self.guard

    @property
    def last(self) -> Judgement | None:
        """The most recent judgement."""
        return self.guard.last

    def _check(self, tools: Iterable[Any]) -> None:
        self.guard.require_declared(
            (tool["name"] for tool in tools),
            how=" (jevqueue.plugins.autogen.tool_spec accepts the workbench's tool schemas too)",
        )

    async def list_tools(self) -> list[Any]:
        """The inner workbench's declared tools: a ``StaticWorkbench``'s, each checked to
        have a declaration; any other workbench's, read into the pins, less the undeclared
        and the withdrawn ones."""
        tools = await self.inner.list_tools()
        if self.pins is None:
            self._check(tools)
            return tools
        withdrawn = self._read(tools)
        return [
            tool
            for tool in tools
            if self.guard.declares(tool["name"]) and tool["name"] not in withdrawn
        ]

    def _read(self, tools: Iterable[Any]) -> Mapping[str, str]:
        """Read one listing into the pins, log each tool it withdraws; the withdrawn."""
        if self.pins is None:
            return {}
        listing = [listed for listed in map(_listed, tools) if listed is not None]
        for name, reason in self.pins.read(listing):
            if name in self.guard.registry:
                _logger.warning(
                    "PolicyWorkbench: hiding and refusing %r until it is declared again: %s",
                    name,
                    reason,
                )
        self._listed = True
        return self.pins.withdrawn

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        cancellation_token: Any = None,
        call_id: str | None = None,
    ) -> ToolResult:
        """Judge the call; run it on the inner workbench only when the policy allows it.

        A call of a pinned workbench before any ``list_tools`` lists first: a tool is
        judged against what the server lists now, never against a listing unread (a
        listing that fails refuses the call, audited; the next call lists again).
        """
        refusal: Exception | None = None
        if self.pins is not None and not self._listed:
            try:
                self._read(await self.inner.list_tools())
            except Exception as error:
                refusal = JevRuntimeError(
                    f"the workbench's tools could not be listed ({type(error).__name__}: "
                    f"{str(error)[:200]}), so the call could not be judged against them and "
                    "nothing was run: check that the server runs, then call again"
                )
        refusal = refusal or self._refusal(name, arguments)
        if refusal is not None:
            judgement = self.guard.refuse(name, refusal, call_id)
        else:
            judgement = await self.guard.acheck(name, arguments, call_id)
        if not judgement.allowed:
            return ToolResult(
                name=name, result=[TextResultContent(content=judgement.message)], is_error=True
            )

        async def execute(run: dict[str, Any]) -> ToolResult:
            return await self.inner.call_tool(name, run, cancellation_token, call_id)

        return await self.guard.arun(judgement, execute)

    def _refusal(self, name: object, arguments: object) -> Exception | None:
        """Why a call of a declared tool is refused before the policy is asked: the tool
        is withdrawn, or the call carries an argument its declaration does not name.

        Such an argument (a schema that does not close its properties lets it through)
        would reach the tool unjudged: a server's second path, a flag. The allowed names
        are :func:`~jevqueue.policy.declared_arguments`, with the pinned listing's schema
        for a tool declared without one; a ``StaticWorkbench`` tool declared without a
        schema that names its properties is the user's own function, and is not narrowed.
        ``None`` when nothing is wrong here, or when the guard refuses the call anyway (an
        undeclared tool, arguments that are no object).
        """
        if type(name) is not str or name not in self.guard.registry:
            return None
        why = self.pins.withdrawn.get(name) if self.pins is not None else None
        if why is not None:
            return UnregisteredToolError(
                name,
                f"tool {name!r} is withdrawn: {why}; it stays hidden and refused until the "
                "workbench is built again with declarations that describe it (review what "
                "the server lists now, and declare its description and schema as reviewed)",
            )
        if not isinstance(arguments, Mapping):
            return None
        spec = self.guard.registry.get(name)
        if self.pins is not None:
            allowed = self.pins.arguments(spec)
        elif spec.schema is not None and isinstance(spec.schema.get("properties"), Mapping):
            allowed = declared_arguments(spec, None)
        else:
            return None
        extra = sorted(str(key) for key in arguments if key not in allowed)
        if not extra:
            return None
        return InvalidToolArgumentsError(
            name,
            f"the arguments {extra} are not parameters of its declaration (its parameters: "
            f"{', '.join(sorted(allowed)) or 'none'}), so nothing was run: call it with its "
            "declared parameters only",
        )

    async def start(self) -> None:
        """Start the inner workbench."""
        await self.inner.start()

    async def stop(self) -> None:
        """Stop the inner workbench."""
        await self.inner.stop()

    async def reset(self) -> None:
        """Reset the inner workbench."""
        await self.inner.reset()

    async def save_state(self) -> Mapping[str, Any]:
        """The inner workbench's state."""
        return await self.inner.save_state()

    async def load_state(self, state: Mapping[str, Any]) -> None:
        """Load the inner workbench's state."""
        await self.inner.load_state(state)


def _listed(tool: Any) -> ListedTool | None:
    """A ``ToolSchema`` as the core pins it (``None``: it has no string name)."""
    if not isinstance(tool, Mapping) or type(tool.get("name")) is not str:
        return None
    description, parameters = tool.get("description"), tool.get("parameters")
    return ListedTool(
        name=tool["name"],
        description=description if isinstance(description, str) else None,
        schema=parameters if isinstance(parameters, Mapping) else {},
    )


def _as_parameters(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """A schema as ``McpWorkbench`` lists an MCP ``inputSchema`` (its ``ParametersSchema``)."""
    return {
        "type": "object",
        "properties": schema.get("properties", {}),
        "required": schema.get("required", []),
        "additionalProperties": schema.get("additionalProperties", False),
    }


def _now(awaitable: Any) -> Any:
    """The result of a coroutine that completes without waiting, else ``None`` (closed)."""
    try:
        awaitable.send(None)
    except StopIteration as done:
        return done.value
    except Exception:
        awaitable.close()
        return None
    awaitable.close()
    return None
