"""Tools files: any bytes as a TOML tools file; declarations or a ToolsFileError.

``load_tools_file`` promises :class:`~jevqueue.errors.ToolsFileError` (with the file and the
line) for every mistake. The declarations of a file that loads must make a registry that
judges a call of each tool (building the action may refuse the call, with a typed error).
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

from fuzz_main import fuzz_main, instrumented

with instrumented():
    from jevqueue.errors import JevError, ToolsFileError
    from jevqueue.policy._action import Action
    from jevqueue.policy._registry import ToolRegistry
    from jevqueue.policy._tools_file import load_tools_file
    from jevqueue.policy_files._lines import TomlLineIndex  # noqa: F401

_HOME = Path(tempfile.mkdtemp(prefix="jevqueue-fuzz-tools-"))
_FILE = _HOME / "tools.toml"
_CONTEXT = {
    "task_id": "task-1",
    "actor_id": "agent",
    "workspace": str(_HOME),
    "git_sha": "0123456789abcdef",
}
_ARGUMENTS = {"path": "notes/a.md", "cwd": ".", "content": "x", "command": "ls", "n": 1}

# Reported, not fixed here (ToolSpec is outside the tools file): a schema whose "$schema"
# is not a string makes jsonschema raise TypeError, and a "pattern" with a repetition
# count beyond 2**32 makes it raise OverflowError, both out of ToolSpec.__post_init__.


def test_one_input(data: bytes) -> None:
    _FILE.write_bytes(data)
    try:
        specs = load_tools_file(_FILE)
    except ToolsFileError as error:
        assert error.file == str(_FILE)
        str(error)
        return
    registry = ToolRegistry(specs)
    for spec in specs:
        with contextlib.suppress(JevError):  # the call may be refused, with a typed error
            Action.build(registry, spec.name, dict(_ARGUMENTS), _CONTEXT)


if __name__ == "__main__":
    fuzz_main(test_one_input)
