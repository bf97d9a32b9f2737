"""The hook form of the tool guard: CrewAI's ``before_tool_call`` / ``after_tool_call``.

Use it when the tools cannot be wrapped (tools built by a framework, by MCP, by a
``@CrewBase`` project). The before-hook asks the guard; on a refusal it blocks the call and
the after-hook replaces CrewAI's generic "Tool execution blocked by hook" text with the
guard's denial, so the agent reads why and the crew continues.

CrewAI swallows any exception a hook raises except ``HookAborted`` and then runs the tool
(fail-open). The before-hook therefore never lets an exception out: everything inside it is
wrapped, and any failure blocks the call.

Caveats, stated plainly:

* Hooks are process-wide (``install``) or scoped to the current context
  (``installed()`` uses ``scoped_hooks`` when asked): every tool of every agent in scope
  is judged, and a tool the registry does not declare is refused.
* CrewAI runs hooks in registration order and passes them the same mutable
  ``tool_input``. A hook registered *after* this one could change the arguments after
  they were judged. Install this hook last, or prefer the tool wrappers, which judge the
  exact arguments the tool runs with.
* Do not combine the hooks with :class:`~jevqueue.plugins.crewai.GovernedTool` for the
  same tools: each call would be judged (and audited, and approved) twice.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from crewai.hooks import (
    register_after_tool_call_hook,
    register_before_tool_call_hook,
    unregister_after_tool_call_hook,
    unregister_before_tool_call_hook,
)
from crewai.hooks.dispatch import InterceptionPoint, register_scoped, scoped_hooks
from jevqueue.plugins.crewai.tool_guard import ToolGuard

__all__ = ["GovernedToolHooks"]


class GovernedToolHooks:
    """A before/after tool-call hook pair around a :class:`~jevqueue.plugins.crewai.ToolGuard`.

    Args:
        guard: The guard that judges each call.

    Example:
        >>> hooks = guard.hooks()
        >>> with hooks.installed():
        ...     crew.kickoff()
    """

    def __init__(self, guard: ToolGuard) -> None:
        self.guard = guard
        self._lock = threading.Lock()
        # id(tool_input) -> (tool_input, denial). CrewAI hands the before- and the
        # after-hook the same tool_input object; holding it keeps its id from being reused.
        self._denials: dict[int, tuple[Any, str]] = {}
        self._installed = False

    def before(self, context: Any) -> bool | None:
        """``before_tool_call``: ``False`` (block) unless the guard allows the call."""
        try:
            judgement = self.guard.check(context.tool_name, context.tool_input)
            if judgement.allowed and isinstance(context.tool_input, dict):
                # CrewAI runs the tool with this very dict: make it the judged arguments,
                # paths resolved as judged. (No call id reaches a hook, and CrewAI runs
                # the tool itself, so guard.run cannot wrap it here.)
                context.tool_input.clear()
                context.tool_input.update(judgement.run_arguments())
                return None
            message = judgement.message or (
                f"jevqueue denied the call to {judgement.tool!r}: its arguments cannot be "
                "replaced by the judged ones (resolved paths); the call was not run"
            )
        except Exception as exc:  # anything escaping would fail open: block instead
            message = (
                f"jevqueue denied the call: the tool hook failed ({type(exc).__name__}: {exc}); "
                "the call was not run"
            )
        try:
            with self._lock:
                self._denials[id(context.tool_input)] = (context.tool_input, message)
        except Exception:  # the call is blocked either way
            pass
        return False

    def after(self, context: Any) -> str | None:
        """``after_tool_call``: the denial text for a blocked call, else ``None`` (unchanged)."""
        with self._lock:
            entry = self._denials.pop(id(getattr(context, "tool_input", None)), None)
        if entry is None or entry[0] is not getattr(context, "tool_input", None):
            return None
        return entry[1]

    # --- registration ---------------------------------------------------------------

    def install(self) -> GovernedToolHooks:
        """Register both hooks globally (every crew in the process). Idempotent."""
        with self._lock:
            if self._installed:
                return self
            register_before_tool_call_hook(self.before)
            register_after_tool_call_hook(self.after)
            self._installed = True
            self.guard.hooks_installed = True
        return self

    def uninstall(self) -> None:
        """Remove both global hooks. Idempotent."""
        with self._lock:
            if not self._installed:
                return
            unregister_before_tool_call_hook(self.before)
            unregister_after_tool_call_hook(self.after)
            self._installed = False
            self.guard.hooks_installed = False

    @contextmanager
    def installed(self, *, scoped: bool = False) -> Iterator[GovernedToolHooks]:
        """Hooks active for a ``with`` block.

        Args:
            scoped: Register them in a CrewAI ``scoped_hooks`` context (only code running in
                this context, such as ``crew.kickoff()`` called inside the block, is
                judged) instead of globally.
        """
        if scoped:
            with scoped_hooks():
                register_scoped(InterceptionPoint.PRE_TOOL_CALL, self.before)
                register_scoped(InterceptionPoint.POST_TOOL_CALL, self.after)
                previous, self.guard.hooks_installed = self.guard.hooks_installed, True
                try:
                    yield self
                finally:
                    self.guard.hooks_installed = previous
            return
        self.install()
        try:
            yield self
        finally:
            self.uninstall()
