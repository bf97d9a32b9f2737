"""The governed agent workers: a ``FunctionAgent`` that governs every step, and a
``ReActAgent`` that governs the tool calls and says plainly that it cannot force.

Both are the stock LlamaIndex classes (usable alone or as agents of an
``AgentWorkflow``), with two additions:

* ``GovernedFunctionAgent`` wraps its LLM in a
  :class:`~.governed_llm.GovernedFunctionCallingLLM`, so the stock ``take_step`` — which
  calls ``llm.achat_with_tools`` or ``llm.astream_chat_with_tools`` — runs the governor on
  every step: forced, prose or passthrough, with the read-back;
* given ``pep=``, ``specs=`` and ``context=``, every tool call is judged by one
  :class:`~jevqueue.policy.Guard` before it runs, whichever route the tool came by.

The routes by which a workflow agent gets a tool, and what happens to each:

* ``tools=`` — wrapped with :func:`~.governed_tools.governed_tools`; a tool without a
  declaration is refused when the agent is built (``ConfigurationError``);
* ``agent.tools = [...]`` after the build — wrapped the same way, refused the same way;
* ``tool_retriever=`` (and ``agent.tool_retriever = ...``) — the retriever is wrapped
  (:class:`~.governed_retriever.GovernedToolRetriever`): each tool it returns is governed,
  and a retrieved tool without a declaration is refused per call, audited;
* a ``FunctionAgent`` (not governed) beside a governed one in an ``AgentWorkflow`` runs
  its own tools unjudged: the plugin does not own ``AgentWorkflow``, so govern every agent
  of a workflow (each with ``pep=``) — the hand-off tool itself runs no effect.

The ``call_tool`` step hands the guard the model's call id, so a call runs at most once
even when LlamaIndex runs the step again (a context restored while the step was running).
Inside an ``AgentWorkflow`` the workflow's own ``call_tool`` runs instead, which gives no
call id: each call is still judged, but not de-duplicated.

What the agent read — the user's messages, the tool results — is read from the agent's
memory and its scratchpad (a ReAct agent's reasoning) in the workflow's store, so each
call's provenance survives ``ctx.to_dict()`` (see :mod:`~.memory_transcript`).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from jevqueue.errors import ConfigurationError
from jevqueue.governor import Decision, Governor, Path
from jevqueue.plugins.llamaindex._framework import (
    Context,
    FunctionAgent,
    ReActAgent,
    ToolCall,
    ToolCallResult,
    step,
)
from jevqueue.plugins.llamaindex.governed_llm import Forcing, GovernedFunctionCallingLLM
from jevqueue.plugins.llamaindex.governed_retriever import governed_retriever
from jevqueue.plugins.llamaindex.governed_tools import ToolPolicy, current_call_id, tool_policy
from jevqueue.policy import Approver, ExecutionContext, Guard, ToolRegistry, ToolSpec
from pydantic import PrivateAttr

__all__ = ["REACT_NOTE", "GovernedFunctionAgent", "GovernedReActAgent"]

logger = logging.getLogger("jevqueue.plugins.llamaindex")

REACT_NOTE = (
    "ReAct: LlamaIndex's ReActAgent sends the model no tool schemas and no tool_choice (the "
    "tools are described in the prompt and the reply's text is parsed), so no tool can be "
    "forced or forbidden; the step was passed through unchanged and every tool call is "
    "still judged by the policy before it runs"
)
"""The ``reason`` of the decision a :class:`GovernedReActAgent` records for each step."""


def _tool_policy(
    owner: str,
    pep: Any,
    specs: Iterable[ToolSpec] | ToolRegistry,
    context: ExecutionContext | Mapping[str, Any] | None,
    approver: Approver | None,
    approval_timeout: float | None,
) -> ToolPolicy | None:
    if pep is None:
        if context is not None or len(list(specs)) or approver is not None:
            raise ConfigurationError(
                f"{owner}: specs=/context=/approver= were given without pep=: pass the "
                "PolicyEnforcementPoint too, or none of them"
            )
        return None
    if context is None:
        raise ConfigurationError(
            f"{owner}: pep= needs context=ExecutionContext(task_id=..., actor_id=..., "
            "workspace=..., git_sha=...): every call is judged in one"
        )
    return tool_policy(
        pep=pep,
        specs=specs,
        context=context,
        approver=approver,
        approval_timeout=approval_timeout,
        owner=owner,
    )


_HOW = (
    " (whether given as tools= or assigned later with agent.tools = ...; a retrieved tool "
    "without one is refused when called)"
)


class _GovernedTools:
    """What both governed agents add to the stock agent's tool half.

    Every route by which the agent gets a tool goes through its :class:`ToolPolicy`:
    ``tools=`` (and ``agent.tools = ...`` later) are wrapped, undeclared ones refused with
    a ``ConfigurationError``; a ``tool_retriever=`` is wrapped so each retrieved tool is
    governed; and the ``call_tool`` step hands the guard the model's call id, so a call
    runs at most once even when LlamaIndex runs its step again.
    """

    def _governed_field(self, name: str, value: Any) -> Any:
        private = getattr(self, "__pydantic_private__", None) or {}
        policy = private.get("_tool_policy")
        if policy is None or value is None:
            return value
        if name == "tools":
            return policy.wrap(value, how=_HOW)
        if name == "tool_retriever":
            return governed_retriever(value, policy)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, self._governed_field(name, value))  # type: ignore[misc]

    @property
    def guard(self) -> Guard | None:
        """The guard every tool call is judged by (``None`` without ``pep=``)."""
        private = getattr(self, "__pydantic_private__", None) or {}
        policy = private.get("_tool_policy")
        return policy.guard if policy is not None else None

    def _govern(
        self, policy: ToolPolicy | None, tools: Sequence[Any] | None, retriever: Any
    ) -> tuple[Sequence[Any] | None, Any]:
        if policy is None:
            return tools, retriever
        return policy.wrap(tools or (), how=_HOW), governed_retriever(retriever, policy)

    @step
    async def call_tool(self, ctx: Context, ev: ToolCall) -> ToolCallResult:
        """The stock ``call_tool`` step, with the model's call id handed to the guard."""
        token = current_call_id.set(ev.tool_id or None)
        try:
            return await super().call_tool(ctx, ev)  # type: ignore[misc,no-any-return]
        finally:
            current_call_id.reset(token)


