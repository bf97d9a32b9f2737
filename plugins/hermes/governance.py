"""Both halves on one Hermes ``AIAgent``: install, uninstall, or register from a plugin.

::

    agent = AIAgent(base_url=..., model=..., enabled_toolsets=[...])
    with HermesGovernance(agent, governor=Governor(), pep=pep, specs=specs, context=context):
        agent.run_conversation("...")

Hermes keeps hooks and middleware in one process-wide plugin manager; a Hermes plugin
adds to it through ``ctx.register_hook`` / ``ctx.register_middleware`` in its
``register(ctx)``. :meth:`HermesGovernance.register` does exactly that, for use inside
such a plugin. :meth:`HermesGovernance.install` adds the same four callbacks to the
running process's plugin manager directly (and :meth:`uninstall` removes them), for an
application that builds its agent in code.

The governor acts on the given agent's model calls only (its current ``session_id``); other
agents' calls pass through. The policy guard judges every tool call in the process,
subagents' included: a call it cannot attribute must not run unjudged. Agents that share a
process therefore share one policy (one set of ``specs``).

Routes around the guard, and what building the governance does about each:

* **An undeclared tool** (any tool in ``agent.valid_tool_names`` without a ``tool_spec``) is
  refused when the governance is built; one registered later is refused when called.
* **Code execution** (``execute_code``): the script's own effects never pass
  ``pre_tool_call`` (the tools it calls through Hermes' sandbox RPC do, and are judged).
  Refused unless declared; declared, each script is judged as one call (declare it with
  ``side_effects={"shell_command"}`` so the policy asks for an approval).
* **Delegated subagents** (``delegate_task``): refused unless declared; declared, the
  delegation is judged and every subagent tool call is judged by the same process-wide
  guard while it is installed (a background subagent that outlives ``uninstall()`` is
  not: keep the governance installed while delegations may run).
* **MCP tools** (toolsets ``mcp-<server>``): ordinary registry tools, refused unless
  declared, judged per call; the error names them as MCP tools.
* **The Codex app-server runtime** (``api_mode="codex_app_server"``): Codex runs its own
  shell and patch tools, which never reach Hermes' dispatcher: refused with a ``pep``.
* **A call that skips the hook** (``skip_pre_tool_call_hook=True`` without a judgement):
  refused by the execution gate. Code that calls ``registry.dispatch`` itself (a Hermes
  plugin's ``ctx.dispatch_tool``) bypasses both hook and middleware; that is the
  application's code, not a route the model can take.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jevqueue.errors import ConfigurationError
from jevqueue.governor import Governor
from jevqueue.plugins.hermes._framework import get_plugin_manager, tool_registry
from jevqueue.plugins.hermes.governor_middleware import (
    CHAT_COMPLETIONS,
    DirectiveRole,
    GovernorMiddleware,
)
from jevqueue.plugins.hermes.policy_guard import PolicyGuard
from jevqueue.policy import Approver, ExecutionContext, ToolSpec
from jevqueue.policy._approval_request import deprecated_approver

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
        approver: Who approves calls that need an explicit approval
            (:class:`~jevqueue.policy.Approver`, a plain callable: Hermes checks calls
            synchronously).
        directive_role: The role of the governor's directive message.
        approvals: Deprecated name of ``approver``.

    Raises:
        ConfigurationError: Neither half was asked for; the agent's API mode is not
            chat completions while a governor is given; a ``pep`` is given for an agent
            whose tools Codex runs (``codex_app_server``); or a tool the agent has
            (``execute_code``, ``delegate_task`` and MCP tools included) is not declared
            in ``specs``.
    """

    def __init__(
        self,
        agent: Any,
        *,
        governor: Governor | None = None,
        pep: Any = None,
        specs: Iterable[ToolSpec] = (),
        context: ExecutionContext | Mapping[str, Any] | None = None,
        approver: Approver | None = None,
        directive_role: DirectiveRole = "system",
        approvals: Approver | None = None,
    ) -> None:
        approver = deprecated_approver(approver, "HermesGovernance", approvals=approvals)
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
            if getattr(agent, "api_mode", None) == CODEX_APP_SERVER:
                raise ConfigurationError(
                    f"the agent runs in api_mode {CODEX_APP_SERVER!r}: Codex runs its own shell "
                    "and patch tools, which never reach Hermes' pre_tool_call hook, so no call "
                    "could be judged; use api_mode 'chat_completions' (or another mode in "
                    "which Hermes dispatches the tools)"
                )
            # Every tool call of the process, not only this session's: hooks are process-wide,
            # and a subagent's calls (another session) must not run unjudged.
            self.guard = PolicyGuard(pep=pep, specs=specs, context=context, approver=approver)
            guard = self.guard.guard
            offered = sorted(getattr(agent, "valid_tool_names", ()) or ())
            missing = [name for name in offered if not guard.declares(name)]
            guard.require_declared(missing, how=_routes_hint(missing))

    def _callbacks(self) -> list[tuple[str, str, Any]]:
        callbacks: list[tuple[str, str, Any]] = []
        if self.middleware is not None:
            callbacks.append(("middleware", "llm_execution", self.middleware))
        if self.guard is not None:
            callbacks.append(("hook", "pre_api_request", self.guard.pre_api_request))
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


CODEX_APP_SERVER = "codex_app_server"
"""The API mode in which Codex, not Hermes, runs the tools."""

_ROUTES = {
    "execute_code": "execute_code runs a Python script whose own effects never pass "
    "pre_tool_call: declare it (side_effects={'shell_command'}) so each script is judged, or "
    "disable the code_execution toolset",
    "delegate_task": "delegate_task starts subagents: declare it so each delegation is judged "
    "(their tool calls are judged by this guard), or disable the delegation toolset",
}


def _routes_hint(missing: list[str]) -> str:
    """What to do about the undeclared tools that are routes around the guard."""
    hints = [_ROUTES[name] for name in missing if name in _ROUTES]
    mcp = [name for name in missing if _toolset(name).startswith("mcp-")]
    if mcp:
        hints.append(
            f"{mcp} are MCP tools: declare each, or filter them out with the server's "
            "tools.include / tools.exclude"
        )
    hints.append("or disable the toolsets of the tools you do not declare")
    return "; " + "; ".join(hints)


def _toolset(name: str) -> str:
    try:
        return str(tool_registry.get_toolset_for_tool(name) or "")
    except Exception:
        return ""
