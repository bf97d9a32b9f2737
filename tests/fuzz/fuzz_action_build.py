"""``Action.build``: a proposed call as an agent could send it, judged by the default rules.

Tool names, arguments (paths written to fool path checks, values that are not JSON) and
execution contexts come from the input; the workspace is a real directory holding a link
out of it and a hard link, or a path that does not exist. Building may only raise a typed
:class:`~jevqueue.errors.JevError`. A built action must carry a well-formed digest, and no
default rule may raise on it: the decision point would turn that into a DENY, but a rule
that cannot judge a call an agent can make is still a bug.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any

import atheris
from fuzz_main import fuzz_main, instrumented
from fuzzed_values import fuzzed_path, fuzzed_text, fuzzed_value

with instrumented():
    from jevqueue.errors import JevError
    from jevqueue.policy._action import Action
    from jevqueue.policy._default_rules import default_rules
    from jevqueue.policy._pdp import create_default_policy_decision_point
    from jevqueue.policy._registry import ToolSpec, antigravity_registry
    from jevqueue.policy._verdict import Verdict

_HOME = Path(tempfile.mkdtemp(prefix="jevqueue-fuzz-action-"))
_WORKSPACE = _HOME / "ws"
(_WORKSPACE / "src").mkdir(parents=True)
(_WORKSPACE / ".git" / "hooks").mkdir(parents=True)
(_WORKSPACE / "src" / "app.py").write_text("x = 1\n")
(_WORKSPACE / "file.txt").write_text("text\n")
os.link(_WORKSPACE / "file.txt", _WORKSPACE / "hard")
(_HOME / "outside").mkdir()
(_WORKSPACE / "link-out").symlink_to(_HOME / "outside")
(_WORKSPACE / "loop").symlink_to(_WORKSPACE / "loop")
(_HOME / "ws-alias").symlink_to(_WORKSPACE)

_REGISTRY = antigravity_registry()
for _spec in (
    ToolSpec.declare(
        "edit_files",
        side_effects={"file_write"},
        path_fields=["path", "backup"],
        required_path_fields=["path"],
        content_fields=["chunks/*/text", "note"],
        schema={
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "backup": {"type": "string"},
                "note": {"type": "string", "maxLength": 64},
                "chunks": {"type": "array", "items": {"type": "object"}},
            },
            "required": ["path"],
        },
    ),
    ToolSpec.declare("exec", side_effects={"shell_command"}, cwd_field="cwd"),
    ToolSpec.declare(
        "raw_write", side_effects={"file_write"}, path_fields=["target"], literal_paths=True
    ),
    ToolSpec.declare("remove", side_effects={"file_delete"}, path_fields=["target"]),
    ToolSpec.declare("fetch", side_effects={"network"}, content_fields=["url"]),
):
    _REGISTRY.register(_spec)
_TOOLS = sorted(_REGISTRY)
_FIELDS = sorted(
    {
        name
        for tool in _TOOLS
        for spec in (_REGISTRY.get(tool),)
        for name in (*spec.path_fields, *((spec.cwd_field,) if spec.cwd_field else ()))
    }
    | {"CodeContent", "chunks", "note", "url", "CommandLine"}
)
_WORKSPACES = [
    str(_WORKSPACE),
    str(_WORKSPACE) + "/",
    str(_HOME / "ws-alias"),
    str(_WORKSPACE / "src"),
    str(_WORKSPACE / "file.txt"),
    str(_WORKSPACE / "link-out"),
    "/nonexistent/jevqueue-fuzz/ws",
    "/",
]
_CONTEXT_FIELDS = ["task_id", "actor_id", "workspace", "git_sha", "environment"]
_RULES = default_rules()
_PDP = create_default_policy_decision_point(registry=_REGISTRY)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def _arguments(fdp: atheris.FuzzedDataProvider) -> Any:
    if fdp.ConsumeIntInRange(0, 15) == 0:
        return fuzzed_value(fdp)
    arguments: dict[Any, Any] = {}
    for _ in range(fdp.ConsumeIntInRange(0, 5)):
        name = fdp.PickValueInList(_FIELDS) if fdp.ConsumeBool() else fuzzed_text(fdp, 10)
        choice = fdp.ConsumeIntInRange(0, 3)
        if choice == 0:
            arguments[name] = fuzzed_value(fdp)
        elif choice == 1:
            arguments[name] = [{"text": fuzzed_text(fdp)} for _ in range(2)]
        else:
            arguments[name] = fuzzed_path(fdp)
    return arguments


def _context(fdp: atheris.FuzzedDataProvider) -> Any:
    context: dict[Any, Any] = {
        "task_id": "task-1",
        "actor_id": "agent",
        "workspace": fdp.PickValueInList(_WORKSPACES),
        "git_sha": "0123456789abcdef",
    }
    for _ in range(fdp.ConsumeIntInRange(0, 3)):
        field = fdp.PickValueInList(_CONTEXT_FIELDS) if fdp.ConsumeBool() else fuzzed_text(fdp)
        context[field] = fuzzed_path(fdp) if fdp.ConsumeBool() else fuzzed_value(fdp)
    if fdp.ConsumeIntInRange(0, 31) == 0:
        return fuzzed_value(fdp)
    return context


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    tool = fdp.PickValueInList(_TOOLS) if fdp.ConsumeIntInRange(0, 7) else fuzzed_value(fdp)
    arguments = _arguments(fdp)
    context = _context(fdp)
    try:
        action = Action.build(_REGISTRY, tool, arguments, context)
    except JevError:
        return
    assert _DIGEST.fullmatch(action.digest), action.digest
    for rule in _RULES:
        verdict = rule.evaluate(action)
        assert verdict is None or isinstance(verdict, Verdict), (rule, verdict)
    assert isinstance(_PDP.evaluate(action), Verdict)
    run = action.arguments_to_run(action.arguments)
    assert isinstance(run, dict)


if __name__ == "__main__":
    fuzz_main(test_one_input)
