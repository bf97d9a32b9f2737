"""The plugin's public surface, its honesty about forcing, and its missing-extra message."""

from __future__ import annotations

import pytest

pytest.importorskip(
    "langgraph", reason='the LangGraph extra is not installed: pip install "jevqueue[langgraph]"'
)

import subprocess
import sys

import jevqueue.plugins.langgraph as plugin
from jevqueue.plugins.langgraph import ToolChoice


def test_public_names_are_pinned() -> None:
    assert sorted(plugin.__all__) == [
        "APPROVAL_REQUEST_KIND",
        "ApprovalRequest",
        "CONTEXT_CONFIG_KEY",
        "GovernedModelNode",
        "GovernorMiddleware",
        "PolicyMiddleware",
        "PolicyToolNode",
        "ToolChoice",
        "approval_request",
        "create_governed_agent",
        "governed_model_node",
        "local_message",
        "policy_tool_node",
        "read_approval_answer",
        "tool_spec",
    ]
    for name in plugin.__all__:
        assert getattr(plugin, name) is not None


def test_the_docstring_names_what_cannot_be_forced() -> None:
    doc = plugin.__doc__ or ""
    for needle in (
        "cannot",
        "ChatOllama",
        "ChatAnthropic",
        "extended thinking",
        '"none"',
        "read-back",
        "ProviderDisobeyedError",
    ):
        assert needle in doc, needle


def test_mappings_per_integration() -> None:
    assert ToolChoice.openai().force("x") == {"tool_choice": "x", "parallel_tool_calls": False}
    assert ToolChoice.openai().forbid == {"tool_choice": "none"}
    anthropic = ToolChoice.anthropic()
    assert anthropic.force("x")["tool_choice"] == {"type": "tool", "name": "x"}
    assert anthropic.forbid == {"tool_choice": {"type": "none"}}
    assert not ToolChoice.narrowing().can_force and ToolChoice.narrowing().forbid is None


def test_a_missing_extra_names_the_install_line() -> None:
    code = (
        "import sys\n"
        "sys.modules['langgraph'] = None\n"
        "try:\n"
        "    import jevqueue.plugins.langgraph\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 'pip install "jevqueue[langgraph]"' in out.stdout, out.stdout + out.stderr
