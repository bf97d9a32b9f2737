"""What checking a policy file found: its mistakes, its warnings and its compiled rules."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jevqueue.errors import PolicyFileError

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.policy._rule import Rule

__all__ = ["PolicyFileReport", "PolicyFileWarning"]

_EFFECTS = ("deny", "require", "allow")


@dataclass(frozen=True)
class PolicyFileWarning:
    """Something legal but probably unintended, such as a tool name no registry knows."""

    file: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: warning: {self.message}"


@dataclass(frozen=True)
class PolicyFileReport:
    """Everything :func:`jevqueue.policy_files.check_policy_file` found in one file.

    Attributes:
        file: the path as given.
        errors: every mistake, in file order; empty when the file is usable.
        warnings: legal but suspicious constructs.
        rules: the compiled rules (empty when there are errors).
        name: the policy's ``name`` (the file's stem when not set).
        default: ``"allow"`` or ``"deny"``.
        sha256: hex digest of the file's bytes (empty when unreadable).
        rule_count: how many ``[[rule]]`` tables the file has, by effect.
        relax: default rules the file switches off (``[policy] relax``; only those in
            :data:`jevqueue.policy.RELAXABLE_RULES`).
        approver_groups: the file's ``[approvers]`` groups: name -> approver ids.
    """

    file: str
    errors: tuple[PolicyFileError, ...]
    warnings: tuple[PolicyFileWarning, ...] = ()
    rules: tuple[Rule, ...] = ()
    name: str = ""
    default: str = "allow"
    sha256: str = ""
    rule_count: Mapping[str, int] = field(default_factory=dict)
    relax: tuple[str, ...] = ()
    approver_groups: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the file has no mistakes."""
        return not self.errors

    def summary(self) -> str:
        """One line: the policy name, its rules by effect and its default."""
        total = sum(self.rule_count.values())
        by_effect = ", ".join(
            f"{self.rule_count[effect]} {effect}"
            for effect in _EFFECTS
            if self.rule_count.get(effect)
        )
        detail = f" ({by_effect})" if by_effect else ""
        plural = "" if total == 1 else "s"
        return (
            f"{self.file}: OK: policy {self.name!r}, {total} rule{plural}{detail}, "
            f"default {self.default}"
        )
