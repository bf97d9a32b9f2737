"""The hook form of the tool guard: CrewAI's ``before_tool_call`` / ``after_tool_call``.

Use it when the tools cannot be wrapped (tools built by a framework, by MCP, by a
``@CrewBase`` project). The before-hook asks the guard; on a refusal it blocks the call and
the after-hook replaces CrewAI's generic "Tool execution blocked by hook" text with the
guard's denial, so the agent reads why and the crew continues.

CrewAI swallows any exception a hook raises except ``HookAborted`` and then runs the tool
(fail-open). The before-hook therefore never lets an exception out: everything inside it is
wrapped, and any failure blocks the call.

What the agent read: the before-hook records the crew task's words (the hook is handed the
task CrewAI runs) and claims the id the model gave the call; the after-hook records the
output of each call it allowed, as the agent reads it (:mod:`.transcript`).

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
from jevqueue.policy import Judgement

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
        # id(tool_input) -> (tool_input, judgement) of an allowed call, for its output.
        self._allowed: dict[int, tuple[Any, Judgement]] = {}
        self._installed = False

    def before(self, context: Any) -> bool | None:
        """``before_tool_call``: ``False`` (block) unless the guard allows the call."""
        try:
            self.guard.record_task(getattr(context, "task", None), getattr(context, "crew", None))
            # No call id reaches a hook: claim the one the model gave these arguments.
            call_id = self.guard.claim_call_id(context.tool_name, context.tool_input)
            judgement = self.guard.check(context.tool_name, context.tool_input, call_id)
            if judgement.allowed and isinstance(context.tool_input, dict):
                # CrewAI runs the tool with this very dict: make it the judged arguments,
                # paths resolved as judged. (CrewAI runs the tool itself, so guard.run
                # cannot wrap it here; the after-hook records what it returned.)
                context.tool_input.clear()
                context.tool_input.update(judgement.run_arguments())
                with self._lock:
                    self._allowed[id(context.tool_input)] = (context.tool_input, judgement)
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
        """``after_tool_call``: the denial text for a blocked call; for an allowed one,
        ``None`` (unchanged) once its output is recorded as read."""
        tool_input = getattr(context, "tool_input", None)
        with self._lock:
            entry = self._denials.pop(id(tool_input), None)
            ran = self._allowed.pop(id(tool_input), None)
        if ran is not None and ran[0] is tool_input:
            self._record(ran[1], context)
        if entry is None or entry[0] is not tool_input:
            return None
        return entry[1]

    def _record(self, judgement: Judgement, context: Any) -> None:
        """The agent reads what CrewAI ran (or served from its cache): record it."""
        raw = getattr(context, "raw_tool_result", None)
        output = raw if raw is not None else getattr(context, "tool_result", None)
        self.guard.record_output(judgement.tool, output, judgement.call_id)

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
