"""A ``ChatCompletionClient`` that runs the governor on every AgentChat model call.

Give an ``AssistantAgent`` ``model_client=GovernedChatCompletionClient(your_client,
governor)``. On every ``create`` / ``create_stream`` call that offers tools with the
agent's default ``tool_choice="auto"``, the governor decides the turn over the messages
and tools AgentChat passed; :class:`~.agentchat_host.AgentChatTurnHost` forces (a named
``tool_choice`` and ``parallel_tool_calls=False``), forbids (``tool_choice="none"``) or
passes the call through untouched, and the reply is read back. A reply that does not make
exactly the forced call, or calls a tool on a prose turn, raises
:class:`~jevqueue.errors.ProviderDisobeyedError` before AgentChat sees it, so nothing
executes (``on_disobey="message"`` returns a local text reply saying so instead).

A call without tools, or with a ``tool_choice`` the caller chose itself (AgentChat's
reflection turn passes ``"none"``), is not a routing decision: it passes through
untouched and is recorded as ``delegate``. A streamed passthrough streams live; a
constrained streamed turn is read to its end and read back before any chunk is yielded.

A call that offers a handoff tool (``AssistantAgent(handoffs=...)``, a ``Swarm``
participant) is refused with a ``ConfigurationError`` before any provider call: the agent
runs handoffs itself, around its ``PolicyWorkbench``, so no policy would ever judge or
audit them. Let a team pick the next speaker instead (``SelectorGroupChat``,
``RoundRobinGroupChat``); each participant's own ``PolicyWorkbench`` judges its calls.

What the agent read: given ``guard=`` (the agent's ``PolicyWorkbench(...).guard``), every
call — governed or passed through — first records the user's messages and the tool
results it shows the model in the guard's transcript (:mod:`.agentchat_transcript`), so
the workbench judges each later call with the provenance of its arguments.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from jevqueue.errors import ConfigurationError, ProviderDisobeyedError
from jevqueue.governor import Decision, Path
from jevqueue.plugins.autogen._agentchat_framework import ChatCompletionClient, CreateResult
from jevqueue.plugins.autogen.agentchat_host import AgentChatTurnHost, BufferedStream, LiveStream
from jevqueue.plugins.autogen.agentchat_messages import local_text
from jevqueue.plugins.autogen.agentchat_transcript import (
    USER_SOURCES,
    message_sources,
    read_messages,
)
from jevqueue.policy import Guard

__all__ = ["GovernedChatCompletionClient"]

NOT_ROUTED_NOTE = (
    "no tools offered, or the caller chose tool_choice itself: passed through unchanged"
)


class GovernedChatCompletionClient(ChatCompletionClient):
    """Wrap any AgentChat ``ChatCompletionClient`` so the governor decides every turn.

    Args:
        inner: The client that makes every provider call (``OpenAIChatCompletionClient``,
            ``AnthropicChatCompletionClient``, ``OllamaChatCompletionClient``, ...).
        governor: The governor (default: ``Governor()`` with the lexical ballot). Give
            each concurrently running agent its own governed client and governor.
        on_disobey: ``"raise"`` (default) raises ``ProviderDisobeyedError`` out of the
            agent's run; ``"message"`` answers with a local text reply that says the
            provider's reply was blocked. Nothing of the blocked reply runs either way.
        interrupted: A callable returning True when the user cancelled; consulted after
            the decision, before any provider call (a cancelled ``CancellationToken``
            counts too).
        guard: The guard that judges the agent's tool calls (``workbench.guard`` of its
            ``PolicyWorkbench``): each call records in its transcript what the model is
            shown, so a value the agent read in an untrusted output is labelled so when a
            later call carries it. Without one nothing is recorded but the outputs the
            workbench runs, and a value the user named is labelled by those alone.
        user_sources: The message sources whose messages are the user's words
            (default ``("user",)``, a run's ``task``; add a ``UserProxyAgent``'s name).

    Raises:
        ConfigurationError: ``inner`` is not a ``ChatCompletionClient``, ``governor`` has
            no ``astep``, ``on_disobey`` is unknown, ``guard`` is not a jevqueue ``Guard``
            or ``user_sources`` is not a list of names.
    """

    def __init__(
        self,
        inner: ChatCompletionClient,
        governor: Any = None,
        *,
        on_disobey: Literal["raise", "message"] = "raise",
        interrupted: Callable[[], bool] | None = None,
        guard: Guard | None = None,
        user_sources: Iterable[str] = USER_SOURCES,
    ) -> None:
        if guard is not None and not isinstance(guard, Guard):
            raise ConfigurationError(
                "guard must be the jevqueue Guard that judges the agent's tool calls "
                f"(PolicyWorkbench(...).guard); got {type(guard).__name__}"
            )
        if not isinstance(inner, ChatCompletionClient):
            raise ConfigurationError(
                "GovernedChatCompletionClient wraps an AgentChat ChatCompletionClient (for "
                f"example OpenAIChatCompletionClient); got {type(inner).__name__}"
            )
        if isinstance(inner, GovernedChatCompletionClient):
            raise ConfigurationError("the client is already governed: wrap the original once")
        if governor is None:
            from jevqueue.governor import Governor

            governor = Governor()
        if not callable(getattr(governor, "astep", None)):
            raise ConfigurationError(
                f"governor must be a jevqueue Governor (with astep); got {type(governor).__name__}"
            )
        if on_disobey not in ("raise", "message"):
            raise ConfigurationError(f"on_disobey must be 'raise' or 'message', not {on_disobey!r}")
        if interrupted is not None and not callable(interrupted):
            raise ConfigurationError("interrupted must be a callable returning a bool")
        self.inner = inner
        self.governor = governor
        self.on_disobey = on_disobey
        self._interrupted = interrupted
        self.guard = guard
        self.user_sources = message_sources(user_sources)
        self._decisions: deque[Decision] = deque(maxlen=1000)
        self.last_result: CreateResult | None = None

    # --- records --------------------------------------------------------------------

    @property
    def last_decision(self) -> Decision | None:
        """The decision of the most recent call."""
        return self._decisions[-1] if self._decisions else None

    @property
    def decisions(self) -> list[Decision]:
        """The decisions of recent calls, oldest first (the last 1000)."""
        return list(self._decisions)

    # --- the calls --------------------------------------------------------------------

    async def create(
        self,
        messages: Sequence[Any],
        *,
        tools: Sequence[Any] = [],
        tool_choice: Any = "auto",
        json_output: Any = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: Any = None,
    ) -> CreateResult:
        """Govern one model call, then answer through the wrapped client (or locally)."""
        _refuse_handoffs(tools)
        self._read(messages)
        call = _call(tool_choice, json_output, extra_create_args, cancellation_token)
        if not tools or tool_choice != "auto":
            self._decisions.append(Decision(path=Path.DELEGATE, reason=NOT_ROUTED_NOTE))
            result = await self.inner.create(messages, tools=tools, **call)
        else:
            host = AgentChatTurnHost(
                self.inner, messages, tools, call, stream=False, interrupted=self._interrupted
            )
            result = await self._governed(host)
        self.last_result = result
        return result

    async def create_stream(  # type: ignore[override]
        self,
        messages: Sequence[Any],
        *,
        tools: Sequence[Any] = [],
        tool_choice: Any = "auto",
        json_output: Any = None,
        extra_create_args: Mapping[str, Any] = {},
        cancellation_token: Any = None,
    ) -> AsyncGenerator[str | CreateResult, None]:
        """The streaming form of :meth:`create`: chunks, then the final ``CreateResult``."""
        _refuse_handoffs(tools)
        self._read(messages)
        call = _call(tool_choice, json_output, extra_create_args, cancellation_token)
        if not tools or tool_choice != "auto":
            self._decisions.append(Decision(path=Path.DELEGATE, reason=NOT_ROUTED_NOTE))
            async for chunk in self.inner.create_stream(messages, tools=tools, **call):
                if isinstance(chunk, CreateResult):
                    self.last_result = chunk
                yield chunk
            return
        host = AgentChatTurnHost(
            self.inner, messages, tools, call, stream=True, interrupted=self._interrupted
        )
        response = await self._governed(host)
        if isinstance(response, LiveStream):
            async for chunk in response.stream:
                if isinstance(chunk, CreateResult):
                    self.last_result = chunk
                yield chunk
            return
        if isinstance(response, BufferedStream):
            for chunk in response.chunks:
                yield chunk
            response = response.result
        self.last_result = response
        yield response

    def _read(self, messages: Sequence[Any]) -> None:
        """Record what the model is shown in the guard's transcript."""
        if self.guard is not None:
            read_messages(self.guard, messages, self.user_sources)

    async def _governed(self, host: AgentChatTurnHost) -> Any:
        try:
            return await self.governor.astep(host)
        except ProviderDisobeyedError as exc:
            if self.on_disobey == "raise":
                raise
            return local_text(
                f"jevqueue blocked the model's reply: {exc}. Nothing it asked for was run."
            )
        finally:
            last = getattr(self.governor, "last", None)
            if isinstance(last, Decision):
                self._decisions.append(last)

    # --- everything else is the wrapped client's -------------------------------------

    async def close(self) -> None:
        """Close the wrapped client."""
        await self.inner.close()

    def actual_usage(self) -> Any:
        """The wrapped client's usage (the governor spends no tokens)."""
        return self.inner.actual_usage()

    def total_usage(self) -> Any:
        """The wrapped client's total usage."""
        return self.inner.total_usage()

    def count_tokens(self, messages: Sequence[Any], *, tools: Sequence[Any] = []) -> int:
        """The wrapped client's token count."""
        return self.inner.count_tokens(messages, tools=tools)

    def remaining_tokens(self, messages: Sequence[Any], *, tools: Sequence[Any] = []) -> int:
        """The wrapped client's remaining tokens."""
        return self.inner.remaining_tokens(messages, tools=tools)

    @property
    def capabilities(self) -> Any:  # deprecated in AgentChat, still abstract
        """The wrapped client's (deprecated) capabilities."""
        return self.inner.model_info

    @property
    def model_info(self) -> Any:
        """The wrapped client's model info: the agent decides by it, as without jevqueue."""
        return self.inner.model_info


def _call(
    tool_choice: Any, json_output: Any, extra_create_args: Mapping[str, Any], token: Any
) -> dict[str, Any]:
    return {
        "tool_choice": tool_choice,
        "json_output": json_output,
        "extra_create_args": extra_create_args,
        "cancellation_token": token,
    }


def _refuse_handoffs(tools: Sequence[Any]) -> None:
    """Handoffs run around the workbench, unjudged and unaudited: refused before any call."""
    handoffs = [
        getattr(tool, "name", "?")
        for tool in tools
        # AgentChat's Handoff.handoff_tool: a FunctionTool over a closure of the handoff.
        if getattr(getattr(tool, "_func", None), "__qualname__", "").startswith("Handoff.")
    ]
    if handoffs:
        raise ConfigurationError(
            f"the agent offers the handoff tools {handoffs}, which AgentChat runs itself, "
            "around the PolicyWorkbench, so no policy judges or audits them: build the "
            "governed agent without handoffs= (and outside a Swarm), and let a team pick the "
            "next speaker instead (SelectorGroupChat, RoundRobinGroupChat), where each "
            "participant's own PolicyWorkbench judges its calls"
        )
