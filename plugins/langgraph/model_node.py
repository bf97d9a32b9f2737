"""The governed model node: the governor runs every model turn over ``state["messages"]``."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from jevqueue.errors import ConfigurationError, ProviderDisobeyedError
from jevqueue.governor import Decision, Governor
from jevqueue.host import LOCAL_MODEL_ID
from jevqueue.plugins.langgraph._framework import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    Runnable,
    RunnableConfig,
    SystemMessage,
    convert_to_openai_tool,
    var_child_runnable_config,
)
from jevqueue.plugins.langgraph.called_tools import called_tools
from jevqueue.plugins.langgraph.openai_forms import openai_messages
from jevqueue.plugins.langgraph.tool_choice import ToolChoice

__all__ = ["GovernedModelNode", "governed_model_node", "local_message"]

OnDisobey = Literal["raise", "message"]

_DIRECTIVE_CACHE_SIZE = 64


def local_message(
    text: str = "", *, tool_call: tuple[str, Mapping[str, Any]] | None = None
) -> AIMessage:
    """An ``AIMessage`` built locally, stamped ``model_name = "jevqueue-local"``.

    Args:
        text: The message text.
        tool_call: ``(name, arguments)`` to make it call one tool, with a fresh call id.
    """
    calls = []
    if tool_call is not None:
        name, arguments = tool_call
        calls = [
            {
                "name": name,
                "args": dict(arguments),
                "id": f"call_jevqueue_{uuid.uuid4().hex[:16]}",
                "type": "tool_call",
            }
        ]
    return AIMessage(
        content=text,
        tool_calls=calls,
        response_metadata={"model_name": LOCAL_MODEL_ID},
    )


class _TurnHost:
    """The seven-method host over one turn's messages (sync or async generate)."""

    def __init__(
        self,
        node: GovernedModelNode,
        messages: list[BaseMessage],
        config: RunnableConfig | None,
        *,
        asynchronous: bool,
    ) -> None:
        self._node = node
        self._messages = messages
        self._config = config
        self._asynchronous = asynchronous

    def tools(self) -> list[dict[str, Any]]:
        return self._node.tool_schemas

    def messages(self) -> list[dict[str, Any]]:
        return openai_messages(self._messages)

    def generate(self, *, force_tool: str | None, directive: str) -> Any:
        node = self._node
        if force_tool is not None:
            runnable = node.bound_forcing(force_tool)
        elif directive:
            runnable = node.bound_forbidding()
        else:
            runnable = node.bound_passthrough()
        messages = self._messages
        if directive:
            # A new list: the caller's messages keep their identity (prompt-cache prefix).
            messages = [*messages, node._directive_message(directive)]
        config = self._config
        if config is not None and var_child_runnable_config.get() is config:
            # The run already carries this very config as its ambient one: passing it again
            # would only make LangChain merge it with itself.
            config = None
        if self._asynchronous:
            return runnable.ainvoke(messages, config)
        return runnable.invoke(messages, config)

    def called_tools(self, response: Any) -> list[str]:
        return called_tools(response)

    def say(self, text: str) -> AIMessage:
        return local_message(text)

    def say_tool_call(self, name: str, arguments: Mapping[str, Any]) -> AIMessage:
        return local_message(tool_call=(name, arguments))

    def interrupted(self) -> bool:
        check = self._node.interrupted
        return bool(check()) if check is not None else False


