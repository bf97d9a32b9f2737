"""Declarative policy files: rules users write in TOML, added to the default policy.

A policy file is a TOML document with an optional ``[policy]`` table and any number of
``[[rule]]`` tables::

    [policy]
    name = "acme"
    default = "allow"          # or "deny": only what an allow rule matches may run

    [[rule]]
    id = "no-shell-in-production"
    effect = "deny"            # deny | require | allow
    reason = "Shell commands never run in production"
    side_effects = ["shell_command"]
    environments = ["prod*"]

    [[rule]]
    id = "migrations-need-approval"
    effect = "require"
    obligations = ["explicit_approval"]
    reason = "Schema migrations need a human's approval"
    paths = ["migrations/**"]

A ``require`` rule of ``explicit_approval`` may say who must approve and how many: it
names a group of a top-level ``[approvers]`` table (approver ids, as the approval verifier
knows their keys) and a count of distinct approvers (M of N; default 1)::

    [approvers]
    ops = ["alice", "bob", "carol"]

    [[rule]]
    id = "prod-deploy"
    effect = "require"
    obligations = ["explicit_approval"]
    reason = "deploys need two of ops"
    tools = ["run_command"]
    approvers = "ops"          # default: anyone the approval verifier trusts
    approvals = 2

Conditions: ``tools`` (exact names or globs), ``side_effects``, ``paths`` (globs over the
resolved targets, relative to the workspace), ``actors`` and ``environments`` (globs),
``arguments`` (a table: argument name -> regular expression searched in that argument)
and ``arguments_json`` (a regular expression searched in the canonical JSON of all
arguments). A file only ever adds to the defaults: deny wins, a file cannot turn a
default DENY into anything else, and ``allow`` rules only carve out an allowlist from the
file's own ``default = "deny"``.

:func:`load_policy_rules` compiles a file into rules for
``create_default_policy_decision_point(policy_files=[...])``; :func:`check_policy_file`
reports every mistake with its file and line (``jevqueue policy check``).
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jevqueue.errors import PolicyFileError
from jevqueue.policy_files._compiler import (
    FORMAT_VERSION,
    KNOWN_OBLIGATIONS,
    KNOWN_SIDE_EFFECTS,
    PolicyFileCompiler,
)
from jevqueue.policy_files._lines import TomlLineIndex
from jevqueue.policy_files._report import PolicyFileReport, PolicyFileWarning

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.policy._rule import Rule

__all__ = [
    "FORMAT_VERSION",
    "KNOWN_OBLIGATIONS",
    "KNOWN_SIDE_EFFECTS",
    "PolicyFileReport",
    "PolicyFileWarning",
    "check_policy_file",
    "load_policy_file",
    "load_policy_rules",
]

_TOML_LINE = re.compile(r"at line (\d+)")
_TOML_HINTS = (
    ("Invalid value", ": check the quotes, brackets and commas (strings need quotes)"),
    ("Cannot overwrite", ": a key is set twice in the same table"),
    ("Cannot declare", ": a table is declared twice"),
)


def load_policy_rules(path: str | Path) -> list[Rule]:
    """Read, validate and compile one policy file into rules for the decision point.

    Args:
        path: a TOML policy file.

    Returns:
        The file's ``deny`` and ``require`` rules in file order, followed, when the file
        says ``default = "deny"``, by one rule that denies what no ``allow`` rule matches.

    Raises:
        PolicyFileError: the file cannot be read or has a mistake; ``.file`` and
            ``.line`` point at the first one, and the message says how many there are
            (``jevqueue policy check FILE`` lists them all).
    """
    return list(load_policy_file(path).rules)


def load_policy_file(path: str | Path) -> PolicyFileReport:
    """Like :func:`load_policy_rules`, but return the whole report of a usable file.

    The report's ``sha256`` is the digest of exactly the bytes its rules were compiled
    from, so a policy revision built from it always names the rules in force.

    Raises:
        PolicyFileError: as :func:`load_policy_rules`.
    """
    report = check_policy_file(path)
    if report.errors:
        first = report.errors[0]
        if len(report.errors) == 1:
            raise first
        more = len(report.errors) - 1
        raise PolicyFileError(
            first.file,
            first.line,
            f"{first.detail} (and {more} more mistake{'s' if more > 1 else ''}: "
            f"run `jevqueue policy check {first.file}` to list them all)",
        )
    return report


def check_policy_file(path: str | Path) -> PolicyFileReport:
    """Validate a policy file and report every mistake with its line; never raises for them.

    Args:
        path: a TOML policy file.

    Returns:
        A :class:`PolicyFileReport`; ``report.ok`` is True when the file is usable.
    """
    if not isinstance(path, (str, os.PathLike)):
        shown = repr(path)[:80]
        return PolicyFileReport(
            shown,
            (
                PolicyFileError(
                    shown, None, f"a policy file is a path (str or Path), not {type(path).__name__}"
                ),
            ),
        )
    file = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as error:
        reason = error.strerror or type(error).__name__
        return PolicyFileReport(
            file, (PolicyFileError(file, None, f"cannot read the policy file: {reason}"),)
        )
    sha256 = hashlib.sha256(raw).hexdigest()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        return PolicyFileReport(
            file,
            (PolicyFileError(file, line, "the file is not UTF-8 text; save it as UTF-8"),),
            sha256=sha256,
        )
    try:
        document = read_toml(file, text)
    except PolicyFileError as error:
        return PolicyFileReport(file, (error,), sha256=sha256)
    return PolicyFileCompiler(file, Path(path).stem, document, TomlLineIndex(text), sha256).report()


def read_toml(
    file: str, text: str, error_class: type[PolicyFileError] = PolicyFileError
) -> dict[str, Any]:
    """Parse ``text`` (the contents of ``file``) as TOML.

    Raises:
        PolicyFileError: (or ``error_class``) the text is not TOML, or nests arrays or
            inline tables too deeply for the parser, with the line and a hint.
    """
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise toml_syntax_error(file, text, error, error_class) from None
    except RecursionError:  # the parser recurses once per level of nesting
        raise error_class(
            file,
            None,
            "the file nests arrays or inline tables too deeply to read (hundreds of levels): "
            "flatten it",
        ) from None


def toml_syntax_error(
    file: str,
    text: str,
    error: tomllib.TOMLDecodeError,
    error_class: type[PolicyFileError] = PolicyFileError,
) -> PolicyFileError:
    """A TOML decoding error as a ``file:line`` error with a hint on the usual mistakes."""
    message = str(error)
    lineno = getattr(error, "lineno", None)
    if not isinstance(lineno, int):
        found = _TOML_LINE.search(message)
        if found:
            lineno = int(found.group(1))
        elif "end of document" in message:
            lineno = text.count("\n") + (0 if text.endswith("\n") else 1)
        else:
            lineno = None
    detail = getattr(error, "msg", None) or re.sub(r"\s*\(at [^)]*\)$", "", message)
    hint = next((advice for start, advice in _TOML_HINTS if detail.startswith(start)), "")
    return error_class(file, lineno, f"TOML syntax error: {detail}{hint}")
