"""A ``BaseLLM`` that runs the governor on every agent turn before the user's LLM answers.

Give an ``Agent`` ``llm=GovernedLLM(your_llm, governor, guard=guard)``. On each call the
governor decides the turn's path over the messages and tools CrewAI passed, the
:class:`~.crew_host.CrewTurnHost` narrows what reaches ``your_llm`` (the forced tool only;
no tools for prose; everything unchanged for the passthrough), and the reply is read back
with CrewAI's normaliser. A reply that does not make exactly the forced call, or calls a
tool on a prose turn, raises :class:`~.stops.CrewProviderDisobeyedError` and the executor
dispatches nothing.

ReAct text mode: when ``your_llm.supports_function_calling()`` is false (or the method is
missing, as on a plain custom ``BaseLLM``), CrewAI describes the tools in the prompt and
parses ``Action:`` lines from the text. No tool schema reaches the model, so nothing can
be forced or forbidden. The governed LLM does not pretend: with ``react="delegate"`` (the
default) it passes every call through untouched, warns once (``RuntimeWarning`` and the
``jevqueue.plugins.crewai`` logger) and records a ``delegate`` decision whose ``reason``
says forcing was impossible; with ``react="raise"`` it refuses to run in that mode
(:class:`~.stops.ForcingUnavailableError`). Either way the tool guard still judges every
call before it runs.

What the agent read: with ``guard=``, every call — governed or passed through — records in
the guard's transcript the words of the crew task CrewAI runs (``from_task``) and each tool
result of the conversation, and reads the ids of the calls the reply makes, so each later
call is judged with the provenance of its arguments (:mod:`.transcript`).
"""

from __future__ import annotations

import logging
import warnings
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, Literal

from crewai.llms.base_llm import BaseLLM, call_stop_override, call_stream_override
from crewai.tools.agent_tools.deferred_tool_result_reader import DeferredToolResultReader
from crewai.utilities.string_utils import sanitize_tool_name
from jevqueue.errors import ConfigurationError, ProviderDisobeyedError, TurnInterruptedError
from jevqueue.governor import Decision, Path
from jevqueue.plugins.crewai.crew_host import CrewTurnHost
from jevqueue.plugins.crewai.stops import (
    CrewProviderDisobeyedError,
    CrewTurnInterruptedError,
    ForcingUnavailableError,
)
from jevqueue.plugins.crewai.tool_guard import ToolGuard
from jevqueue.plugins.crewai.turn import TurnScope
from pydantic import ConfigDict, Field, PrivateAttr

__all__ = ["REACT_NOTE", "GovernedLLM"]

logger = logging.getLogger("jevqueue.plugins.crewai")

REACT_NOTE = (
    "ReAct text mode: CrewAI sends the model no tool schemas, so no tool can be forced or "
    "forbidden; the turn was passed through unchanged (the tool guard still judges every call)"
)
"""The ``reason`` of the decision recorded for a turn in ReAct text mode."""

NO_TOOLS_NOTE = "no tools were offered this turn; the call was passed through unchanged"


