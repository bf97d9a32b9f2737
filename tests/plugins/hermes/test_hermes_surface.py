"""The plugin's public surface, its honesty about forcing, and its missing-extra message."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip(
    "run_agent",
    reason="Hermes Agent is not installed here: it runs in its own venv (make test builds it; "
    'pip install "jevqueue[hermes]")',
)

import jevqueue.plugins.hermes as plugin


def test_public_names_are_pinned() -> None:
    assert sorted(plugin.__all__) == [
        "ApprovalCallback",
        "ApprovalRequest",
        "CHAT_COMPLETIONS",
        "GovernorMiddleware",
        "GuardOutcome",
        "HermesGovernance",
        "PolicyGuard",
        "Refusal",
        "local_response",
        "tool_spec",
    ]
    for name in plugin.__all__:
        assert getattr(plugin, name) is not None


def test_the_approval_names_are_the_core_ones() -> None:
    from jevqueue import policy

    assert plugin.ApprovalRequest is policy.ApprovalRequest
    assert plugin.ApprovalCallback is policy.Approver
    assert plugin.GuardOutcome is policy.Judgement


def test_the_docstring_names_what_cannot_be_forced() -> None:
    doc = plugin.__doc__ or ""
    assert "cannot be used" in doc and "cannot force" in doc and "request_overrides" in doc


def test_a_missing_extra_names_the_install_line() -> None:
    code = (
        "import sys; sys.modules['run_agent'] = None\n"
        "try:\n    import jevqueue.plugins.hermes\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True
    )
    assert 'pip install "jevqueue[hermes]"' in out.stdout


def test_local_responses_read_back_through_hermes_own_normaliser() -> None:
    from agent.transports import get_transport
    from jevqueue import LOCAL_MODEL_ID

    transport = get_transport("chat_completions")
    spoken = plugin.local_response("No.")
    assert spoken.model == LOCAL_MODEL_ID
    assert transport.normalize_response(spoken).content == "No."
    called = transport.normalize_response(plugin.local_response(tool_call=("f", {"a": 1})))
    assert [(c.name, c.arguments) for c in called.tool_calls] == [("f", '{"a": 1}')]


def test_tool_spec_refuses_a_field_that_is_not_a_parameter() -> None:
    from jevqueue import ConfigurationError

    schema = {"name": "write", "parameters": {"properties": {"path": {"type": "string"}}}}
    assert (
        plugin.tool_spec(schema, side_effects={"file_write"}, path_fields=["path"]).name == "write"
    )
    with pytest.raises(ConfigurationError, match="not parameters"):
        plugin.tool_spec(schema, side_effects={"file_write"}, path_fields=["file"])
    with pytest.raises(ConfigurationError, match="no registered tool"):
        plugin.tool_spec("no_such_tool_anywhere", side_effects={"network"})