class GovernedFunctionAgent(_GovernedTools, FunctionAgent):
    """A ``FunctionAgent`` whose every model step runs the governor, with read-back.

    Takes every ``FunctionAgent`` argument (``name``, ``description``, ``system_prompt``,
    ``tools``, ``streaming``, ``allow_parallel_tool_calls``, ``can_handoff_to`` ...),
    except ``initial_tool_choice``: the governor chooses the forced tool, per turn.

    Args:
        llm: The ``FunctionCallingLLM`` (or one already wrapped in
            :class:`GovernedFunctionCallingLLM`).
        governor: The governor (a default ``Governor()`` when omitted).
        forcing: See :class:`GovernedFunctionCallingLLM`.
        interrupted: See :class:`GovernedFunctionCallingLLM`.
        on_decision: See :class:`GovernedFunctionCallingLLM`.
        pep: When given, every tool call is judged by a guard over it: the tools are
            wrapped with :func:`governed_tools`, and so is every tool a
            ``tool_retriever=`` returns.
        specs: The tools' declarations (with ``pep``).
        context: The execution context calls are judged in (with ``pep``).
        approver: Answers approvals inline (with ``pep``); without one, or with
            ``InboxApprover(pause=True)``, a call that needs an approval pauses the run
            with an ``ApprovalRequiredEvent``.
        approval_timeout: Seconds a call waits for its approval (with ``pep``).
        tool_retriever: LlamaIndex's ``ObjectRetriever`` of tools; with ``pep`` each
            retrieved tool is governed (an undeclared one is refused per call, audited).

    Raises:
        ConfigurationError: ``initial_tool_choice`` is set, the LLM cannot do function
            calling, or a tool is not declared.
    """

    _tool_policy: ToolPolicy | None = PrivateAttr(default=None)

    def __init__(
        self,
        *,
        llm: Any,
        governor: Governor | None = None,
        forcing: Forcing | None = None,
        interrupted: Callable[[], bool] | None = None,
        on_decision: Callable[[Decision], None] | None = None,
        pep: Any = None,
        specs: Iterable[ToolSpec] | ToolRegistry = (),
        context: ExecutionContext | Mapping[str, Any] | None = None,
        approver: Approver | None = None,
        approval_timeout: float | None = 2000.0,
        tools: Sequence[Any] | None = None,
        tool_retriever: Any = None,
        **kwargs: Any,
    ) -> None:
        if kwargs.get("initial_tool_choice") is not None:
            raise ConfigurationError(
                "GovernedFunctionAgent takes no initial_tool_choice: the governor picks the "
                "one tool to force on each turn (a choice forced once must not persist)"
            )
        if isinstance(llm, GovernedFunctionCallingLLM):
            if governor is not None and governor is not llm.governor:
                raise ConfigurationError(
                    "the LLM is already governed by another governor: pass one governor"
                )
            governed = llm
        else:
            governed = GovernedFunctionCallingLLM(
                llm,
                governor,
                forcing=forcing,
                interrupted=interrupted,
                on_decision=on_decision,
            )
        policy = _tool_policy(
            "GovernedFunctionAgent", pep, specs, context, approver, approval_timeout
        )
        tools, tool_retriever = self._govern(policy, tools, tool_retriever)
        super().__init__(llm=governed, tools=tools, tool_retriever=tool_retriever, **kwargs)
        if policy is not None:
            policy.history_keys = (self.scratchpad_key,)  # where this agent keeps its run
        self._tool_policy = policy

    @property
    def governor(self) -> Governor:
        """The governor of every step."""
        return self.llm.governor  # type: ignore[attr-defined,no-any-return]

    @property
    def decisions(self) -> list[Decision]:
        """The decisions of recent steps, oldest first."""
        return self.llm.decisions  # type: ignore[attr-defined,no-any-return]


