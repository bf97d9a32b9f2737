"""Declarative TOML policy files: rules users write, added to the default policy.

:func:`load_policy_file` compiles a file into rules, :func:`check_policy_file` reports every
mistake with its line (``jevqueue policy check``). The file format is documented in
:mod:`jevqueue.policy_files._loader` and in ``docs/policy.md``.

Names are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jevqueue._lazy import lazy_getattr

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.policy_files._compiler import (
        FORMAT_VERSION,
        KNOWN_OBLIGATIONS,
        KNOWN_SIDE_EFFECTS,
        PolicyFileCompiler,
    )
    from jevqueue.policy_files._glob import (
        GlobError,
        compile_name_glob,
        compile_path_glob,
        is_glob,
    )
    from jevqueue.policy_files._lines import (
        KeyPath,
        TomlLineIndex,
    )
    from jevqueue.policy_files._loader import (
        PolicyFileReport,
        PolicyFileWarning,
        check_policy_file,
        load_policy_file,
        load_policy_rules,
    )
    from jevqueue.policy_files._rule import (
        Effect,
        NameMatcher,
        PolicyFileAllowlistRule,
        PolicyFileRule,
        workspace_relative,
    )
    from jevqueue.policy_files._shipped import (
        shipped_policy_names,
        shipped_policy_path,
    )

_EXPORTS: dict[str, str] = {
    "FORMAT_VERSION": "jevqueue.policy_files._compiler",
    "KNOWN_OBLIGATIONS": "jevqueue.policy_files._compiler",
    "KNOWN_SIDE_EFFECTS": "jevqueue.policy_files._compiler",
    "PolicyFileCompiler": "jevqueue.policy_files._compiler",
    "GlobError": "jevqueue.policy_files._glob",
    "compile_name_glob": "jevqueue.policy_files._glob",
    "compile_path_glob": "jevqueue.policy_files._glob",
    "is_glob": "jevqueue.policy_files._glob",
    "KeyPath": "jevqueue.policy_files._lines",
    "TomlLineIndex": "jevqueue.policy_files._lines",
    "PolicyFileReport": "jevqueue.policy_files._loader",
    "PolicyFileWarning": "jevqueue.policy_files._loader",
    "check_policy_file": "jevqueue.policy_files._loader",
    "load_policy_file": "jevqueue.policy_files._loader",
    "load_policy_rules": "jevqueue.policy_files._loader",
    "Effect": "jevqueue.policy_files._rule",
    "NameMatcher": "jevqueue.policy_files._rule",
    "PolicyFileAllowlistRule": "jevqueue.policy_files._rule",
    "PolicyFileRule": "jevqueue.policy_files._rule",
    "workspace_relative": "jevqueue.policy_files._rule",
    "shipped_policy_names": "jevqueue.policy_files._shipped",
    "shipped_policy_path": "jevqueue.policy_files._shipped",
}

__all__ = [
    "FORMAT_VERSION",
    "KNOWN_OBLIGATIONS",
    "KNOWN_SIDE_EFFECTS",
    "Effect",
    "GlobError",
    "KeyPath",
    "NameMatcher",
    "PolicyFileAllowlistRule",
    "PolicyFileCompiler",
    "PolicyFileReport",
    "PolicyFileRule",
    "PolicyFileWarning",
    "TomlLineIndex",
    "check_policy_file",
    "compile_name_glob",
    "compile_path_glob",
    "is_glob",
    "load_policy_file",
    "load_policy_rules",
    "shipped_policy_names",
    "shipped_policy_path",
    "workspace_relative",
]

__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return __all__
