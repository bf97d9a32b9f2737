"""Every classic AutoGen (ag2 0.x, ``import autogen``) name the plugin uses, in one place.

Imported at module top inside ``try/except ImportError`` so a missing extra fails with
the install line, not with a bare ``ModuleNotFoundError`` deep in a call.
"""

from __future__ import annotations

try:
    from autogen import Agent, ConversableAgent
    from autogen.agentchat.contrib.capabilities.agent_capability import AgentCapability
    from autogen.tools import Tool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "jevqueue.plugins.autogen's classic half needs classic AutoGen (ag2 0.x, `import "
        'autogen`): pip install "jevqueue[ag2]"'
    ) from exc

__all__ = ["Agent", "AgentCapability", "ConversableAgent", "Tool"]
