"""The plugin's public surface, its honesty about forcing, and its missing-extra message."""

from __future__ import annotations

import subprocess
import sys

import jevqueue.plugins.pydantic_ai as plugin


def test_public_names_are_pinned() -> None:
    assert sorted(plugin.__all__) == [
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
    for name in plugin.__all__:
        assert getattr(plugin, name) is not None


def test_the_docstring_names_what_cannot_be_forced() -> None:
    doc = plugin.__doc__ or ""
    assert "cannot force" in doc and "tool_choice" in doc and "Interrupts" in doc


def test_a_missing_extra_names_the_install_line() -> None:
    code = (
        "import sys; sys.modules['pydantic_ai'] = None\n"
        "try:\n    import jevqueue.plugins.pydantic_ai\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 'pip install "jevqueue[pydantic-ai]"' in out.stdout
