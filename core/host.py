"""The seven-method contract between the governor and a framework.

A host is any object with these methods; nothing of jevqueue needs importing to write one.
The governor never imports a framework, and a host never imports the decision logic.

``generate`` has three modes:

==========  ==========  ==============================================================
force_tool  directive   the host must
==========  ==========  ==============================================================
a name      non-empty   constrain the provider to exactly one call of that tool
None        non-empty   forbid tool calls: prose only
None        ``""``      plain unconstrained generation, exactly as without jevqueue
==========  ==========  ==============================================================

The directive goes onto a *copy* of the messages: mutating the caller's list breaks the
provider's prompt-cache prefix. ``say`` and ``say_tool_call`` build a native response
locally, stamped with the model id ``jevqueue-local``, and never call a provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["LOCAL_MODEL_ID", "Host"]

LOCAL_MODEL_ID = "jevqueue-local"
"""The model id stamped on responses built by ``say`` and ``say_tool_call``."""


@runtime_checkable
class Host(Protocol):
    """What the governor needs from a framework, in seven methods."""

    def tools(self) -> list[dict[str, Any]]:
        """The tools offered this turn, as OpenAI-style schemas (either accepted shape).

        Called fresh on every decision, so a context-dependent toolset stays correct.
        """
        ...

    def messages(self) -> list[dict[str, Any]]:
        """The conversation, oldest first, in OpenAI message form. Only read, never mutated."""
        ...

    def generate(self, *, force_tool: str | None, directive: str) -> Any:
        """Call the provider in one of the three modes the module docstring tables."""
        ...

    def called_tools(self, response: Any) -> list[str]:
        """The tool names the response actually calls, in order; ``[]`` for prose."""
        ...

    def say(self, text: str) -> Any:
        """A native response carrying ``text``, built locally, with no provider call."""
        ...

    def say_tool_call(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """A native response calling ``name`` with ``arguments``, built locally."""
        ...

    def interrupted(self) -> bool:
        """True when the user cancelled; consulted after the decision, before any effect."""
        ...
