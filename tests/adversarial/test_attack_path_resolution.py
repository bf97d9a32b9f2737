"""Path resolution fails closed: what cannot be resolved, or can be read two ways, is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from attack_harness import GuardedTools, Sandbox, assert_refused
from jevqueue.adapters import GenericAdapter
from jevqueue.errors import InvalidToolArgumentsError, PolicyDeniedError, UnfulfilledObligationError
from jevqueue.policy import (
    PolicyEnforcementPoint,
    ToolRegistry,
    ToolSpec,
    create_default_policy_decision_point,
)
from jevqueue.testing.recording_audit import RecordingAuditSink


def write(target: str, content: str = "pwned\n") -> dict[str, str]:
    return {"TargetFile": target, "CodeContent": content}


def deep_link(sandbox: Sandbox, points_to: Path) -> str:
    """A chain of directories past PATH_MAX inside the workspace, ending in a link."""
    name = "d" * 200
    levels = 25  # 25 * 201 characters: past the 4096 of PATH_MAX
    fd = os.open(sandbox.workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.symlink(points_to, "link", dir_fd=fd)
    finally:
        os.close(fd)
    return "/".join([name] * levels) + "/link"


@pytest.mark.parametrize("where", ["outside", "git"])
def test_a_link_past_path_max_is_refused(
    tools: GuardedTools, audit: RecordingAuditSink, sandbox: Sandbox, where: str
) -> None:
    if where == "outside":
        target = deep_link(sandbox, sandbox.outside) + "/pwned.txt"
    else:
        target = deep_link(sandbox, sandbox.workspace / ".git") + "/hooks/pre-commit"
    # (the harness's snapshot cannot walk past PATH_MAX: check what matters directly)
    with pytest.raises(InvalidToolArgumentsError) as raised:
        tools.call("write_to_file", write(target))
    assert "ENAMETOOLONG" in str(raised.value)
    assert tools.ran == [] and tools.escapes == []
    assert sorted(os.listdir(sandbox.outside)) == ["sentinel.txt"]
    assert os.listdir(sandbox.workspace / ".git" / "hooks") == []
    assert len(audit) == 1 and audit.events[-1]["allowed"] is False
    assert audit.events[-1]["rule_ids"] == ["jevqueue.pep.input"]


def test_a_link_loop_is_refused(
    tools: GuardedTools, audit: RecordingAuditSink, sandbox: Sandbox
) -> None:
    (sandbox.workspace / "loop").symlink_to(sandbox.workspace / "loop")
    error = assert_refused(
        tools, audit, "write_to_file", write("loop/x.py"), error=InvalidToolArgumentsError
    )
    assert "ELOOP" in str(error) or "loop" in str(error)


def test_a_loop_reached_through_dotdot_is_refused(
    tools: GuardedTools, audit: RecordingAuditSink, sandbox: Sandbox
) -> None:
    (sandbox.workspace / "a").symlink_to("b")
    (sandbox.workspace / "b").symlink_to("a")
    assert_refused(
        tools, audit, "write_to_file", write("src/../a/x.py"), error=InvalidToolArgumentsError
    )


def test_a_file_used_as_a_directory_is_refused(
    tools: GuardedTools, audit: RecordingAuditSink
) -> None:
    assert_refused(
        tools, audit, "write_to_file", write("src/app.py/x.py"), error=InvalidToolArgumentsError
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root is never refused search permission")
def test_a_directory_that_cannot_be_searched_is_refused(
    tools: GuardedTools, audit: RecordingAuditSink, sandbox: Sandbox
) -> None:  # pragma: no cover - CI runs as root
    locked = sandbox.workspace / "locked"
    locked.mkdir()
    locked.chmod(0)
    try:
        assert_refused(
            tools, audit, "write_to_file", write("locked/x.py"), error=InvalidToolArgumentsError
        )
    finally:
        locked.chmod(0o755)


def test_a_hard_link_to_a_file_outside_needs_approval(
    tools: GuardedTools, audit: RecordingAuditSink, sandbox: Sandbox
) -> None:
    os.link(sandbox.outside / "sentinel.txt", sandbox.workspace / "notes.txt")
    error = assert_refused(
        tools, audit, "write_to_file", write("notes.txt"), error=UnfulfilledObligationError
    )
    assert "jevqueue.paths.hardlink" in error.verdict.rule_ids  # type: ignore[attr-defined]
    assert (sandbox.outside / "sentinel.txt").read_text("utf-8") == "untouched\n"


def test_a_file_with_one_link_is_still_plainly_allowed(
    tools: GuardedTools, sandbox: Sandbox
) -> None:
    tools.call("write_to_file", write("src/app.py", "value = 2\n"))
    assert tools.ran == ["write_to_file"]


ODD_SPELLINGS = {
    "backslash": "..\\outside\\pwned.txt",
    "percent-encoded-dotdot": "%2e%2e/outside/pwned.txt",
    "percent-encoded-slash": "..%2f..%2foutside%2fpwned.txt",
    "double-percent": "%252e%252e%252fpwned.txt",
    "control-character": "src/a\x1b[2Kpp.py",
    "newline": "src/app.py\n.git/hooks/pre-commit",
    "trailing-dot": ".git./hooks/pre-commit",
    "trailing-space": "src /app.py",
    "drive-letter": "C:/outside/pwned.txt",
    "dollar-var": "$HOME/.bashrc",
    "braced-var": "${HOME}/.bashrc",
    "command-substitution": "$(echo ..)/outside/pwned.txt",
    "tilde-user": "~root/.ssh/authorized_keys",
}


@pytest.mark.parametrize("target", ODD_SPELLINGS.values(), ids=ODD_SPELLINGS.keys())
def test_spellings_that_tools_read_differently_are_refused(
    tools: GuardedTools, audit: RecordingAuditSink, target: str
) -> None:
    error = assert_refused(tools, audit, "write_to_file", write(target), error=PolicyDeniedError)
    assert "jevqueue.paths.spelling" in error.verdict.rule_ids  # type: ignore[attr-defined]
    assert "different files" in str(error)


def test_a_working_directory_with_a_variable_is_refused(
    tools: GuardedTools, audit: RecordingAuditSink
) -> None:
    error = assert_refused(
        tools, audit, "run_command", {"CommandLine": "ls", "Cwd": "$HOME"}, error=PolicyDeniedError
    )
    assert "jevqueue.paths.spelling" in error.verdict.rule_ids  # type: ignore[attr-defined]


def test_a_tool_that_takes_paths_literally_can_opt_out(sandbox: Sandbox) -> None:
    spec = ToolSpec("save", side_effects={"file_write"}, path_fields=("path",), literal_paths=True)
    audit = RecordingAuditSink()
    adapter = GenericAdapter(
        PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=audit),
        registry=ToolRegistry([spec]),
    )
    assert adapter.intercept_tool_call("save", {"path": "100%25 done.txt"}, sandbox.context())
    assert audit.events[-1]["allowed"] is True
