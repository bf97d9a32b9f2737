"""Both halves on one Hermes ``AIAgent``: install, uninstall, or register from a plugin.

::

    agent = AIAgent(base_url=..., model=..., enabled_toolsets=[...])
    with HermesGovernance(agent, governor=Governor(), pep=pep, specs=specs, context=context):
        agent.run_conversation("...")

Hermes keeps hooks and middleware in one process-wide plugin manager; a Hermes plugin
adds to it through ``ctx.register_hook`` / ``ctx.register_middleware`` in its
``register(ctx)``. :meth:`HermesGovernance.register` does exactly that, for use inside
such a plugin. :meth:`HermesGovernance.install` adds the same three callbacks to the
running process's plugin manager directly (and :meth:`uninstall` removes them), for an
application that builds its agent in code.

The governor acts on the given agent's model calls only (its current ``session_id``); other
agents' calls pass through. The policy guard judges every tool call in the process,
subagents' included: a call it cannot attribute must not run unjudged. Agents that share a
process therefore share one policy (one set of ``specs``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jevqueue.errors import ConfigurationError
from jevqueue.governor import Governor
from jevqueue.plugins.hermes._framework import get_plugin_manager
from jevqueue.plugins.hermes.governor_middleware import (
    CHAT_COMPLETIONS,
    DirectiveRole,
    GovernorMiddleware,
)
from jevqueue.plugins.hermes.policy_guard import ApprovalCallback, PolicyGuard
from jevqueue.policy import ExecutionContext, ToolSpec

__all__ = ["HermesGovernance"]


class HermesGovernance:
    """The governor and the PEP around one Hermes agent.

    Args:
        agent: The ``AIAgent``; its ``session_id`` scopes the governor and its
            ``is_interrupted`` is the interrupt flag.
        governor: The governor; ``None`` governs no model call (policy only).
        pep: The policy enforcement point; ``None`` judges no tool call (governor only).
        specs: One declaration per tool the agent has (required with ``pep``).
        context: The execution context (required with ``pep``).
        approvals: Who approves calls that need an explicit approval.
        directive_role: The role of the governor's directive message.

    Raises:
        ConfigurationError: Neither half was asked for; the agent's API mode is not
            chat completions while a governor is given; or a tool the agent has is not
            declared in ``specs``.
    """

    def __init__(
        self,
        agent: Any,
        *,
        governor: Governor | None = None,
        pep: Any = None,
        specs: Iterable[ToolSpec] = (),
        context: ExecutionContext | Mapping[str, Any] | None = None,
        approvals: ApprovalCallback | None = None,
        directive_role: DirectiveRole = "system",
    ) -> None:
        if governor is None and pep is None:
            raise ConfigurationError(
                "HermesGovernance needs a governor, a pep, or both: it would change nothing"
            )
        session = getattr(agent, "session_id", None)
        if not isinstance(session, str) or not session:
            raise ConfigurationError(
                f"HermesGovernance needs a Hermes AIAgent with a session_id, not "
                f"{type(agent).__name__}"
            )
        self.agent = agent
        self.middleware: GovernorMiddleware | None = None
        self.guard: PolicyGuard | None = None
        if governor is not None:
            mode = getattr(agent, "api_mode", CHAT_COMPLETIONS)
            if mode != CHAT_COMPLETIONS:
                raise ConfigurationError(
                    f"the agent runs in api_mode {mode!r}; jevqueue forces tools on "
                    f"{CHAT_COMPLETIONS!r} requests only"
                )
            self.middleware = GovernorMiddleware(
                governor, agent=agent, directive_role=directive_role
            )
        if pep is not None:
            if context is None:
                raise ConfigurationError("a pep needs an execution context: pass context=...")
            # Every tool call of the process, not only this session's: hooks are process-wide,
            # and a subagent's calls (another session) must not run unjudged.
            self.guard = PolicyGuard(pep=pep, specs=specs, context=context, approvals=approvals)
            offered = sorted(getattr(agent, "valid_tool_names", ()) or ())
            undeclared = [name for name in offered if name not in self.guard.registry]
            if undeclared:
                raise ConfigurationError(
                    f"the agent's tools {undeclared} have no policy declaration: pass "
                    "specs=[tool_spec(name, side_effects=...), ...] for every tool it has, "
                    "or disable their toolsets"
                )

    def _callbacks(self) -> list[tuple[str, str, Any]]:
        callbacks: list[tuple[str, str, Any]] = []
        if self.middleware is not None:
            callbacks.append(("middleware", "llm_execution", self.middleware))
        if self.guard is not None:
            callbacks.append(("hook", "pre_tool_call", self.guard.pre_tool_call))
            callbacks.append(("middleware", "tool_execution", self.guard.tool_execution))
        return callbacks

    def register(self, ctx: Any) -> None:
        """Register the callbacks through a Hermes plugin context (in ``register(ctx)``)."""
        for kind, name, callback in self._callbacks():
            if kind == "hook":
                ctx.register_hook(name, callback)
            else:
                ctx.register_middleware(name, callback)

    def install(self) -> HermesGovernance:
        """Add the callbacks to this process's Hermes plugin manager."""
        manager = get_plugin_manager()
        for kind, name, callback in self._callbacks():
            table = manager._hooks if kind == "hook" else manager._middleware
            table.setdefault(name, []).append(callback)
        return self

    def uninstall(self) -> None:
        """Remove the callbacks :meth:`install` added."""
        manager = get_plugin_manager()
        for kind, name, callback in self._callbacks():
            table = manager._hooks if kind == "hook" else manager._middleware
            entries = table.get(name, [])
            table[name] = [entry for entry in entries if entry != callback]

    def __enter__(self) -> HermesGovernance:
        return self.install()

    def __exit__(self, *exc_info: object) -> None:
        self.uninstall()