class GovernedLLM(BaseLLM):
    """Wrap a CrewAI LLM so the governor decides every agent turn.

    Args:
        inner: The user's LLM (any ``BaseLLM``: ``crewai.LLM(...)``, a native provider, a
            custom subclass). It makes every provider call.
        governor: The governor (default: ``Governor()`` with the lexical ballot).
        guard: The tool guard of the same agent. The governed LLM records each turn's
            constraint in ``guard.turn``, so a call to a tool the turn did not offer is
            refused. Without a guard the LLM keeps its own turn scope.
        react: What to do in ReAct text mode, where nothing can be forced:
            ``"delegate"`` (pass through, warn, record) or ``"raise"``.
        interrupted: A callable returning True when the user cancelled; consulted on
            every turn after the decision and before any provider call, pass-through turns
            (no tools, ``response_model``, ReAct text mode) included. When it returns True
            nothing is sent, the turn is recorded as ``interrupted`` and
            :class:`~.stops.CrewTurnInterruptedError` is raised.
        on_disobey: ``"raise"`` (default) stops the crew with
            :class:`~.stops.CrewProviderDisobeyedError` when a reply does not make exactly
            the constrained call; ``"message"`` drops that reply and answers the turn with
            a text saying so instead (nothing is executed either way), as LangGraph's
            ``on_disobey="message"`` does.
        ungoverned: names of tools the agent may hold that no guard judges. Any other
            tool that is neither a :class:`GovernedTool` nor covered by the guard's
            installed hooks is a ConfigurationError before the agent's first provider
            call (it would run unaudited), as are ``allow_code_execution=True`` and, without
            the hooks, ``mcps=`` and ``apps=``.

    Raises:
        ConfigurationError: ``inner`` is not a ``BaseLLM``, ``react`` is unknown, or
            ``react="raise"`` and ``inner`` cannot do native function calling.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    llm_type: str = "jevqueue-governed"
    inner: Any = Field(exclude=True)
    governor: Any = Field(default=None, exclude=True)
    guard: Any = Field(default=None, exclude=True)
    react: Literal["delegate", "raise"] = "delegate"
    interrupted: Any = Field(default=None, exclude=True)
    on_disobey: Literal["raise", "message"] = "raise"
    ungoverned: tuple[str, ...] = ()

    _turn: TurnScope = PrivateAttr(default_factory=TurnScope)
    _decisions: deque[Decision] = PrivateAttr(default_factory=lambda: deque(maxlen=1000))
    _warned_react: bool = PrivateAttr(default=False)

    def __init__(
        self,
        inner: BaseLLM | None = None,
        governor: Any = None,
        *,
        guard: Any = None,
        react: Literal["delegate", "raise"] = "delegate",
        interrupted: Callable[[], bool] | None = None,
        on_disobey: Literal["raise", "message"] = "raise",
        ungoverned: tuple[str, ...] | list[str] = (),
        **data: Any,
    ) -> None:
        if isinstance(ungoverned, str) or not all(isinstance(n, str) for n in ungoverned):
            raise ConfigurationError("ungoverned must be a list of tool names, not a string")
        if on_disobey not in ("raise", "message"):
            raise ConfigurationError(f"on_disobey must be 'raise' or 'message', not {on_disobey!r}")
        inner = data.pop("inner", inner)
        if not isinstance(inner, BaseLLM):
            raise ConfigurationError(
                "GovernedLLM wraps a CrewAI BaseLLM (crewai.LLM(...), a native provider or "
                f"a BaseLLM subclass); got {type(inner).__name__}"
            )
        if react not in ("delegate", "raise"):
            raise ConfigurationError(f"react must be 'delegate' or 'raise', not {react!r}")
        if governor is None:
            from jevqueue.governor import Governor

            governor = Governor()
        if not callable(getattr(governor, "step", None)):
            raise ConfigurationError(
                "governor must be a jevqueue Governor (with step/astep); got "
                f"{type(governor).__name__}"
            )
        if react == "raise" and not _native(inner):
            raise ForcingUnavailableError(_react_refusal(inner))
        data.setdefault("model", inner.model)
        data.setdefault("provider", inner.provider)
        super().__init__(
            inner=inner,
            governor=governor,
            guard=guard,
            react=react,
            interrupted=interrupted,
            on_disobey=on_disobey,
            ungoverned=tuple(sanitize_tool_name(name) for name in ungoverned),
            **data,
        )
        if guard is not None:
            turn = getattr(guard, "turn", None)
            if not isinstance(turn, TurnScope):
                raise ConfigurationError(
                    f"guard must be a ToolGuard (with a .turn scope); got {type(guard).__name__}"
                )
            self._turn = turn

    # --- what the executor asks the LLM about itself --------------------------------

    def supports_function_calling(self) -> bool:
        """The wrapped LLM's answer: it decides native function calling versus ReAct."""
        return _native(self.inner)

    def supports_stop_words(self) -> bool:
        """The wrapped LLM's answer."""
        return bool(self.inner.supports_stop_words())

    def get_context_window_size(self) -> int:
        """The wrapped LLM's context window."""
        return int(self.inner.get_context_window_size())

    def supports_multimodal(self) -> bool:
        """The wrapped LLM's answer."""
        return bool(self.inner.supports_multimodal())

    def get_input_tokens_count(
        self, messages: Any, tools: Any = None, response_model: Any = None
    ) -> int:
        """The wrapped LLM's token estimate."""
        return int(self.inner.get_input_tokens_count(messages, tools, response_model))

    def get_token_usage_summary(self) -> Any:
        """The wrapped LLM's token usage (the governed LLM spends none of its own)."""
        return self.inner.get_token_usage_summary()

    # --- records --------------------------------------------------------------------

    @property
    def turn(self) -> TurnScope:
        """The turn scope (shared with the guard, when one was given)."""
        return self._turn

    @property
    def last_decision(self) -> Decision | None:
        """The decision of the most recent turn (also in ``governor.last`` when it ran)."""
        return self._decisions[-1] if self._decisions else None

    @property
    def decisions(self) -> list[Decision]:
        """The decisions of recent turns, oldest first (the last 1000)."""
        return list(self._decisions)

    # --- the call ---------------------------------------------------------------------

    def call(
        self,
        messages: Any,
        tools: list[dict[str, Any]] | None = None,
        callbacks: list[Any] | None = None,
        available_functions: dict[str, Any] | None = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> Any:
        """Govern one agent turn, then answer through the wrapped LLM (or locally)."""
        kwargs = {
            "callbacks": callbacks,
            "available_functions": available_functions,
            "from_task": from_task,
            "from_agent": from_agent,
            "response_model": response_model,
        }
        with self._forwarded_overrides():
            self._refuse_ungoverned(from_agent)
            self._read(messages, from_task, from_agent)
            host = self._host(messages, tools, kwargs, asynchronous=False)
            if host is None:
                return self._expect(self.inner.call(messages, tools=tools, **kwargs))
            try:
                return self._expect(self.governor.step(host))
            except ProviderDisobeyedError as exc:
                if self.on_disobey == "message":
                    return _disobeyed_text(exc)
                raise CrewProviderDisobeyedError(
                    str(exc), expected=exc.expected, called=exc.called
                ) from exc
            except TurnInterruptedError as exc:
                raise CrewTurnInterruptedError(str(exc)) from exc
            finally:
                self._record_governor()

    async def acall(
        self,
        messages: Any,
        tools: list[dict[str, Any]] | None = None,
        callbacks: list[Any] | None = None,
        available_functions: dict[str, Any] | None = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> Any:
        """The asynchronous form of :meth:`call` (``governor.astep`` over ``inner.acall``)."""
        kwargs = {
            "callbacks": callbacks,
            "available_functions": available_functions,
            "from_task": from_task,
            "from_agent": from_agent,
            "response_model": response_model,
        }
        with self._forwarded_overrides():
            self._refuse_ungoverned(from_agent)
            self._read(messages, from_task, from_agent)
            host = self._host(messages, tools, kwargs, asynchronous=True)
            if host is None:
                return self._expect(await self.inner.acall(messages, tools=tools, **kwargs))
            try:
                return self._expect(await self.governor.astep(host))
            except ProviderDisobeyedError as exc:
                if self.on_disobey == "message":
                    return _disobeyed_text(exc)
                raise CrewProviderDisobeyedError(
                    str(exc), expected=exc.expected, called=exc.called
                ) from exc
            except TurnInterruptedError as exc:
                raise CrewTurnInterruptedError(str(exc)) from exc
            finally:
                self._record_governor()

    def _read(self, messages: Any, task: Any, agent: Any) -> None:
        """Record what the agent is shown this turn in the guard's transcript: the crew
        task's words and the tool results of the conversation (:mod:`.transcript`)."""
        guard = self.guard
        if not isinstance(guard, ToolGuard):
            return
        guard.record_task(task, getattr(agent, "crew", None))
        guard.record_results(messages)

    def _expect(self, response: Any) -> Any:
        """Read the ids of the calls ``response`` makes, for the guard to claim."""
        if isinstance(self.guard, ToolGuard):
            self.guard.expect_calls(response)
        return response

    def _refuse_ungoverned(self, agent: Any) -> None:
        """Refuse, before the agent's first provider call, a route around the guard.

        Checked on every call, so a tool added to the agent later is caught too:

        * code execution (``allow_code_execution=True``) runs code no guard judges, with
          or without hooks;
        * without the guard's hooks installed, MCP servers (``mcps=``) and platform apps
          (``apps=``), whose tools CrewAI builds when the task runs and cannot be wrapped;
        * without the guard's hooks installed, every tool the agent or its executor holds
          — its own tools, and the ones CrewAI adds when the task runs: MCP tools
          (``mcps=``), platform apps (``apps=``), delegation, memory and skill tools —
          must be a :class:`GovernedTool` or be named in ``ungoverned``. CrewAI's own
          reader of the deferred results it wrote this run is the one exception.
        """
        guard = self.guard
        if guard is None or agent is None:
            return
        if getattr(agent, "allow_code_execution", False):
            raise ConfigurationError(
                f"agent {getattr(agent, 'role', '?')!r} has allow_code_execution=True: CrewAI's "
                "code execution runs code that no guard judges. Turn it off and give the agent "
                "a sandboxed tool instead, declared with tool_spec(tool, "
                "side_effects={'shell_command'}) and wrapped with guard.wrap([...]), so every "
                "run is judged (and approved) as a shell command"
            )
        if getattr(guard, "hooks_installed", False):
            return
        for keyword, what in (("mcps", "MCP servers"), ("apps", "CrewAI platform apps")):
            if getattr(agent, keyword, None):
                # CrewAI builds these tools when the task runs: they can never be wrapped.
                raise ConfigurationError(
                    f"agent {getattr(agent, 'role', '?')!r} has {keyword}=: CrewAI adds the "
                    f"tools of its {what} when the task runs, as plain tools no guard judges. "
                    "Install guard.hooks() so every tool call is judged (declare each of "
                    "those tools by name in specs=[...]), or give the agent wrapped tools "
                    "instead"
                )
        from jevqueue.plugins.crewai.governed_tool import GovernedTool

        executor = getattr(agent, "agent_executor", None)
        held = [
            *(getattr(agent, "tools", None) or ()),
            *(getattr(executor, "original_tools", None) or ()),
        ]
        missing = sorted(
            {
                sanitize_tool_name(str(getattr(tool, "name", tool)))
                for tool in held
                if not isinstance(tool, (GovernedTool, DeferredToolResultReader))
            }
            - set(self.ungoverned)
        )
        if missing:
            routes = [
                route
                for route, given in (
                    ("memory", getattr(agent, "memory", None)),
                    ("allow_delegation=True", getattr(agent, "allow_delegation", False)),
                )
                if given
            ]
            raise ConfigurationError(
                f"the agent holds tools {missing} that no guard judges"
                + (f" (the agent has {', '.join(routes)})" if routes else "")
                + ": they would run with no policy check and no audit record. Wrap them with "
                "guard.wrap([...]) (after tool_spec), install guard.hooks() so every tool "
                "call is judged (declare the names of tools CrewAI adds, such as MCP tools, "
                "in specs=[...]), or name them in GovernedLLM(..., ungoverned=[...]) if they "
                "are meant to run unjudged"
            )

    def _host(
        self,
        messages: Any,
        tools: list[dict[str, Any]] | None,
        kwargs: dict[str, Any],
        *,
        asynchronous: bool,
    ) -> CrewTurnHost | None:
        """The host for a governed turn, or ``None`` when the turn passes through."""
        if not _native(self.inner):
            if self.react == "raise":
                raise ForcingUnavailableError(_react_refusal(self.inner))
            self._warn_react()
            self._pass_through(REACT_NOTE)
            return None
        if not tools or kwargs.get("response_model") is not None:
            # Nothing to choose between (a tool-less agent, a summary, a structured
            # output conversion): the call is not an agent turn over tools.
            self._pass_through(NO_TOOLS_NOTE)
            return None
        return CrewTurnHost(
            self.inner,
            messages,
            tools,
            kwargs,
            turn=self._turn,
            interrupted=self.interrupted,
            asynchronous=asynchronous,
        )

    def _pass_through(self, reason: str) -> None:
        """Record a pass-through turn, after consulting ``interrupted`` as the governor does.

        The governor is not run on these turns (its ballot and risk rules judge tool
        choices, and none is made here), so the interruption check it makes between the
        decision and the effect is made here, with the same outcome: nothing is sent, the
        turn is recorded as ``interrupted`` and :class:`~.stops.CrewTurnInterruptedError`
        is raised.
        """
        decision = Decision(path=Path.DELEGATE, reason=reason, provider_calls=1)
        try:
            stop = self.interrupted is not None and bool(self.interrupted())
        except BaseException as exc:
            self._decisions.append(decision.evolve(error=repr(exc)))
            raise
        if stop:
            self._decisions.append(
                decision.evolve(
                    path=Path.INTERRUPTED,
                    provider_calls=0,
                    reason="interrupted before the delegate effect; nothing was sent",
                )
            )
            raise CrewTurnInterruptedError(
                "the host reported an interruption before the delegate effect; nothing was "
                "sent. Start a new turn when the user is ready"
            )
        self._turn.begin(None)
        self._decisions.append(decision)

    def _record_governor(self) -> None:
        last = getattr(self.governor, "last", None)
        if isinstance(last, Decision):
            self._decisions.append(last)

    def _warn_react(self) -> None:
        if self._warned_react:
            return
        self._warned_react = True
        message = (
            f"GovernedLLM({self.inner.model!r}): the wrapped LLM does not do native function "
            "calling, so CrewAI runs the agent in ReAct text mode, where no tool can be "
            "forced. Turns are passed through unchanged; the tool guard still judges every "
            "call. Use a model with native function calling, or react='raise' to refuse."
        )
        logger.warning(message)
        warnings.warn(message, RuntimeWarning, stacklevel=4)

    @contextmanager
    def _forwarded_overrides(self) -> Iterator[None]:
        """Forward CrewAI's per-call stop words and streaming mode to the wrapped LLM.

        CrewAI scopes them to the LLM instance it calls (this one); the provider call is
        made by ``inner``, which would otherwise not see them.
        """
        with ExitStack() as stack:
            stops = self.stop_sequences
            if stops and not set(stops).issubset(self.inner.stop):
                stack.enter_context(
                    call_stop_override(self.inner, sorted(set(self.inner.stop) | set(stops)))
                )
            stream = self._effective_stream()
            if stream is not None and stream != self.stream:
                stack.enter_context(call_stream_override(self.inner, stream))
            yield


def _disobeyed_text(error: ProviderDisobeyedError) -> str:
    """The answer the agent reads instead of the disobeying reply (which is dropped)."""
    return (
        f"The model did not make the call it was constrained to (expected {error.expected!r}, "
        f"it called {error.called!r}); nothing was executed."
    )


def _native(llm: Any) -> bool:
    probe = getattr(llm, "supports_function_calling", None)
    if not callable(probe):
        return False
    try:
        return bool(probe())
    except Exception:
        return False


def _react_refusal(inner: Any) -> str:
    return (
        f"GovernedLLM(react='raise'): {type(inner).__name__}({getattr(inner, 'model', '?')!r}) "
        "does not do native function calling, so CrewAI would run the agent in ReAct text "
        "mode, where no tool schema reaches the model and nothing can be forced. Use a model "
        "with native function calling, or react='delegate' to pass such turns through"
    )
