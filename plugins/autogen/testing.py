"""Scripted model doubles for AutoGen tests, one per world, at the provider boundary.

* AgentChat: :class:`ScriptedChatCompletionClient` — a real ``ChatCompletionClient``
  (from :mod:`._agentchat_testing`), with :func:`tool_call` to script a call.
* Classic AutoGen: :class:`ScriptedModel` — answers through a model client registered
  with the agent's own ``OpenAIWrapper`` (from :mod:`._classic_testing`), with
  :func:`classic_tool_call` to script a call.

Each records ``.requests`` (one frozen record per provider call), ``.responses``,
``.remaining`` and has ``assert_complete()``; each fails loudly on an unexpected call.
Names load their world's framework on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.plugins.autogen._agentchat_testing import (
        ModelRequest,
        ScriptedChatCompletionClient,
        UnexpectedModelCallError,
        tool_call,
    )
    from jevqueue.plugins.autogen._classic_testing import (
        ClassicRequest,
        ScriptedModel,
        classic_tool_call,
    )

__all__ = [
    "ClassicRequest",
    "ModelRequest",
    "ScriptedChatCompletionClient",
    "ScriptedModel",
    "UnexpectedModelCallError",
    "classic_tool_call",
    "tool_call",
]

_LAZY = {
    "ModelRequest": "jevqueue.plugins.autogen._agentchat_testing",
    "ScriptedChatCompletionClient": "jevqueue.plugins.autogen._agentchat_testing",
    "UnexpectedModelCallError": "jevqueue.plugins.autogen._agentchat_testing",
    "tool_call": "jevqueue.plugins.autogen._agentchat_testing",
    "ClassicRequest": "jevqueue.plugins.autogen._classic_testing",
    "ScriptedModel": "jevqueue.plugins.autogen._classic_testing",
    "classic_tool_call": "jevqueue.plugins.autogen._classic_testing",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'jevqueue.plugins.autogen.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
