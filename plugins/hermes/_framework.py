"""Every Hermes Agent name the plugin uses, imported in one place.

Imported at module top inside ``try/except ImportError`` so a missing extra fails with
the install line, not with a bare ``ModuleNotFoundError`` deep in a call. Hermes pins a
pydantic release that other extras exclude, so it lives in a virtual environment of its
own (see ``docs/plugins/hermes.md``).
"""

from __future__ import annotations

try:
    from agent.context_compressor import ContextCompressor
    from agent.transports import get_transport
    from hermes_cli.plugins import PluginManager, get_plugin_manager
    from model_tools import coerce_tool_args
    from run_agent import AIAgent
    from tools.registry import registry as tool_registry
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'jevqueue.plugins.hermes needs Hermes Agent: pip install "jevqueue[hermes]" '
        "(in a virtual environment of its own: it pins pydantic)"
    ) from exc

__all__ = [
    "AIAgent",
    "ContextCompressor",
    "PluginManager",
    "coerce_tool_args",
    "get_plugin_manager",
    "get_transport",
    "tool_registry",
]
