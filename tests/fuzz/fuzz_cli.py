"""The ``jevqueue`` command line, run in-process through its ``main`` function.

Command lines are built from the commands' own options (read from click, so a new option
is fuzzed as soon as it exists) and values from the input: JSON documents, digests,
numbers, free text, and files whose content is the input's own. A command may finish, exit
with a status, or refuse with click's usage error or a typed
:class:`~jevqueue.errors.JevError`; a traceback of anything else is a finding.

Left out: ``demo`` (a whole governed agent run), ``db`` and ``mcp-proxy`` (they reach a database or
start the command they are given), and options that draw plots. Values for file options
and positional arguments never hold ``/``, ``~`` or a leading ``-``: every run happens in a
scratch directory, and nothing may be written outside it.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import atheris
import click
from fuzz_main import fuzz_main, instrumented
from fuzzed_values import fuzzed_text

with instrumented():
    # The commands import what they run when they run: import it here, to be instrumented.
    import jevqueue.approvals._authority
    import jevqueue.approvals._keys
    import jevqueue.audit._export
    import jevqueue.audit._verify
    import jevqueue.governor._calibration
    import jevqueue.governor._turn_recorder
    import jevqueue.policy._pdp
    import jevqueue.policy._tools_file
    import jevqueue.policy_files._loader  # noqa: F401
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from jevqueue.audit._chain import AuditChain
    from jevqueue.audit._jsonl_log import JsonlAuditLog
    from jevqueue.cli import main
    from jevqueue.errors import JevError

_LEFT_OUT_COMMANDS = {"demo", "db", "mcp-proxy"}
_LEFT_OUT_OPTIONS = {"--plot"}
_HOME = Path(tempfile.mkdtemp(prefix="jevqueue-fuzz-cli-"))
_FIXTURES = _HOME / "fixtures"
_CASE = _HOME / "case"


def _commands() -> list[tuple[list[str], click.Command]]:
    found: list[tuple[list[str], click.Command]] = []
    context = click.Context(main)
    pending: list[tuple[list[str], click.Command]] = [([], main)]
    while pending:
        path, command = pending.pop()
        if isinstance(command, click.Group):
            for name in command.list_commands(context):
                if not path and name in _LEFT_OUT_COMMANDS:
                    continue
                child = command.get_command(context, name)
                if child is not None:
                    pending.append(([*path, name], child))
        else:
            found.append((path, command))
    return sorted(found, key=lambda item: item[0])


def _fixtures() -> None:
    _FIXTURES.mkdir()
    key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    (_FIXTURES / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    (_FIXTURES / "key.pub").write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    (_FIXTURES / "policy.toml").write_text(
        '[[rule]]\nid = "r"\neffect = "deny"\nreason = "no"\npaths = ["secrets/**"]\n'
    )
    (_FIXTURES / "tools.toml").write_text(
        '[[tool]]\nname = "write_file"\nside_effects = ["file_write"]\npath_fields = ["path"]\n'
    )
    log = JsonlAuditLog(_FIXTURES / "audit.jsonl")
    chain = AuditChain(log, signing_key=key)
    chain.append({"decision_id": "d-1", "tool": "t", "result": "ALLOW", "allowed": True})
    log.close()
    (_FIXTURES / "folder").mkdir()


with instrumented():
    _COMMANDS = _commands()  # imports each command's module
_FILES = [
    "input",
    "key.pem",
    "key.pub",
    "policy.toml",
    "tools.toml",
    "audit.jsonl",
    "audit.jsonl.head",
    "folder",
    "missing.toml",
    "new.out",
]
_TEXT_VALUES = [
    "{}",
    '{"TargetFile": "src/app.py", "CodeContent": "x"}',
    '{"CommandLine": "ls", "Cwd": "."}',
    '{"task_id": "t", "actor_id": "a", "workspace": "/tmp/jevqueue-fuzz-ws", '
    '"git_sha": "0123456789abcdef"}',
    "sha256:" + "ab" * 32,
    "write_to_file",
    "run_command",
    "alice",
    "0",
    "-1",
    "1e309",
    "nan",
    "[]",
]


def _safe(text: str) -> str:
    """A value that names nothing outside the scratch directory and is no option."""
    text = text.replace("/", "_").replace("~", "_").replace("\x00", "")
    return text.lstrip("-") or "x"


def _value(fdp: atheris.FuzzedDataProvider, parameter: click.Parameter) -> str:
    kind = parameter.type
    if isinstance(kind, (click.Path, click.File)):
        return (
            fdp.PickValueInList(_FILES)
            if fdp.ConsumeIntInRange(0, 5)
            else _safe(fuzzed_text(fdp, 12))
        )
    if isinstance(kind, click.Choice) and fdp.ConsumeBool():
        return str(fdp.PickValueInList(list(kind.choices)))
    choice = fdp.ConsumeIntInRange(0, 3)
    if choice == 0:
        return str(fdp.PickValueInList(_TEXT_VALUES))
    if choice == 1:
        return str(fdp.ConsumeIntInRange(-(2**40), 2**40))
    text = fuzzed_text(fdp, 60)
    return text if not text.lower().startswith("postgres") else "x" + text


def _argv(fdp: atheris.FuzzedDataProvider) -> list[str]:
    path, command = fdp.PickValueInList(_COMMANDS)
    argv = list(path)
    options = [
        parameter
        for parameter in command.params
        if isinstance(parameter, click.Option)
        and not _LEFT_OUT_OPTIONS.intersection(parameter.opts)
    ]
    arguments = [parameter for parameter in command.params if isinstance(parameter, click.Argument)]
    for _ in range(fdp.ConsumeIntInRange(0, 8)):
        choice = fdp.ConsumeIntInRange(0, 9)
        if choice < 5 and options:
            option = fdp.PickValueInList(options)
            argv.append(fdp.PickValueInList(list(option.opts)))
            if not option.is_flag:
                argv.append(_value(fdp, option))
        elif choice < 8 and arguments:
            argv.append(_safe(_value(fdp, fdp.PickValueInList(arguments))))
        elif choice == 8:
            argv.append(fdp.PickValueInList(["--help", "--", "-h", "--version"]))
        else:
            argv.append(_safe(fuzzed_text(fdp, 20)))
    return argv


def _as_the_os_passes(token: str) -> str:
    """``token`` as a process receives it: argv is bytes without NUL, decoded by Python with
    surrogateescape (so lone surrogates arrive only as U+DC80-U+DCFF)."""
    raw = token.encode("utf-8", "surrogatepass").replace(b"\x00", b"")
    return os.fsdecode(raw)


def test_one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    content = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 2048))
    argv = [_as_the_os_passes(token) for token in _argv(fdp)]
    shutil.rmtree(_CASE, ignore_errors=True)
    shutil.copytree(_FIXTURES, _CASE)
    (_CASE / "input").write_bytes(content)
    os.chdir(_CASE)
    output = io.StringIO()
    outcome: Any = None
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
        try:
            outcome = main.main(args=argv, prog_name="jevqueue", standalone_mode=False)
        except SystemExit as exit_:
            assert exit_.code is None or isinstance(exit_.code, int), exit_.code
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            pass  # a usage error, --help or --version: click's own clean answers
        except JevError:
            pass
    assert outcome is None or isinstance(outcome, int), (argv, outcome)


if __name__ == "__main__":
    _fixtures()
    fuzz_main(test_one_input)
