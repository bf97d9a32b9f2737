"""The governed agent workers: a ``FunctionAgent`` that governs every step, and a
``ReActAgent`` that governs the tool calls and says plainly that it cannot force.

Both are the stock LlamaIndex classes (usable alone or as agents of an
``AgentWorkflow``), with two additions:

* ``GovernedFunctionAgent`` wraps its LLM in a
  :class:`~.governed_llm.GovernedFunctionCallingLLM`, so the stock ``take_step`` — which
  calls ``llm.achat_with_tools`` or ``llm.astream_chat_with_tools`` — runs the governor on
  every step: forced, prose or passthrough, with the read-back;
* given ``pep=``, ``specs=`` and ``context=``, both wrap their tools with
  :func:`~.governed_tools.governed_tools`, so every call is judged before it runs.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from jevqueue.errors import ConfigurationError
from jevqueue.governor import Decision, Governor, Path
from jevqueue.plugins.llamaindex._framework import FunctionAgent, ReActAgent
from jevqueue.plugins.llamaindex.governed_llm import Forcing, GovernedFunctionCallingLLM
from jevqueue.plugins.llamaindex.governed_tools import governed_tools
from jevqueue.policy import ExecutionContext, ToolRegistry, ToolSpec
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


def _wrap_tools(
    tools: Sequence[Any] | None,
    pep: Any,
    specs: Iterable[ToolSpec] | ToolRegistry,
    context: ExecutionContext | Mapping[str, Any] | None,
    approval_timeout: float | None,
) -> Sequence[Any] | None:
    if pep is None:
        if context is not None or len(list(specs)):
            raise ConfigurationError(
                "specs=/context= were given without pep=: pass the "
                "PolicyEnforcementPoint too, or none of them"
            )
        return tools
    if context is None:
        raise ConfigurationError(
            "pep= needs context=ExecutionContext(task_id=..., actor_id=..., workspace=..., "
            "git_sha=...): every call is judged in one"
        )
    return governed_tools(
        tools or (),
        pep=pep,
        specs=specs,
        context=context,
        approval_timeout=approval_timeout,
    )


class GovernedFunctionAgent(FunctionAgent):
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
        pep: When given, the tools are wrapped with :func:`governed_tools`.
        specs: The tools' declarations (with ``pep``).
        context: The execution context calls are judged in (with ``pep``).
        approval_timeout: Seconds a call waits for its approval (with ``pep``).

    Raises:
        ConfigurationError: ``initial_tool_choice`` is set, the LLM cannot do function
            calling, or a tool is not declared.
    """

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
        approval_timeout: float | None = 2000.0,
        tools: Sequence[Any] | None = None,
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
        tools = _wrap_tools(tools, pep, specs, context, approval_timeout)
        super().__init__(llm=governed, tools=tools, **kwargs)

    @property
    def governor(self) -> Governor:
        """The governor of every step."""
        return self.llm.governor  # type: ignore[attr-defined,no-any-return]

    @property
    def decisions(self) -> list[Decision]:
        """The decisions of recent steps, oldest first."""
        return self.llm.decisions  # type: ignore[attr-defined,no-any-return]


class GovernedReActAgent(ReActAgent):
    """A ``ReActAgent`` whose tool calls are judged; its choice of tool cannot be forced.

    LlamaIndex's ReAct agent describes the tools in the prompt and parses ``Action:``
    lines from the model's text: no tool schema and no ``tool_choice`` reach the provider,
    so no governor can force or forbid a tool. This class does not pretend to: it takes no
    governor (passing one is a ``ConfigurationError`` that says why), records a
    ``delegate`` decision whose reason is :data:`REACT_NOTE` for every step, warns once,
    and — given ``pep=``, ``specs=``, ``context=`` — judges every tool call before it runs.
    Use :class:`GovernedFunctionAgent` with a function-calling model to force tools.

    Raises:
        ConfigurationError: ``governor=`` was given, or a tool is not declared.
    """

    _decisions: list[Decision] = PrivateAttr(default_factory=list)
    _warned: bool = PrivateAttr(default=False)

    def __init__(
        self,
        *,
        pep: Any = None,
        specs: Iterable[ToolSpec] | ToolRegistry = (),
        context: ExecutionContext | Mapping[str, Any] | None = None,
        approval_timeout: float | None = 2000.0,
        tools: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if kwargs.pop("governor", None) is not None:
            raise ConfigurationError(
                "GovernedReActAgent cannot be governed per turn: " + REACT_NOTE + ". Use "
                "GovernedFunctionAgent with a function-calling LLM to force tools, or drop "
                "governor= to keep the policy on the tool calls"
            )
        tools = _wrap_tools(tools, pep, specs, context, approval_timeout)
        super().__init__(tools=tools, **kwargs)

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
