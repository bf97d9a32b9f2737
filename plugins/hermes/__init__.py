"""Govern Hermes Agent: the governor on every model call, the PEP before every tool call.

Four callbacks on Hermes' own extension points, installed together by
:class:`HermesGovernance` (or registered from a Hermes plugin's ``register(ctx)``):

* **Turn governance** — :class:`GovernorMiddleware`, an ``llm_execution`` middleware,
  decides every model call of an ``AIAgent`` loop. A forced route sends
  ``tool_choice={"type": "function", "function": {"name": X}}`` and
  ``parallel_tool_calls: false`` for that one call, with the directive on a copy of the
  messages; a prose turn sends ``tool_choice: "none"``; the passthrough sends Hermes'
  request unchanged. The reply is read back with Hermes' own response normaliser before the
  loop dispatches anything; a reply that disobeys is replaced by a local response that
  says so and calls nothing. The agent's interrupt flag is read after each decision,
  before the call.
* **Tool enforcement** — :class:`PolicyGuard`, a thin adapter of
  :class:`jevqueue.policy.Guard`: its ``pre_tool_call`` hook judges every call (audited,
  fail closed; the approver, ``approver=``, is asked inline and shown the core
  :class:`~jevqueue.policy.ApprovalRequest`; a refusal is the tool result the model reads),
  and its ``tool_execution`` middleware runs only the calls the hook allowed, with the
  judged arguments (paths resolved as the policy judged them), each at most once. Its
  ``pre_api_request`` hook keeps the conversation each model call is sent, so every call
  the reply makes is judged with what the model had read: which argument came from the
  user's words and which from an untrusted tool output (the approver is shown which).

Routes around the guard, refused when :class:`HermesGovernance` is built: an undeclared
tool, ``execute_code`` (code execution), ``delegate_task`` (subagents) and MCP tools unless
declared (declared, each call is judged), and the Codex app-server runtime (Codex runs its
own tools). See :mod:`jevqueue.plugins.hermes.governance`.

What Hermes cannot force, and what the plugin does about it:

* **Session-wide forcing cannot be used**: ``AIAgent(request_overrides={"tool_choice":
  ...})`` applies to every call of the session, so a named choice there would force the
  same tool forever (a loop). The middleware sets the choice on one call's request only.
* **It cannot force a server that ignores ``tool_choice``** (many local servers): the
  read-back catches the reply, which is replaced by a refusal — the turn fails closed.
* **Only chat-completions requests are constrained**: in Hermes' other API modes
  (Anthropic messages, Codex responses, Bedrock) the middleware cannot set a named choice;
  :class:`HermesGovernance` refuses a governor there, and a call that switches mode
  mid-session (a fallback provider) is refused rather than sent ungoverned.
* **Streamed text cannot be recalled**: Hermes streams replies to its display callbacks
  as they arrive, so the text of a disobeying reply may already have been shown; none of
  its calls runs.
* **Hermes is fail-open around plugins** (an exception in a hook or middleware is logged
  and the call proceeds), so no callback here lets an exception escape: every failure in a
  check is a refusal.

Install with ``pip install "jevqueue[hermes]"`` in a virtual environment of its own:
Hermes pins a pydantic release that the other extras exclude. It needs ``HERMES_HOME``
(its state directory).
"""

from __future__ import annotations

try:
    import run_agent  # noqa: F401  (fail here, with the extra's name, not deep in a submodule)
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'jevqueue.plugins.hermes needs Hermes Agent: pip install "jevqueue[hermes]" '
        "(in a virtual environment of its own: it pins pydantic)"
    ) from exc

from jevqueue.plugins.hermes.governance import HermesGovernance
from jevqueue.plugins.hermes.governor_middleware import (
    CHAT_COMPLETIONS,
    GovernorMiddleware,
    Refusal,
)
from jevqueue.plugins.hermes.local_response import local_response
from jevqueue.plugins.hermes.policy_guard import (
    ApprovalCallback,
    ApprovalRequest,
    GuardOutcome,
    PolicyGuard,
)
from jevqueue.plugins.hermes.tool_spec import tool_spec

__all__ = [
    "CHAT_COMPLETIONS",
    "ApprovalCallback",
    "ApprovalRequest",
    "GovernorMiddleware",
    "GuardOutcome",
    "HermesGovernance",
    "PolicyGuard",
    "Refusal",
    "local_response",
    "tool_spec",
]
