"""The plugin's public surface, its honesty about forcing, and its missing-extra message."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip(
    "llama_index.core", reason='LlamaIndex is not installed: pip install "jevqueue[llamaindex]"'
)

import jevqueue.plugins.llamaindex as plugin


def test_public_names_are_pinned() -> None:
    assert sorted(plugin.__all__) == [
        "ApprovalRequest",
        "ApprovalRequiredEvent",
        "ApprovalResponseEvent",
        "CONTEXT_PARAMETER",
        "GovernedFunctionAgent",
        "GovernedFunctionCallingLLM",
        "GovernedFunctionTool",
        "GovernedReActAgent",
        "GovernedToolRetriever",
        "REACT_NOTE",
        "ToolCallRefusedError",
        "governed_tools",
        "local_response",
        "tool_spec",
    ]
    for name in plugin.__all__:
        assert getattr(plugin, name) is not None
    from jevqueue.policy import ApprovalRequest

    assert plugin.ApprovalRequest is ApprovalRequest, "one approval request in every plugin"


def test_the_docstring_names_what_cannot_be_forced() -> None:
    doc = plugin.__doc__ or ""
    for needle in (
        "cannot",
        "ReActAgent",
        "CodeActAgent",
        "tool_choice",
        "_validate_chat_with_tools_response",
        "force_single_tool_call",
        "Streaming",
        "AgentWorker",
        "AgentRunner",
        "take_step",
        "ProviderDisobeyedError",
    ):
        assert needle in doc, needle


def test_the_docstring_names_the_routes_around_the_guard() -> None:
    doc = plugin.__doc__ or ""
    for needle in (
        "Routes around the guard",
        "ConfigurationError",
        "agent.tools = ...",
        "tool_retriever=",
        "AgentWorkflow",
        "CodeActAgent",
        "approver=",
        "ApprovalDeclinedError",
    ):
        assert needle in doc, needle


def test_a_missing_extra_names_the_install_line() -> None:
    code = (
        "import sys\n"
        "sys.modules['llama_index'] = None\n"
        "sys.modules['llama_index.core'] = None\n"
        "try:\n"
        "    import jevqueue.plugins.llamaindex\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 'pip install "jevqueue[llamaindex]"' in out.stdout, out.stdout + out.stderr
