"""The plugin's public surface, and the import errors that name each world's extra."""

from __future__ import annotations

import subprocess
import sys

import jevqueue.plugins.autogen as plugin
import pytest


def test_public_names_are_pinned() -> None:
    assert sorted(plugin.__all__) == sorted(
        [
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
    )


@pytest.mark.parametrize(
    ("blocked", "name", "extra"),
    [
        ("autogen_core", "GovernedChatCompletionClient", "jevqueue[autogen]"),
        ("autogen", "GovernorCapability", "jevqueue[ag2]"),
    ],
)
def test_a_missing_world_names_its_extra(blocked: str, name: str, extra: str) -> None:
    code = (
        f"import sys; sys.modules[{blocked!r}] = None\n"
        "import jevqueue.plugins.autogen as plugin\n"
        "try:\n"
        f"    getattr(plugin, {name!r})\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert f'pip install "{extra}"' in out.stdout, out


def test_every_public_name_resolves() -> None:
    pytest.importorskip("autogen_agentchat")
    pytest.importorskip("autogen")
    for name in plugin.__all__:
        assert getattr(plugin, name) is not None, name
