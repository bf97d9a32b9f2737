"""Govern any OpenAI-compatible ``/v1/chat/completions`` endpoint (OpenAI, vLLM, llama.cpp,
Ollama, LM Studio, ...) over ``httpx``.

Two halves, as in every jevqueue plugin:

* the model turn: :class:`OpenAIChatHost` (and :class:`AsyncOpenAIChatHost` for
  ``Governor.astep``) is a ``jevqueue`` host. Hand it to a :class:`~jevqueue.Governor` and
  every turn goes out in one of three request shapes: a forced route sends
  ``tool_choice={"type": "function", "function": {"name": X}}`` and
  ``parallel_tool_calls: false``; a prose turn sends ``tool_choice: "none"``, keeping the
  tools in the request; a delegated turn sends the request exactly as the caller built it,
  byte for byte. ``say`` and ``say_tool_call`` build the response locally (model
  ``jevqueue-local``) and send nothing.
* the tool call: :class:`PolicyToolRunner` is a thin adapter of :class:`~jevqueue.Guard`:
  it reads each call a response makes into (tool, arguments, call id), the guard judges it
  with the :class:`~jevqueue.PolicyEnforcementPoint` (audited, fail closed), asks the
  ``approver=`` when an explicit approval is needed, and runs the judged arguments at most
  once per call id; the model reads a refusal as a ``tool`` message. Refused when the
  runner is built: a function for an undeclared tool (or keyed by another spelling of a
  declared name), a non-string key, a non-callable function (see
  :mod:`jevqueue.plugins.openai.tool_runner` for every route).

For tests, :class:`ScriptedChatTransport` (in-process) and :class:`ScriptedChatServer` (a
real socket on 127.0.0.1) let a function play the model.

What it cannot force: the host only *asks* through ``tool_choice``. It cannot force a
server that ignores ``tool_choice`` or ``parallel_tool_calls`` — many local servers do, and
some models answer in prose or call another tool regardless. The governor's read-back
catches it: after a forced route it requires ``called_tools == [X]`` and after a prose turn
that nothing was called; anything else raises
:class:`~jevqueue.errors.ProviderDisobeyedError` and blocks the reply, so nothing executes.
On such a server a governed turn fails closed instead of being forced.

Install with ``pip install "jevqueue[openai]"``.
"""

from __future__ import annotations

try:
    import httpx  # noqa: F401  (fail here, with the extra's name, not deep in a submodule)
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'jevqueue.plugins.openai needs httpx: pip install "jevqueue[openai]"'
    ) from exc

from jevqueue.plugins.openai.chat_host import (
    DEFAULT_BASE_URL,
    AsyncOpenAIChatHost,
    InterruptFlag,
    OpenAIChatHost,
)
from jevqueue.plugins.openai.completion import (
    UNNAMED_CALL,
    called_tool_names,
    text_completion,
    tool_call_completion,
    tool_calls_completion,
)
from jevqueue.plugins.openai.scripted_server import ScriptedChatServer
from jevqueue.plugins.openai.scripted_transport import ScriptedChatTransport
from jevqueue.plugins.openai.tool_runner import PolicyToolRunner, ToolCallResult
from jevqueue.plugins.openai.tool_spec import tool_spec

__all__ = [
    "DEFAULT_BASE_URL",
    "UNNAMED_CALL",
    "AsyncOpenAIChatHost",
    "InterruptFlag",
    "OpenAIChatHost",
    "PolicyToolRunner",
    "ScriptedChatServer",
    "ScriptedChatTransport",
    "ToolCallResult",
    "called_tool_names",
    "text_completion",
    "tool_call_completion",
    "tool_calls_completion",
    "tool_spec",
]