class GovernedModelNode(Runnable):  # type: ignore[type-arg]
    """A LangGraph node that runs one governed model turn and appends the response.

    Use :func:`governed_model_node` to build one. The node reads ``state[messages_key]``,
    lets the governor pick the path, binds the model for that one turn only (force one
    tool, forbid tools, or the untouched ``model.bind_tools(tools)``), reads the answer
    back, and returns ``{messages_key: [response]}``.

    Attributes:
        model: The chat model.
        tools: The tools offered to it.
        governor: The governor; ``governor.last`` holds the latest turn's decision.
        tool_choice: The integration's force / forbid mapping.
        on_disobey: ``"raise"`` or ``"message"`` (see :func:`governed_model_node`).
    """

    def __init__(
        self,
        model: Any,
        tools: Sequence[Any],
        *,
        governor: Governor,
        tool_choice: ToolChoice | None = None,
        on_disobey: OnDisobey = "raise",
        system_prompt: str | None = None,
        interrupted: Callable[[], bool] | None = None,
        on_decision: Callable[[Decision], None] | None = None,
        messages_key: str = "messages",
        name: str = "agent",
    ) -> None:
        if not callable(getattr(model, "bind_tools", None)):
            raise ConfigurationError(
                f"{type(model).__name__} has no bind_tools(): the governed node needs a "
                "LangChain chat model that supports tool calling"
            )
        if on_disobey not in ("raise", "message"):
            raise ConfigurationError(f"on_disobey must be 'raise' or 'message', not {on_disobey!r}")
        if not isinstance(governor, Governor):
            raise ConfigurationError(
                f"governor must be a jevqueue.Governor, not {type(governor).__name__}"
            )
        self.model = model
        self.tools = list(tools)
        self.governor = governor
        self.tool_choice = tool_choice if tool_choice is not None else ToolChoice.for_model(model)
        self.on_disobey: OnDisobey = on_disobey
        self.system_prompt = system_prompt
        self.interrupted = interrupted
        self.on_decision = on_decision
        self.messages_key = messages_key
        self.tool_schemas = [convert_to_openai_tool(tool) for tool in self.tools]
        self._system_message: SystemMessage | None = None
        self._directives: dict[tuple[str, str], BaseMessage] = {}
        self._passthrough: Any = None
        self._forbidding: Any = None
        self._forcing: dict[str, Any] = {}
        self.name = name

    # --- the three bindings, built once each -----------------------------------------

    def bound_passthrough(self) -> Any:
        """``model.bind_tools(tools)``: no tool_choice, no parallel-calls flag."""
        if self._passthrough is None:
            self._passthrough = self.tool_choice.bind_passthrough(self.model, self.tools)
        return self._passthrough

    def bound_forbidding(self) -> Any:
        """The model bound to answer without calling tools."""
        if self._forbidding is None:
            self._forbidding = self.tool_choice.bind_forbid(self.model, self.tools)
        return self._forbidding

    def bound_forcing(self, tool_name: str) -> Any:
        """The model bound to call ``tool_name`` exactly once (a new binding, per turn)."""
        bound = self._forcing.get(tool_name)
        if bound is None:
            bound = self.tool_choice.bind_force(self.model, self.tools, tool_name)
            self._forcing[tool_name] = bound
        return bound

    def _directive_message(self, directive: str) -> BaseMessage:
        """The message that carries ``directive`` to the model, in the integration's role."""
        role = self.tool_choice.directive_role
        key = (role, directive)
        message = self._directives.get(key)
        # Reused while nothing has altered it; the governor's directives are few and fixed.
        if (
            message is None
            or message.content != directive
            or message.id is not None
            or message.name is not None
            or message.additional_kwargs
            or message.response_metadata
        ):
            kind = SystemMessage if role == "system" else HumanMessage
            message = kind(content=directive)
            if len(self._directives) >= _DIRECTIVE_CACHE_SIZE:
                self._directives.clear()
            self._directives[key] = message
        return message

    # --- the node --------------------------------------------------------------------

    def _conversation(self, state: Any) -> list[BaseMessage]:
        if isinstance(state, Mapping):
            messages = state.get(self.messages_key)
        else:
            messages = getattr(state, self.messages_key, state)
        if not isinstance(messages, list):
            raise ConfigurationError(
                f"the governed model node reads state[{self.messages_key!r}] as a list of "
                f"messages; got {type(messages).__name__}"
            )
        prompt = self.system_prompt
        if prompt:
            system = self._system_message
            if system is None or system.content != prompt:
                # Built once, not on every turn.
                system = self._system_message = SystemMessage(content=prompt)
            return [system, *messages]
        return messages

    def _refused(self, error: ProviderDisobeyedError) -> dict[str, list[Any]]:
        if self.on_disobey == "raise":
            raise error
        text = (
            f"The model did not make the call it was constrained to (expected "
            f"{error.expected!r}, it called {error.called!r}); nothing was executed."
        )
        return {self.messages_key: [local_message(text)]}

    def invoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, list[Any]]:
        """Run one governed turn over ``input[messages_key]``; the node's entry point."""
        return self._run(input, config)

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, list[Any]]:
        """The async form of :meth:`invoke`: the model is called with ``ainvoke``."""
        return await self._arun(input, config)

    def _report(self) -> None:
        if self.on_decision is not None and self.governor.last is not None:
            self.on_decision(self.governor.last)

    def _run(self, state: Any, config: RunnableConfig | None) -> dict[str, list[Any]]:
        host = _TurnHost(self, self._conversation(state), config, asynchronous=False)
        try:
            return {self.messages_key: [self.governor.step(host)]}
        except ProviderDisobeyedError as error:
            return self._refused(error)
        finally:
            self._report()

    async def _arun(self, state: Any, config: RunnableConfig | None) -> dict[str, list[Any]]:
        host = _TurnHost(self, self._conversation(state), config, asynchronous=True)
        try:
            return {self.messages_key: [await self.governor.astep(host)]}
        except ProviderDisobeyedError as error:
            return self._refused(error)
        finally:
            self._report()


