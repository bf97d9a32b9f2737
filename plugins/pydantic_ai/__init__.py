"""Govern Pydantic AI agents: the governor on every model request, the PEP before every tool.

Two capabilities, usable together or apart, plus a host for direct model use:

* **Turn governance** — :class:`GovernorCapability` (``wrap_model_request``) decides every
  model request of a run. A forced route narrows the request to the one chosen tool
  (``function_tools=[chosen]``, ``allow_text_output=False``) *and* names it
  (``tool_choice=[name]``, ``parallel_tool_calls=False``), which an OpenAI-compatible model
  sends as ``tools=[chosen]``, ``tool_choice="required"``, ``parallel_tool_calls=false``
  (one tool offered, a call required, one call at most); a prose turn offers no
  function tool and sets ``tool_choice="none"``; the passthrough hands the request on
  untouched. The reply is read back with ``ModelResponse.tool_calls`` before the loop's
  tool step: a reply that disobeys raises :class:`~jevqueue.errors.ProviderDisobeyedError`
  and none of its calls runs. The directive goes onto a copy of the request's messages and
  never into the run's history; nothing of a forced request persists to the next one.
* **Tool enforcement** — :class:`PolicyCapability` (``before_tool_execute``), a thin
  adapter of :class:`jevqueue.policy.Guard`, judges every call (audited, fail closed), and
  its ``wrap_tool_execute`` runs the tool with exactly the judged arguments (paths
  resolved), once. A refusal is a ``ModelRetry``: the tool does not run and the model
  reads the guard's message. A call that needs an explicit approval is shown to
  ``approver=`` inline, or, without one, raises ``ApprovalRequired`` carrying the core
  :class:`~jevqueue.policy.ApprovalRequest` (``request.to_dict()``); the run ends with
  ``DeferredToolRequests`` and resumes with :func:`approval_results`, whose approval
  records the guard checks against that call's digest. Undeclared tools and output
  functions (``output_type=[fn]``, ``ToolOutput(fn)``, ...) are refused when the agent
  is built.
* **Direct use** — :class:`PydanticAIHost` / :class:`AsyncPydanticAIHost` are hosts over a
  ``Model``, messages and tool definitions, for callers who run no agent loop.
  :func:`openai_messages` is the projection of Pydantic AI's message parts into the
  governor's OpenAI form.

What Pydantic AI cannot force, and what the plugin does about it:

* **A model class without tool forcing cannot force one tool.** Where Pydantic AI's
  model profile says the provider cannot require a tool call (for instance Anthropic with
  thinking on), it sends ``tool_choice="auto"`` instead, and the model may answer in
  prose. The narrowing still holds — no other tool is offered — and the read-back blocks
  a prose answer or a second call.
* **It cannot stop a server that ignores tool_choice** (many local OpenAI-compatible
  servers do): the read-back raises ``ProviderDisobeyedError`` and nothing executes, so
  such a turn fails closed instead of being forced.
* **A structured output type keeps its output tools on a prose turn**: the output tool is
  how such an agent answers, so ``tool_choice="none"`` leaves it offered; the read-back
  counts function tools only.
* **Interrupts cannot be consulted**: Pydantic AI cancels a run by cancelling its task, so
  there is no flag to read; ``GovernorCapability(interrupted=...)`` takes one of your own.
* **A streamed reply cannot be recalled**: in ``run_stream`` / ``run_stream_events`` the
  events of a disobeying reply reach the caller before the read-back blocks it; none of
  its calls runs.
* **A denial spends a retry**: ``ModelRetry`` counts against the tool's ``retries``; a
  model that insists past them ends the run with Pydantic AI's ``UnexpectedModelBehavior``
  (the tool still never ran).

Install with ``pip install "jevqueue[pydantic-ai]"``.
"""

from __future__ import annotations

try:
    import pydantic_ai  # noqa: F401  (fail here, with the extra's name, not deep in a submodule)
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'jevqueue.plugins.pydantic_ai needs Pydantic AI: pip install "jevqueue[pydantic-ai]"'
    ) from exc

from jevqueue.plugins.pydantic_ai.governor_capability import GovernorCapability
from jevqueue.plugins.pydantic_ai.model_host import AsyncPydanticAIHost, PydanticAIHost
from jevqueue.plugins.pydantic_ai.openai_forms import openai_messages, openai_tools
from jevqueue.plugins.pydantic_ai.policy_capability import (
    APPROVALS_METADATA_KEY,
    ApprovalRequest,
    Judgement,
    PolicyCapability,
    approval_results,
)
from jevqueue.plugins.pydantic_ai.request_shape import (
    called_tools,
    governed_request,
    local_response,
)
from jevqueue.plugins.pydantic_ai.tool_spec import tool_spec

__all__ = [
    "APPROVALS_METADATA_KEY",
    "ApprovalRequest",
    "AsyncPydanticAIHost",
    "GovernorCapability",
    "Judgement",
    "PolicyCapability",
    "PydanticAIHost",
    "approval_results",
    "called_tools",
    "governed_request",
    "local_response",
    "openai_messages",
    "openai_tools",
    "tool_spec",
]
