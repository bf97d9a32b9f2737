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
properties would otherwise let it through to the tool unjudged.

The wrapper is deliberately *not* a ``StreamWorkbench``: ``AssistantAgent`` sends every
call of a workbench that is one through ``call_tool_stream``, and this wrapper governs
``call_tool``. Streamed progress events of the inner tools are therefore not forwarded;
each call returns its final result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jevqueue.errors import ConfigurationError, InvalidToolArgumentsError
from jevqueue.plugins.autogen._agentchat_framework import (
    StaticWorkbench,
    TextResultContent,
    ToolResult,
    Workbench,
)
from jevqueue.policy import Approver, ExecutionContext, Guard, Judgement, ToolSpec
from jevqueue.policy._approval_request import deprecated_approver

__all__ = ["PolicyWorkbench"]


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
        # serve someone else's tools: only the declared ones are offered (list_tools).
        if isinstance(inner, StaticWorkbench):
            listed = _now(inner.list_tools())
            if listed is not None:
                self._check(listed)

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
        have a declaration; any other workbench's, less the undeclared ones."""
        tools = await self.inner.list_tools()
        if isinstance(self.inner, StaticWorkbench):
            self._check(tools)
            return tools
        return [tool for tool in tools if self.guard.declares(tool["name"])]

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        cancellation_token: Any = None,
        call_id: str | None = None,
    ) -> ToolResult:
        """Judge the call; run it on the inner workbench only when the policy allows it."""
        extra = _undeclared_arguments(self.guard, name, arguments)
        if extra:
            judgement = self.guard.refuse(
                name,
                InvalidToolArgumentsError(
                    name,
                    f"the arguments {extra} are not parameters of its declared schema, so "
                    "nothing was run: call it with its declared parameters only",
                ),
                call_id,
            )
        else:
            judgement = await self.guard.acheck(name, arguments, call_id)
        if not judgement.allowed:
            return ToolResult(
                name=name, result=[TextResultContent(content=judgement.message)], is_error=True
            )

        async def execute(run: dict[str, Any]) -> ToolResult:
            return await self.inner.call_tool(name, run, cancellation_token, call_id)

        return await self.guard.arun(judgement, execute)

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


def _undeclared_arguments(guard: Guard, name: object, arguments: object) -> list[str]:
    """The arguments of a call that its declared schema does not name.

    A schema that does not close its properties (``additionalProperties``) lets them
    through, and the inner workbench would hand them to the tool unjudged: a server's
    second path, a flag. The MCP proxy holds the same rule.
    """
    if type(name) is not str or not isinstance(arguments, Mapping) or name not in guard.registry:
        return []
    spec = guard.registry.get(name)
    properties = spec.schema.get("properties") if spec.schema is not None else None
    if not isinstance(properties, Mapping):
        return []
    declared = {
        *properties,
        *spec.path_fields,
        *(pointer.split("/", 1)[0] for pointer in spec.content_fields),
    }
    if spec.cwd_field is not None:
        declared.add(spec.cwd_field)
    return sorted(str(key) for key in arguments if key not in declared)


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
