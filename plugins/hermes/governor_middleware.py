"""The governor as Hermes middleware: one decision per model call of an ``AIAgent``.

Hermes offers two kinds of LLM middleware: ``llm_request`` rewrites the request but never
sees the reply, ``llm_execution`` wraps the provider call itself (``next_call(request)``
returns the reply, before Hermes reads it). The governor needs both in one place — shape
the request, then read the reply back before any tool runs — so
:class:`GovernorMiddleware` is registered as ``llm_execution`` middleware, which Hermes
runs right after its ``llm_request`` pass, on the final request.

For each call it decides the path and sends one of three bodies: a forced route adds
``tool_choice={"type": "function", "function": {"name": X}}`` and
``parallel_tool_calls: false`` and appends the directive to a copy of the messages; a prose
turn adds ``tool_choice: "none"``; the passthrough hands Hermes' request on unchanged. The
reply is read back through Hermes' own response normaliser (the chat-completions
transport's ``normalize_response``) — what the agent loop itself will see. The agent's
interrupt flag (``AIAgent.is_interrupted``) is read after the decision, before the call.

Hermes is fail-open around middleware: an exception raised by an execution middleware
before it calls the provider makes Hermes call the provider itself, ungoverned, and one
raised after the call makes Hermes use the reply anyway. So this middleware never lets an
exception of its own escape. A reply that disobeys, an interruption, or a failure of the
middleware before the call is answered with a local response (model ``jevqueue-local``)
that says what happened and calls nothing; Hermes ends the turn on it. Errors of the
provider call itself propagate as Hermes expects, so its retries keep working.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Literal

from jevqueue.errors import ConfigurationError, ProviderDisobeyedError, TurnInterruptedError
from jevqueue.governor import Governor
from jevqueue.plugins.hermes._framework import get_transport
from jevqueue.plugins.hermes.local_response import local_response

__all__ = ["CHAT_COMPLETIONS", "GovernorMiddleware", "Refusal"]

CHAT_COMPLETIONS = "chat_completions"
"""The one Hermes API mode whose requests the middleware knows how to constrain."""

DirectiveRole = Literal["system", "user"]


@dataclasses.dataclass(frozen=True)
class Refusal:
    """A local response given instead of a provider reply.

    Attributes:
        reason: The text of the local response (what the agent and its user see).
        response: The local response itself.
        error: What made the middleware refuse.
    """

    reason: str
    response: Any
    error: BaseException


@dataclasses.dataclass
class _CallHost:
    """The seven-method host over one Hermes model call."""

    request: dict[str, Any]
    next_call: Callable[[dict[str, Any]], Any]
    api_mode: str
    directive_role: DirectiveRole
    interrupt: Callable[[], bool] | None
    sent: bool = False
    received: bool = False
    body: dict[str, Any] | None = None

    def tools(self) -> list[dict[str, Any]]:
        return list(self.request.get("tools") or [])

    def messages(self) -> list[dict[str, Any]]:
        return list(self.request.get("messages") or [])

    def generate(self, *, force_tool: str | None, directive: str) -> Any:
        if force_tool is None and not directive:
            body = self.request  # the passthrough: Hermes' own request, the same object
        else:
            if self.api_mode != CHAT_COMPLETIONS:
                raise ConfigurationError(
                    f"cannot constrain a {self.api_mode!r} request: jevqueue forces tools on "
                    f"{CHAT_COMPLETIONS!r} requests only; run the agent with api_mode="
                    f"{CHAT_COMPLETIONS!r} or without the governor"
                )
            body = {
                **self.request,
                "messages": [
                    *self.request.get("messages", []),
                    {"role": self.directive_role, "content": directive},
                ],
            }
            if force_tool is not None:
                body["tool_choice"] = {"type": "function", "function": {"name": force_tool}}
                body["parallel_tool_calls"] = False
            else:
                body["tool_choice"] = "none"
        self.sent = True
        self.body = body
        response = self.next_call(body)
        self.received = True
        return response

    def called_tools(self, response: Any) -> list[str]:
        transport = get_transport(self.api_mode)
        if transport is None:
            raise ConfigurationError(
                f"Hermes has no response normaliser for api_mode {self.api_mode!r}, so the "
                "reply cannot be read back"
            )
        normalized = transport.normalize_response(response)
        return [str(call.name) for call in (normalized.tool_calls or [])]

    def say(self, text: str) -> Any:
        return local_response(text)

    def say_tool_call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        return local_response(tool_call=(name, arguments))

    def interrupted(self) -> bool:
        return bool(self.interrupt()) if self.interrupt is not None else False


def _interrupt_flag(agent: Any) -> bool:
    # ``AIAgent.is_interrupted`` is a property (the ``_interrupt_requested`` flag that
    # ``AIAgent.interrupt()`` sets); accept a method too.
    flag = getattr(agent, "is_interrupted", False)
    return bool(flag() if callable(flag) else flag)


class GovernorMiddleware:
    """Runs the governor on every model call of one Hermes ``AIAgent``.

    Register it as Hermes ``llm_execution`` middleware — with
    :class:`~jevqueue.plugins.hermes.HermesGovernance` (``install()``), or from a Hermes
    plugin's ``register(ctx)`` as ``ctx.register_middleware("llm_execution", middleware)``.

    Args:
        governor: The governor (``Governor()`` when omitted); ``governor.last`` holds the
            latest decision.
        agent: The agent governed. Hermes middleware is process-wide: calls of other
            agents (another ``session_id``) pass through untouched. Its
            ``is_interrupted`` is the interrupt flag. ``None`` governs every agent's
            calls and reads no flag.
        directive_role: The role of the appended directive message; ``"user"`` for
            servers whose chat template rejects a second system message.

    Attributes:
        refusals: The local responses given instead of a provider reply, newest last.

    Raises:
        ConfigurationError: ``directive_role`` is neither ``"system"`` nor ``"user"``.
    """

    def __init__(
        self,
        governor: Governor | None = None,
        *,
        agent: Any = None,
        directive_role: DirectiveRole = "system",
    ) -> None:
        if directive_role not in ("system", "user"):
            raise ConfigurationError(
                f"directive_role must be 'system' or 'user', not {directive_role!r}"
            )
        self.governor = governor if governor is not None else Governor()
        self.agent = agent
        self.directive_role: DirectiveRole = directive_role
        self.refusals: list[Refusal] = []

    def _refuse(self, reason: str, error: BaseException) -> Any:
        response = local_response(reason)
        self.refusals.append(Refusal(reason, response, error))
        return response

    def __call__(
        self,
        *,
        request: dict[str, Any],
        next_call: Callable[[dict[str, Any]], Any],
        session_id: str = "",
        api_mode: str = CHAT_COMPLETIONS,
        **_: Any,
    ) -> Any:
        """The ``llm_execution`` callback: decide, send, read back; never raises our errors."""
        agent = self.agent
        if agent is not None and session_id != (getattr(agent, "session_id", "") or ""):
            return next_call(request)  # another agent's call
        host = _CallHost(
            request=request,
            next_call=next_call,
            api_mode=api_mode or CHAT_COMPLETIONS,
            directive_role=self.directive_role,
            interrupt=(lambda: _interrupt_flag(agent)) if agent is not None else None,
        )
        try:
            return self.governor.step(host)
        except ProviderDisobeyedError as error:
            return self._refuse(
                "jevqueue blocked the model's reply: it did not make the call it was "
                f"constrained to (expected {error.expected!r}, it called {error.called!r}); "
                "nothing was run.",
                error,
            )
        except TurnInterruptedError as error:
            return self._refuse("Interrupted before the model was called; nothing was sent.", error)
        except Exception as error:
            if host.sent and not host.received:
                raise  # the provider call itself failed: Hermes' retries handle it
            # Before the call, or reading a reply back: Hermes would send or use it ungoverned.
            return self._refuse(
                f"jevqueue could not govern this model call ({type(error).__name__}: {error}); "
                "nothing was sent.",
                error,
            )