class GovernedReActAgent(_GovernedTools, ReActAgent):
    """A ``ReActAgent`` whose tool calls are judged; its choice of tool cannot be forced.

    LlamaIndex's ReAct agent describes the tools in the prompt and parses ``Action:``
    lines from the model's text: no tool schema and no ``tool_choice`` reach the provider,
    so no governor can force or forbid a tool. This class does not pretend to: it takes no
    governor (passing one is a ``ConfigurationError`` that says why), records a
    ``delegate`` decision whose reason is :data:`REACT_NOTE` for every step, warns once,
    and — given ``pep=``, ``specs=``, ``context=`` — judges every tool call before it runs.
    Use :class:`GovernedFunctionAgent` with a function-calling model to force tools.

    Takes ``pep=``, ``specs=``, ``context=``, ``approver=``, ``approval_timeout=`` and
    ``tool_retriever=`` as :class:`GovernedFunctionAgent` does.

    Raises:
        ConfigurationError: ``governor=`` was given, or a tool is not declared.
    """

    _decisions: list[Decision] = PrivateAttr(default_factory=list)
    _warned: bool = PrivateAttr(default=False)
    _tool_policy: ToolPolicy | None = PrivateAttr(default=None)

    def __init__(
        self,
        *,
        pep: Any = None,
        specs: Iterable[ToolSpec] | ToolRegistry = (),
        context: ExecutionContext | Mapping[str, Any] | None = None,
        approver: Approver | None = None,
        approval_timeout: float | None = 2000.0,
        tools: Sequence[Any] | None = None,
        tool_retriever: Any = None,
        **kwargs: Any,
    ) -> None:
        if kwargs.pop("governor", None) is not None:
            raise ConfigurationError(
                "GovernedReActAgent cannot be governed per turn: " + REACT_NOTE + ". Use "
                "GovernedFunctionAgent with a function-calling LLM to force tools, or drop "
                "governor= to keep the policy on the tool calls"
            )
        policy = _tool_policy("GovernedReActAgent", pep, specs, context, approver, approval_timeout)
        tools, tool_retriever = self._govern(policy, tools, tool_retriever)
        super().__init__(tools=tools, tool_retriever=tool_retriever, **kwargs)
        if policy is not None:
            policy.history_keys = (self.reasoning_key,)  # where this agent keeps its run
        self._tool_policy = policy

    @property
    def decisions(self) -> list[Decision]:
        """One ``delegate`` decision per step, each saying forcing was impossible."""
        return list(self._decisions)

    async def take_step(self, ctx: Any, llm_input: Any, tools: Any, memory: Any) -> Any:
        """The stock ReAct step, recorded as a passthrough that could not be forced."""
        if not self._warned:
            self._warned = True
            message = f"GovernedReActAgent({self.name!r}): {REACT_NOTE}"
            logger.warning(message)
            warnings.warn(message, RuntimeWarning, stacklevel=2)
        self._decisions.append(Decision(path=Path.DELEGATE, reason=REACT_NOTE, provider_calls=1))
        return await super().take_step(ctx, llm_input, tools, memory)