def governed_model_node(
    model: Any,
    tools: Sequence[Any],
    *,
    governor: Governor | None = None,
    tool_choice: ToolChoice | None = None,
    on_disobey: OnDisobey = "raise",
    system_prompt: str | None = None,
    interrupted: Callable[[], bool] | None = None,
    on_decision: Callable[[Decision], None] | None = None,
    messages_key: str = "messages",
    name: str = "agent",
) -> GovernedModelNode:
    """Build the governed model node for a LangGraph graph.

    Args:
        model: Any LangChain chat model with ``bind_tools`` (``ChatOpenAI``,
            ``ChatAnthropic``, ...). Pass the plain model, not one already bound to tools.
        tools: The tools the model may call (LangChain tools, functions or OpenAI dicts);
            their descriptions are the ballot.
        governor: The governor (a default ``Governor()`` when omitted).
        tool_choice: How this integration forces and forbids; picked from the model's
            class when omitted (:meth:`ToolChoice.for_model`).
        on_disobey: When the model ignores the constraint: ``"raise"`` (default) raises
            :class:`~jevqueue.errors.ProviderDisobeyedError` out of the graph run;
            ``"message"`` drops the response and appends a local message saying so. In
            both cases the disobeying response never reaches the state, so none of its
            calls runs.
        system_prompt: Prepended to the messages on every call, when given.
        interrupted: A callable consulted after the decision and before the model call;
            when it returns True the turn raises ``TurnInterruptedError``.
        on_decision: Called with every turn's :class:`~jevqueue.governor.Decision` (the
            same record as ``governor.last``), also when the turn failed: for logs and
            metrics.
        messages_key: The state key holding the messages.
        name: The node's run name.

    Returns:
        A runnable node: ``graph.add_node("agent", node)``. Works with ``invoke`` and
        ``ainvoke``.
    """
    return GovernedModelNode(
        model,
        tools,
        governor=governor if governor is not None else Governor(),
        tool_choice=tool_choice,
        on_disobey=on_disobey,
        system_prompt=system_prompt,
        interrupted=interrupted,
        on_decision=on_decision,
        messages_key=messages_key,
        name=name,
    )
