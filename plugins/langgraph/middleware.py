"""The same governance as ``AgentMiddleware`` for ``langchain.agents.create_agent``.

::

    agent = create_agent(
        model, tools,
        middleware=[GovernorMiddleware(governor), PolicyMiddleware(pep=pep, specs=specs)],
        checkpointer=InMemorySaver(),
    )

:class:`GovernorMiddleware` governs each model call in ``wrap_model_call``: it overrides
the request's ``tool_choice`` (and ``parallel_tool_calls`` in ``model_settings``) for that
one call, appends the directive to a copy of the messages, and reads the answer back.
The passthrough hands the request on untouched. A ``response_format`` that uses a tool
strategy sets its own ``tool_choice`` and does not combine with forcing.

:class:`PolicyMiddleware` judges each tool call in ``wrap_tool_call`` with the core guard
and runs it with the judged arguments, once. ``create_agent`` runs every tool call as its
own task, so an approval ``interrupt()`` pauses only that call, and resuming re-runs only
that call. With several calls waiting at once, resume with
``Command(resume={interrupt_id: answer, ...})``. With ``approver=`` the approver is asked
inline instead of pausing, unless it asks to pause (``InboxApprover(pause=True)``: the
call pauses, its request filed in the inbox, and resumes with
``Command(resume=approver.answer(digest))``).

What the agent read is the agent state's messages (``request.state``): each call is judged
with the transcript of the messages before the model's message that proposed it, as
:func:`~jevqueue.plugins.langgraph.policy_tool_node` judges it (see
:mod:`~jevqueue.plugins.langgraph.transcript`).

Routes around the guard, refused before the first model call (``create_agent`` offers a
middleware no look at the agent when it is built): a tool the agent offers without a
declaration, and a provider-executed (dict) tool. ``PolicyMiddleware`` judges the request
it is handed, so it must be **last** among middleware that wrap tool calls (a middleware
after it could change or re-run a call after it was judged): another one after it is
refused at the first tool call, before anything runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from jevqueue.errors import ConfigurationError, ProviderDisobeyedError
from jevqueue.governor import Governor
from jevqueue.plugins.langgraph._framework import (
    AIMessage,
    HumanMessage,
    SystemMessage,
)
from jevqueue.plugins.langgraph.called_tools import called_tools
from jevqueue.plugins.langgraph.model_node import OnDisobey, local_message
from jevqueue.plugins.langgraph.openai_forms import ToolForms, openai_messages
from jevqueue.plugins.langgraph.tool_choice import ToolChoice
from jevqueue.plugins.langgraph.tool_node import (
    PolicyToolNode,
    refuse_provider_tools,
    require_declared,
)
from jevqueue.policy import (
    ApprovalRequest,
    Approver,
    ExecutionContext,
    Guard,
    ToolRegistry,
    ToolSpec,
)

try:
    from langchain.agents.middleware import AgentMiddleware, ModelResponse
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'jevqueue.plugins.langgraph needs LangChain\'s agents: pip install "jevqueue[langgraph]"'
    ) from exc

__all__ = ["GovernorMiddleware", "PolicyMiddleware"]


def _message(response: Any) -> Any:
    if isinstance(response, AIMessage):
        return response
    for message in reversed(getattr(response, "result", None) or []):
        if isinstance(message, AIMessage):
            return message
    return response


class _RequestHost:
    def __init__(self, owner: GovernorMiddleware, request: Any, handler: Any) -> None:
        self._owner = owner
        self._request = request
        self._handler = handler
        self._choice = owner.tool_choice or ToolChoice.for_model(request.model)

    def tools(self) -> list[dict[str, Any]]:
        return self._owner._tool_forms.convert(self._request.tools)

    def messages(self) -> list[dict[str, Any]]:
        request = self._request
        system = [request.system_message] if request.system_message is not None else []
        return openai_messages([*system, *request.messages])

    def generate(self, *, force_tool: str | None, directive: str) -> Any:
        request = self._request
        if not directive and force_tool is None:
            return self._handler(request)
        choice = self._choice
        role = SystemMessage if choice.directive_role == "system" else HumanMessage
        changes: dict[str, Any] = {"messages": [*request.messages, role(content=directive)]}
        if force_tool is not None:
            keywords = dict(choice.force(force_tool))
            changes["tools"] = choice.forced_tools(request.tools, force_tool)
        elif choice.forbid is None:
            keywords = {}
            changes["tools"] = []
        else:
            keywords = dict(choice.forbid)
        changes["tool_choice"] = keywords.pop("tool_choice", None)
        changes["model_settings"] = {**request.model_settings, **keywords}
        return self._handler(request.override(**changes))

    def called_tools(self, response: Any) -> list[str]:
        return called_tools(_message(response))

    def say(self, text: str) -> Any:
        return ModelResponse(result=[local_message(text)])

    def say_tool_call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        return ModelResponse(result=[local_message(tool_call=(name, arguments))])

    def interrupted(self) -> bool:
        check = self._owner.interrupted
        return bool(check()) if check is not None else False


class GovernorMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    """Runs the governor on every model call of a ``create_agent`` agent.

    Args:
        governor: The governor (``Governor()`` when omitted); ``governor.last`` holds
            the latest decision.
        tool_choice: The integration's force / forbid mapping (picked from the model).
        on_disobey: ``"raise"`` (default) raises ``ProviderDisobeyedError``; ``"message"``
            replaces the disobeying response with a local message. Either way none of
            its calls runs.
        interrupted: Consulted after the decision, before the model call.
    """

    def __init__(
        self,
        governor: Governor | None = None,
        *,
        tool_choice: ToolChoice | None = None,
        on_disobey: OnDisobey = "raise",
        interrupted: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__()
        self.governor = governor if governor is not None else Governor()
        self.tool_choice = tool_choice
        self.on_disobey = on_disobey
        self.interrupted = interrupted
        self._tool_forms = ToolForms()

    def _refused(self, error: ProviderDisobeyedError) -> Any:
        if self.on_disobey == "raise":
            raise error
        return ModelResponse(
            result=[
                local_message(
                    f"The model did not make the call it was constrained to (expected "
                    f"{error.expected!r}, it called {error.called!r}); nothing was executed."
                )
            ]
        )

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Decide the turn, bind the request for it, read the answer back."""
        try:
            return self.governor.step(_RequestHost(self, request, handler))
        except ProviderDisobeyedError as error:
            return self._refused(error)

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """The async form of :meth:`wrap_model_call`."""
        try:
            return await self.governor.astep(_RequestHost(self, request, handler))
        except ProviderDisobeyedError as error:
            return self._refused(error)


class PolicyMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    """Judges every tool call of a ``create_agent`` agent with the guard before it runs.

    Args:
        pep: The policy enforcement point.
        specs: One declaration per tool (:func:`~jevqueue.plugins.langgraph.tool_spec`).
        registry: Deprecated: pass the declarations as ``specs``.
        context: The default execution context; a run's
            ``config["configurable"]["jevqueue_context"]`` overrides it.
        approver: An :class:`~jevqueue.policy.Approver` asked inline for a call that needs
            an explicit approval; without one, or with ``InboxApprover(pause=True)``, the
            call pauses with ``interrupt()``.

    Attributes:
        guard: The core guard (``None`` until the first call without a default context).

    ``create_agent`` gives a middleware no look at the agent's tools when it is built, so
    the refusals of routes around the guard happen before the first model call instead:
    an offered tool without a declaration, or a provider-executed (dict) tool, raises
    ``ConfigurationError`` before the model is asked anything.
    """

    def __init__(
        self,
        *,
        pep: Any,
        specs: Iterable[ToolSpec] | ToolRegistry = (),
        registry: ToolRegistry | None = None,
        context: ExecutionContext | Mapping[str, Any] | None = None,
        approver: Approver | None = None,
    ) -> None:
        super().__init__()
        # The same interceptor the policy tool node uses, without a node of its own.
        self._enforcer = PolicyToolNode(
            [],
            pep=pep,
            registry=registry,
            specs=specs,
            context=context,
            approver=approver,
            owner="PolicyMiddleware",
        )

    @property
    def guard(self) -> Guard | None:
        """The core guard that judges, asks and runs each call."""
        return self._enforcer.guard

    def approval_requests(self, paused: Any) -> list[ApprovalRequest]:
        """The core approval requests behind one of the agent's pauses (same process)."""
        return self._enforcer.approval_requests(paused)

    def _refuse_routes(self, request: Any) -> None:
        tools = list(getattr(request, "tools", None) or ())
        refuse_provider_tools(tools, "PolicyMiddleware")
        names = [str(tool.name) for tool in tools if getattr(tool, "name", None) is not None]
        require_declared(self._enforcer.registry, names, "PolicyMiddleware")

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Refuse, before the model is asked, tools no guard could judge."""
        self._refuse_routes(request)
        return handler(request)

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """The async form of :meth:`wrap_model_call`."""
        self._refuse_routes(request)
        return await handler(request)

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Run the call through ``handler`` with the judged arguments, only when allowed."""
        _refuse_inner_wrappers(handler)
        return self._enforcer.wrap_tool_call(request, handler)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """The async form of :meth:`wrap_tool_call`."""
        _refuse_inner_wrappers(handler)
        return await self._enforcer.awrap_tool_call(request, handler)


def _refuse_inner_wrappers(handler: Any) -> None:
    """Refuse a middleware that wraps tool calls inside ``PolicyMiddleware``.

    ``create_agent`` hands the first middleware's ``wrap_tool_call`` a ``handler`` that
    calls the next one: when that is what ``PolicyMiddleware`` gets, a middleware after it
    could change or re-run a call after the guard judged it.

    Raises:
        ConfigurationError: another middleware wraps tool calls after ``PolicyMiddleware``.
    """
    if getattr(handler, "__module__", None) == "langchain.agents.factory" and "call_inner" in (
        getattr(handler, "__qualname__", "")
    ):
        raise ConfigurationError(
            "PolicyMiddleware must be the last of the agent's middleware that wrap tool calls: "
            "a middleware after it could change or re-run a call after the guard judged it; "
            "move PolicyMiddleware to the end of create_agent(middleware=[...])"
        )
