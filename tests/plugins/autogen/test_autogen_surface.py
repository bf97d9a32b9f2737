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


def test_tool_spec_reads_every_form_of_tool() -> None:
    pytest.importorskip("autogen_agentchat")
    pytest.importorskip("autogen")
    from autogen.tools import Tool
    from autogen_core.tools import FunctionTool
    from jevqueue.errors import ConfigurationError
    from jevqueue.plugins.autogen import tool_spec

    def write_note(path: str, text: str) -> str:
        """Write a text note to a file in the workspace."""
        return path

    forms = [
        write_note,
        Tool(func_or_tool=write_note),
        FunctionTool(write_note, description="Write a note."),
        {"name": "write_note", "parameters": FunctionTool(write_note, "x").schema["parameters"]},
    ]
    for form in forms:
        spec = tool_spec(form, side_effects={"file_write"}, path_fields=["path"])
        assert spec.name == "write_note" and spec.path_fields == ("path",)
        assert spec.schema is not None and set(spec.schema["properties"]) == {"path", "text"}
    with pytest.raises(ConfigurationError, match="not parameters"):
        tool_spec(write_note, side_effects={"file_write"}, path_fields=["file"])
    with pytest.raises(ConfigurationError, match="AutoGen tool"):
        tool_spec(42, side_effects={"file_write"})


def test_the_former_names_are_the_core_ones() -> None:
    import warnings

    from jevqueue.policy import ApprovalRequest, Approver, Guard, Judgement

    assert plugin.ApprovalRequest is ApprovalRequest
    assert plugin.CallJudgement is Judgement
    assert plugin.ApprovalFunc is Approver
    assert issubclass(plugin.PolicyJudge, Guard)
    from jevqueue.policy import ExecutionContext, PolicyEnforcementPoint
    from jevqueue.policy import create_default_policy_decision_point as pdp

    pep = PolicyEnforcementPoint(pdp())
    context = ExecutionContext(
        task_id="t", actor_id="a", workspace="/tmp", git_sha="0123456789abcdef" * 2 + "01234567"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        judge = plugin.PolicyJudge(pep, specs=[], context=context, approval=lambda request: None)
    assert judge.approver is not None
    assert [w.category for w in caught] == [DeprecationWarning]
