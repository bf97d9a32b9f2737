"""Govern AutoGen agents, in both worlds that share the name: the governor on every model
turn, the PEP in front of every tool call.

**AgentChat** (Microsoft's ``autogen-agentchat`` / ``autogen-core`` 0.7,
``pip install "jevqueue[autogen]"``):

* :class:`GovernedChatCompletionClient` wraps any ``ChatCompletionClient``: a forced turn
  is sent with ``tool_choice=<the Tool>`` and ``extra_create_args={"parallel_tool_calls":
  False}``, a prose turn with ``tool_choice="none"``, a delegated turn exactly as the agent
  asked; the reply (the final ``CreateResult`` of a stream) is read back before the agent
  sees it.
* :class:`PolicyWorkbench` fronts any ``Workbench`` (``StaticWorkbench``, ``McpWorkbench``):
  every call is judged by :class:`jevqueue.policy.Guard` before the inner workbench runs
  it, with the arguments that were judged; a refusal is a ``ToolResult(is_error=True)``
  the model reads. Approvals go to ``approver=``. The listing of any other workbench is
  pinned (:class:`jevqueue.policy.ListingPins`): a name listed twice, or a tool listed
  otherwise than declared or than first listed, is hidden and refused.

**Classic AutoGen** (``ConversableAgent``; ag2 0.x, ``import autogen``,
``pip install "jevqueue[ag2]"``), in its ``AgentCapability`` idiom:

* :class:`GovernorCapability` ``.add_to_agent(assistant)`` registers a reply function (sync
  and async) in front of the agent's LLM reply: it runs the governor over the
  conversation each turn and calls ``generate_oai_reply`` with ``tool_choice`` and
  ``parallel_tool_calls=False`` (forced), ``tool_choice="none"`` (prose), or nothing
  added (delegation), and reads back the reply's ``tool_calls``.
* :class:`PolicyCapability` ``.add_to_agent(executor)`` registers a reply (sync and async)
  in front of the executor's own tool-call replies that judges every call of a batch
  before any runs, answers each ``tool_call_id`` itself (denials as tool responses) and
  asks ``approver=`` for approvals. It refuses an executor that can run code blocks
  (``code_execution_config``): declare a shell tool instead, judged as ``shell_command``.
* :func:`governed_tool` wraps a function or ``autogen.tools.Tool`` so that its body runs
  only after the policy allowed the call: for executors you do not own (group chats,
  ``run()``).

The three tool-call entry points are thin adapters of :class:`jevqueue.policy.Guard`: each
takes ``approver=`` (the core :class:`~jevqueue.policy.Approver`, shown the core
:class:`~jevqueue.policy.ApprovalRequest` and asked inline; raise
:class:`~jevqueue.errors.ApprovalDeclinedError` to decline with a reason the model reads)
and runs the judged arguments through ``guard.run``, once per call id. ``approval_func=``
and ``approval=`` still work for one release, with a ``DeprecationWarning``.

In both worlds a denial never crashes the chat (the model reads it), and a disobeying
provider raises :class:`~jevqueue.errors.ProviderDisobeyedError` with nothing executed
(``on_disobey="message"`` turns it into a local reply instead). :func:`tool_spec` declares
a tool of either world once.

What the agent read — the user's words and every tool output — is recorded in the guard's
transcript, so each call is judged with the provenance of its arguments:
:class:`PolicyCapability` reads the executor's conversation (:mod:`.classic_transcript`),
``GovernedChatCompletionClient(..., guard=workbench.guard)`` the messages of every model
call (:mod:`.agentchat_transcript`), and ``governed_tool(..., guard=)`` shares one guard
among an agent's tools. ``tool_spec(..., output_trust=...)`` declares whether a tool's
output is trusted.

What AutoGen cannot force, and what the plugin does about it
------------------------------------------------------------

Classic AutoGen:

* **The ``llm_config`` override.** ``OpenAIWrapper.create`` merges each config entry over
  the per-call arguments, so a ``tool_choice`` or ``parallel_tool_calls`` in
  ``llm_config`` silently wins over the per-turn one, and ``llm_config`` cannot hold a
  named choice at all. :class:`GovernorCapability` refuses such an agent with a
  ``ConfigurationError`` (when added and again on every turn) instead of claiming a
  constraint that would not be sent.
* **No per-call narrowing.** Tools passed per call are *appended* to the configured ones;
  the offered set cannot be narrowed for one turn. The plugin does not try: it forces by
  name, and :class:`PolicyCapability` on the executor refuses any call the policy does not
  allow whichever tools were offered.
* **Non-OpenAI clients** (``api_type`` anthropic, gemini, ollama, bedrock, ...) translate
  or drop ``tool_choice`` and ``parallel_tool_calls`` as they see fit; they cannot be made
  to honour them from here. The read-back is what holds: a reply that is not exactly the
  forced call (or calls a tool on a prose turn) is blocked before the executor sees it.
* ``register_hook("safeguard_tool_inputs")`` does not run on the async path, so the plugin
  does not rely on it; its executor reply covers sync and async chats alike.

AgentChat:

* **Clients that ignore or drop ``tool_choice``.** ``OpenAIChatCompletionClient`` sends
  it; the Ollama client turns a forced choice into "offer only that tool", which the model
  may still answer in prose; the replay client ignores it. The read-back blocks whatever
  the provider did instead.
* **Anthropic cannot be told ``parallel_tool_calls=False``**: its client drops the
  argument, and the model may call the forced tool twice. The read-back requires exactly
  one call of the forced tool, so such a reply is blocked.
* **Handoffs bypass the workbench**: ``AssistantAgent`` runs handoff tools itself, so
  :class:`PolicyWorkbench` cannot judge them. :class:`GovernedChatCompletionClient`
  refuses a turn that offers one (``ConfigurationError``, before any provider call).
* **Reflection turns** (``reflect_on_tool_use``) pass ``tool_choice="none"`` without tools
  of the agent's choosing; the governed client passes every call with a caller-chosen
  ``tool_choice``, or without tools, through untouched and records it as ``delegate``.
* Without ``model_info["multiple_system_messages"]`` AgentChat's clients refuse a system
  message after the others, so the directive is sent as a ``UserMessage`` from
  ``"jevqueue"`` there (a system message where the client allows it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from jevqueue.plugins.autogen.policy_judge import ApprovalFunc, CallJudgement, PolicyJudge
from jevqueue.plugins.autogen.tool_spec import tool_spec
from jevqueue.policy import ApprovalRequest

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.plugins.autogen.agentchat_client import GovernedChatCompletionClient
    from jevqueue.plugins.autogen.agentchat_workbench import PolicyWorkbench
    from jevqueue.plugins.autogen.classic_governor import GovernorCapability
    from jevqueue.plugins.autogen.classic_policy import PolicyCapability
    from jevqueue.plugins.autogen.classic_tool import governed_tool

__all__ = [
    "ApprovalFunc",
    "ApprovalRequest",
    "CallJudgement",
    "GovernedChatCompletionClient",
    "GovernorCapability",
    "PolicyCapability",
    "PolicyJudge",
    "PolicyWorkbench",
    "governed_tool",
    "tool_spec",
]

# Each world is an extra of its own: a name loads its world's framework when first used,
# so `jevqueue[autogen]` works without ag2 and `jevqueue[ag2]` without AgentChat.
_LAZY = {
    "GovernedChatCompletionClient": "jevqueue.plugins.autogen.agentchat_client",
    "PolicyWorkbench": "jevqueue.plugins.autogen.agentchat_workbench",
    "GovernorCapability": "jevqueue.plugins.autogen.classic_governor",
    "PolicyCapability": "jevqueue.plugins.autogen.classic_policy",
    "governed_tool": "jevqueue.plugins.autogen.classic_tool",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'jevqueue.plugins.autogen' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
