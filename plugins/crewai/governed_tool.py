"""A CrewAI tool whose every call passes the tool guard first.

:class:`GovernedTool` wraps any ``BaseTool`` — a subclass or a ``@tool`` function — under
the same name, description and argument schema, so the model sees exactly the tool it saw
before. CrewAI calls ``_run`` (ReAct text mode, through ``CrewStructuredTool``) or ``run``
(native function calling, which validates the arguments and then calls ``_run``); both
reach :meth:`GovernedTool._run`, which asks the guard and runs the wrapped tool through
``guard.run`` with the judged arguments (``Judgement.run_arguments()``: path fields hold the
resolved absolute path the policy judged), never with the arguments as the model wrote them.

A refused call returns a ``ToolFailure`` (code ``jevqueue_denied``): the agent reads the
denial as the tool's result and the crew continues, and CrewAI records the call in
``TaskOutput.tool_failures``. Under an agent ``tool_failure_policy="raise"`` CrewAI stops
the crew instead, which is also closed. Results of governed tools are never cached: a
cached result would skip the guard and the audit on a repeated call.

CrewAI calls ``run`` with the arguments exactly as the model wrote them; there the wrapper
claims the id the model gave the call (:meth:`ToolGuard.claim_call_id`), so the guard
judges and records the call under it (:mod:`.transcript`).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from crewai.tools import BaseTool
from crewai.tools.tool_failure import ToolFailure, ToolFailureReason
from crewai.utilities.string_utils import sanitize_tool_name
from jevqueue.errors import ConfigurationError
from jevqueue.plugins.crewai.tool_guard import DENIAL_CODE, ToolGuard
from jevqueue.policy import Judgement
from pydantic import ConfigDict, Field

__all__ = ["GovernedTool"]


# The id of the call being run, claimed in run()/arun() (the arguments as the model wrote
# them) for the _run()/_arun() they call after CrewAI validated those arguments.
_CALL_ID: ContextVar[str | None] = ContextVar("jevqueue_crewai_call_id", default=None)


def _never_cache(_arguments: Any = None, _result: Any = None) -> bool:
    return False


class GovernedTool(BaseTool):
    """A CrewAI tool that asks a :class:`~jevqueue.plugins.crewai.ToolGuard` before it runs.

    Build one with :meth:`wrap` (or ``guard.wrap(tools)``); pass it to an ``Agent`` in
    place of the original tool.

    Attributes:
        inner: The wrapped tool; it runs only after the guard allowed the call.
        guard: The guard that judges each call.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: BaseTool = Field(exclude=True)
    guard: Any = Field(exclude=True)

    @classmethod
    def wrap(cls, tool: BaseTool, guard: ToolGuard) -> GovernedTool:
        """Wrap ``tool`` in ``guard``.

        Args:
            tool: A CrewAI ``BaseTool`` (``@tool`` functions are ``BaseTool`` instances).
            guard: The tool guard.

        Raises:
            ConfigurationError: ``tool`` is not a ``BaseTool``, is already governed, or
                ``guard`` is not a ``ToolGuard``.
        """
        if isinstance(tool, GovernedTool):
            raise ConfigurationError(
                f"tool {tool.name!r} is already governed: wrap the original tool once"
            )
        if not isinstance(tool, BaseTool):
            raise ConfigurationError(
                f"only CrewAI BaseTool instances (including @tool functions) can be governed, "
                f"not {type(tool).__name__}; convert it with BaseTool.from_langchain(...) first"
            )
        if not isinstance(guard, ToolGuard):
            raise ConfigurationError(f"guard must be a ToolGuard, not {type(guard).__name__}")
        return cls(
            name=tool.name,
            description=tool.description,
            args_schema=tool.args_schema,
            result_schema=tool.result_schema,
            env_vars=list(tool.env_vars),
            result_as_answer=tool.result_as_answer,
            tool_failure_policy=tool.tool_failure_policy,
            cache_function=_never_cache,
            inner=tool,
            guard=guard,
        )

    @property
    def sanitized_name(self) -> str:
        """The name CrewAI dispatches the tool by, and the name the registry must hold."""
        return sanitize_tool_name(self.name)

    def _refused(self, judgement: Judgement) -> ToolFailure:
        return ToolFailure(
            message=judgement.message,
            reason=ToolFailureReason.TOOL_REPORTED,
            code=DENIAL_CODE,
            details={
                "action_digest": judgement.action_digest,
                "approval_requested": judgement.approval_requested,
                "verdict": judgement.verdict.kind.value if judgement.verdict is not None else None,
                "error": judgement.error,
            },
        )

    def _named(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        # Positional arguments map onto the schema's fields in order, as CrewAI's own
        # CrewStructuredTool does, so the guard always judges named arguments.
        if not args:
            return kwargs
        named = dict(zip(self.args_schema.model_fields.keys(), args, strict=False))
        named.update(kwargs)
        return named

    @contextmanager
    def _claimed(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[None]:
        call_id = None if args else self.guard.claim_call_id(self.sanitized_name, kwargs)
        token = _CALL_ID.set(call_id)
        try:
            yield
        finally:
            _CALL_ID.reset(token)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """CrewAI's entry point: claim the call's id, then run as ``BaseTool.run`` does."""
        with self._claimed(args, kwargs):
            return super().run(*args, **kwargs)

    async def arun(self, *args: Any, **kwargs: Any) -> Any:
        """The asynchronous form of :meth:`run`."""
        with self._claimed(args, kwargs):
            return await super().arun(*args, **kwargs)

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        """Judge the call; run the wrapped tool with the judged arguments when allowed."""
        judgement = self.guard.check(self.sanitized_name, self._named(args, kwargs), _CALL_ID.get())
        if not judgement.allowed:
            return self._refused(judgement)
        return self.guard.run(judgement, lambda arguments: self.inner.run(**arguments))

    async def _arun(self, *args: Any, **kwargs: Any) -> Any:
        """The asynchronous form of :meth:`_run` (an ``async`` approver is awaited)."""
        judgement = await self.guard.acheck(
            self.sanitized_name, self._named(args, kwargs), _CALL_ID.get()
        )
        if not judgement.allowed:
            return self._refused(judgement)
        if _has_async_body(self.inner):
            return await self.guard.arun(judgement, lambda arguments: self.inner.arun(**arguments))
        return await self.guard.arun(
            judgement, lambda arguments: asyncio.to_thread(self.inner.run, **arguments)
        )


def _has_async_body(tool: BaseTool) -> bool:
    func = getattr(tool, "func", None)
    if func is not None:
        return inspect.iscoroutinefunction(func)
    return type(tool)._arun is not BaseTool._arun
