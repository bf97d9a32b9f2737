"""Validation and compilation of a parsed policy file, mistake by mistake, line by line.

:class:`PolicyFileCompiler` walks the document ``tomllib`` returned, records every mistake
with the line :class:`~jevqueue.policy_files.TomlLineIndex` finds for it, and, when
there are none, compiles each ``[[rule]]`` into a
:class:`~jevqueue.policy_files.PolicyFileRule`. Use it through
:func:`jevqueue.policy_files.check_policy_file`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jevqueue.approvals._record import IDENTIFIER_PATTERN
from jevqueue.errors import PolicyFileError
from jevqueue.policy._approval_quorum import MAX_APPROVALS, ApprovalQuorum
from jevqueue.policy._registry import (
    BUILTIN_SIDE_EFFECTS,
    declare_side_effect,
)
from jevqueue.policy_files._glob import GlobError, compile_name_glob, compile_path_glob, is_glob
from jevqueue.policy_files._lines import KeyPath, TomlLineIndex
from jevqueue.policy_files._matches_anything import matches_any_value
from jevqueue.policy_files._report import PolicyFileReport, PolicyFileWarning
from jevqueue.policy_files._rule import (
    Effect,
    NameMatcher,
    PolicyFileAllowlistRule,
    PolicyFileRule,
)

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.policy._rule import Rule

__all__ = ["FORMAT_VERSION", "KNOWN_OBLIGATIONS", "KNOWN_SIDE_EFFECTS", "PolicyFileCompiler"]

FORMAT_VERSION = 1
"""The only ``[policy] version`` this release reads."""

KNOWN_OBLIGATIONS: frozenset[str] = frozenset({"explicit_approval"})
"""Obligations the policy enforcement point knows how to fulfil."""

KNOWN_SIDE_EFFECTS: frozenset[str] = frozenset(BUILTIN_SIDE_EFFECTS)
"""The built-in side-effect vocabulary (:data:`jevqueue.policy.BUILTIN_SIDE_EFFECTS`); a
file declares its own others under ``[policy] side_effects``, which also lets tools
declare them."""

_EFFECTS: tuple[Effect, ...] = ("deny", "require", "allow")
_TOP_LEVEL_KEYS = ("policy", "approvers", "rule")
_POLICY_KEYS = (
    "name",
    "description",
    "version",
    "default",
    "default_reason",
    "side_effects",
    "relax",
)
_RULE_KEYS = (
    "id",
    "reason",
    "effect",
    "obligations",
    "description",
    "tools",
    "side_effects",
    "paths",
    "actors",
    "environments",
    "arguments",
    "arguments_json",
    "untrusted_arguments",
    "approvers",
    "approvals",
)
_CONDITION_KEYS = (
    "tools",
    "side_effects",
    "paths",
    "actors",
    "environments",
    "arguments",
    "arguments_json",
    "untrusted_arguments",
)
_TOOL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/\-]{0,127}")  # as the registry requires
_SIDE_EFFECT = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}")
_RULE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}")
_NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.)*[+*](?:[^()\\]|\\.)*\)[+*{]")
_DEFAULT_DENY_REASON = "the policy file allows only what its allow rules list"


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _registered_tool_names() -> frozenset[str]:
    """Names of the tools the built-in registries hold (used for warnings only)."""
    from jevqueue.policy._registry import antigravity_registry

    return frozenset(antigravity_registry())


class PolicyFileCompiler:
    """Walks a parsed policy document, collecting mistakes and compiling rules.

    Args:
        file: the path as the user gave it (used in every message).
        stem: the file's stem, the policy's name when ``[policy] name`` is not set.
        document: what ``tomllib`` parsed.
        lines: the line index of the same text.
        sha256: the hex digest of the file's bytes, kept on the report.
    """

    def __init__(
        self, file: str, stem: str, document: dict[str, Any], lines: TomlLineIndex, sha256: str
    ) -> None:
        self.file = file
        self.stem = stem
        self.document = document
        self.lines = lines
        self.sha256 = sha256
        self.errors: list[PolicyFileError] = []
        self.warnings: list[PolicyFileWarning] = []
        self.side_effects = set(KNOWN_SIDE_EFFECTS)
        self.declared_side_effects: list[str] = []
        self.relax: list[str] = []
        self.groups: dict[str, frozenset[str]] = {}
        self.named_groups: set[str] = set()

    # --- reporting ------------------------------------------------------------------

    def error(self, path: KeyPath, message: str) -> None:
        self.errors.append(PolicyFileError(self.file, self.lines.line_of(path), message))

    def warn(self, path: KeyPath, message: str) -> None:
        self.warnings.append(PolicyFileWarning(self.file, self.lines.line_of(path), message))

    def report(self) -> PolicyFileReport:
        """Check the whole document and return what was found (call once)."""
        name, default, default_reason = self._policy_table()
        self._approvers_table()
        for key in self.document:
            if key not in _TOP_LEVEL_KEYS:
                self.error(
                    (key,),
                    f"unknown top-level key {key!r}{_did_you_mean(key, _TOP_LEVEL_KEYS)}; "
                    "a policy file has a [policy] table, an [approvers] table and [[rule]] "
                    "tables",
                )
        raw_rules = self.document.get("rule", [])
        compiled: list[PolicyFileRule] = []
        counts: dict[str, int] = {}
        if not isinstance(raw_rules, list):
            self.error(("rule",), "'rule' must be written as [[rule]] tables")
            raw_rules = []
        seen: dict[str, int | None] = {}
        for index, raw in enumerate(raw_rules):
            rule = self._rule(index, raw, seen)
            if rule is not None:
                compiled.append(rule)
                counts[rule.effect] = counts.get(rule.effect, 0) + 1
        allow_rules = tuple(rule for rule in compiled if rule.effect == "allow")
        rules: list[Rule] = [rule for rule in compiled if rule.effect != "allow"]
        if default == "deny":
            rule_id = f"{name}:default-deny"
            if rule_id in seen:
                self.error(
                    ("rule",),
                    f"rule id {rule_id!r} is reserved for the file's default; rename the rule",
                )
            rules.append(
                PolicyFileAllowlistRule(
                    rule_id=rule_id,
                    reason=default_reason,
                    source=f"{self.file}:{self.lines.line_of(('policy', 'default'))}",
                    allow_rules=allow_rules,
                )
            )
        elif allow_rules:
            self.warn(
                ("policy",) if "policy" in self.document else ("rule",),
                f"{len(allow_rules)} allow rule(s) have no effect: a file cannot relax the "
                'default rules; allow rules only matter with [policy] default = "deny"',
            )
        if not raw_rules and default != "deny":
            self.warn((), "the file has no [[rule]] tables and changes nothing")
        for group in sorted(set(self.groups) - self.named_groups):
            self.warn(
                ("approvers", group),
                f"approver group {group!r} is named by no rule of this file (a rule names it "
                f'with approvers = "{group}")',
            )
        self.warnings.sort(key=lambda warning: warning.line or 0)
        if self.errors:
            self.errors.sort(key=lambda error: error.line or 0)
            return PolicyFileReport(
                self.file,
                tuple(self.errors),
                tuple(self.warnings),
                name=name,
                default=default,
                sha256=self.sha256,
            )
        for effect in self.declared_side_effects:
            # The file governs them (or at least names them): tools may now declare them.
            declare_side_effect(effect, f"declared by the policy file {self.file}")
        return PolicyFileReport(
            self.file,
            (),
            tuple(self.warnings),
            tuple(rules),
            name=name,
            default=default,
            sha256=self.sha256,
            rule_count=counts,
            relax=tuple(self.relax),
            approver_groups=dict(self.groups),
        )

    # --- [policy] ---------------------------------------------------------------------

    def _policy_table(self) -> tuple[str, str, str]:
        name, default, reason = self.stem, "allow", _DEFAULT_DENY_REASON
        table = self.document.get("policy")
        if table is None:
            return name, default, reason
        if not isinstance(table, dict):
            self.error(("policy",), "'policy' must be a table: write [policy]")
            return name, default, reason
        for key in table:
            if key not in _POLICY_KEYS:
                self.error(
                    ("policy", key),
                    f"unknown key {key!r} in [policy]{_did_you_mean(key, _POLICY_KEYS)}; "
                    f"known keys: {', '.join(_POLICY_KEYS)}",
                )
        if "name" in table:
            value = self._text(("policy", "name"), table["name"])
            if value is not None:
                if _RULE_ID.fullmatch(value):
                    name = value
                else:
                    self.error(
                        ("policy", "name"),
                        "a policy name is letters, digits and _ . : / - (at most 128), "
                        "starting with a letter or digit",
                    )
        if "description" in table:
            self._text(("policy", "description"), table["description"], allow_empty=True)
        if "version" in table:
            version = table["version"]
            if isinstance(version, bool) or not isinstance(version, int):
                self.error(
                    ("policy", "version"),
                    f"'version' must be an integer, not {_type_name(version)}",
                )
            elif version != FORMAT_VERSION:
                self.error(
                    ("policy", "version"),
                    f"policy file version {version} is not supported; this release reads "
                    f"version {FORMAT_VERSION}",
                )
        if "default" in table:
            value = self._text(("policy", "default"), table["default"])
            if value is not None:
                if value in ("allow", "deny"):
                    default = value
                else:
                    self.error(
                        ("policy", "default"),
                        f'\'default\' must be "allow" or "deny", not {value!r}',
                    )
        if "side_effects" in table:
            here: KeyPath = ("policy", "side_effects")
            declared = self._strings(here, table["side_effects"], "[policy]")
            for position, value in enumerate(declared or ()):
                if _SIDE_EFFECT.fullmatch(value):
                    self.side_effects.add(value)
                    self.declared_side_effects.append(value)
                else:
                    self.error(
                        (*here, position),
                        f"[policy]: side effect {value!r} must be an identifier such as "
                        "'database_write', as tool registrations spell them",
                    )
        if "relax" in table:
            from jevqueue.policy._default_rules import RELAXABLE_RULES

            here = ("policy", "relax")
            for position, value in enumerate(self._strings(here, table["relax"], "[policy]") or ()):
                if value in RELAXABLE_RULES:
                    self.relax.append(value)
                else:
                    self.error(
                        (*here, position),
                        f"[policy] relax: {value!r} is not a default rule a policy file may "
                        f"switch off{_did_you_mean(value, sorted(RELAXABLE_RULES))}; only "
                        f"{', '.join(sorted(RELAXABLE_RULES))} can be relaxed",
                    )
        if "default_reason" in table:
            value = self._text(("policy", "default_reason"), table["default_reason"])
            if value is not None:
                reason = value
        return name, default, reason

    # --- [[rule]] ---------------------------------------------------------------------

    def _rule(self, index: int, raw: Any, seen: dict[str, int | None]) -> PolicyFileRule | None:
        here: KeyPath = ("rule", index)
        if not isinstance(raw, dict):
            self.error(here, "each rule must be a [[rule]] table")
            return None
        errors_before = len(self.errors)
        for key in raw:
            if key not in _RULE_KEYS:
                self.error(
                    (*here, key),
                    f"{self._label(index, raw)}: unknown key {key!r}"
                    f"{_did_you_mean(key, _RULE_KEYS)}; known keys: {', '.join(_RULE_KEYS)}",
                )
        rule_id = self._rule_id(index, raw, seen)
        label = self._label(index, raw)
        reason = None
        if "reason" not in raw:
            self.error(here, f"{label}: missing 'reason': say, for a human, why the rule exists")
        else:
            reason = self._text((*here, "reason"), raw["reason"], label=label)
        effect = self._effect(index, raw, label)
        obligations = self._obligations(index, raw, label, effect)
        if "description" in raw:
            self._text((*here, "description"), raw["description"], label=label, allow_empty=True)

        tools = self._names(index, raw, "tools", label)
        environments = self._names(index, raw, "environments", label)
        actors = self._names(index, raw, "actors", label)
        side_effects = self._side_effects(index, raw, label)
        paths = self._paths(index, raw, label, objecting=effect != "allow")
        arguments = self._arguments(index, raw, label)
        arguments_json = None
        if "arguments_json" in raw:
            arguments_json = self._regex((*here, "arguments_json"), raw["arguments_json"], label)
        untrusted = self._untrusted_arguments(index, raw, label, effect)
        quorum = self._quorum(index, raw, label, effect, obligations)
        if tools is not None:
            self._warn_unknown_tools(index, raw["tools"])

        if len(self.errors) > errors_before:
            return None
        assert rule_id is not None and reason is not None and effect is not None
        if not any(key in raw for key in _CONDITION_KEYS) and effect != "allow":
            self.warn(here, f"{label} has no conditions: it applies to every tool call")
        return PolicyFileRule(
            rule_id=rule_id,
            effect=effect,
            reason=reason,
            source=f"{self.file}:{self.lines.line_of(here)}",
            obligations=obligations,
            tools=tools,
            side_effects=side_effects,
            paths=paths,
            actors=actors,
            environments=environments,
            arguments=arguments,
            arguments_json=arguments_json,
            untrusted_arguments=untrusted,
            quorum=quorum,
        )

    # --- [approvers] and a rule's quorum -----------------------------------------------

    def _approvers_table(self) -> None:
        table = self.document.get("approvers")
        if table is None:
            return
        if not isinstance(table, dict):
            self.error(
                ("approvers",),
                "approvers must be a table of groups: write [approvers] and then lines "
                'such as ops = ["alice", "bob"]',
            )
            return
        for group, members in table.items():
            here: KeyPath = ("approvers", group)
            if not IDENTIFIER_PATTERN.fullmatch(group):
                self.error(
                    here,
                    f"[approvers]: group name {group!r} is not an id: 1-128 letters, digits "
                    "and '._:@+-', starting with a letter or digit",
                )
                continue
            if not isinstance(members, list):
                self.error(
                    here,
                    f"[approvers]: group {group!r} must be a list of approver ids, e.g. "
                    f'{group} = ["alice", "bob"], not {_type_name(members)}',
                )
                continue
            if not members:
                self.error(
                    here,
                    f"[approvers]: group {group!r} is empty, so nobody could approve for it; "
                    "list its approver ids",
                )
                continue
            valid = True
            for position, member in enumerate(members):
                if not isinstance(member, str) or not IDENTIFIER_PATTERN.fullmatch(member):
                    shown = repr(member) if isinstance(member, str) else _type_name(member)
                    self.error(
                        (*here, position),
                        f"[approvers]: {shown} in group {group!r} is not an approver id: "
                        "1-128 letters, digits and '._:@+-', starting with a letter or digit, "
                        "as the approval verifier knows the approver's key",
                    )
                    valid = False
                elif member in members[:position]:
                    self.error(
                        (*here, position),
                        f"[approvers]: {member!r} is listed twice in group {group!r}; list "
                        "each approver once",
                    )
                    valid = False
            if valid:
                self.groups[group] = frozenset(members)

    def _quorum(
        self,
        index: int,
        raw: Mapping[str, Any],
        label: str,
        effect: Effect | None,
        obligations: tuple[str, ...],
    ) -> ApprovalQuorum | None:
        if "approvers" not in raw and "approvals" not in raw:
            return None
        here: KeyPath = ("rule", index)
        key = "approvers" if "approvers" in raw else "approvals"
        if effect != "require" or "explicit_approval" not in obligations:
            self.error(
                (*here, key),
                f'{label}: {key!r} only goes with effect = "require" and obligations = '
                '["explicit_approval"]: it says who must approve and how many',
            )
            return None
        group: str | None = None
        members: frozenset[str] | None = None
        if "approvers" in raw:
            value = raw["approvers"]
            if not isinstance(value, str):
                self.error(
                    (*here, "approvers"),
                    f"{label}: 'approvers' names one group of [approvers] as a string, e.g. "
                    f'approvers = "ops", not {_type_name(value)}',
                )
                return None
            if value not in self.groups:
                if "approvers" in self.document and value in self._raw_groups():
                    return None  # the group itself is wrong, and reported there
                known = sorted(self.groups)
                listed = f"; the groups are {', '.join(known)}" if known else ""
                self.error(
                    (*here, "approvers"),
                    f"{label}: unknown approver group {value!r}"
                    f"{_did_you_mean(value, known)}{listed}: declare it in [approvers], e.g. "
                    f'{value} = ["alice", "bob"]',
                )
                return None
            group, members = value, self.groups[value]
            self.named_groups.add(value)
        count = 1
        if "approvals" in raw:
            value = raw["approvals"]
            if isinstance(value, bool) or not isinstance(value, int):
                self.error(
                    (*here, "approvals"),
                    f"{label}: 'approvals' must be a whole number of distinct approvers, e.g. "
                    f"approvals = 2, not {_type_name(value)}",
                )
                return None
            limit = MAX_APPROVALS if members is None else len(members)
            if not 1 <= value <= limit:
                if members is None:
                    why = f"give 1 to {MAX_APPROVALS} distinct approvers"
                else:
                    why = f"group {group!r} has {limit} approvers; give 1 to {limit}"
                self.error(
                    (*here, "approvals"),
                    f"{label}: approvals = {value} can never be met: {why}",
                )
                return None
            count = value
        return ApprovalQuorum(count, group, members)

    def _raw_groups(self) -> set[str]:
        table = self.document.get("approvers")
        return set(table) if isinstance(table, dict) else set()

    def _untrusted_arguments(
        self, index: int, raw: Mapping[str, Any], label: str, effect: Effect | None
    ) -> frozenset[str] | None:
        if "untrusted_arguments" not in raw:
            return None
        here: KeyPath = ("rule", index, "untrusted_arguments")
        if effect == "allow":
            self.error(
                here,
                f"{label}: 'untrusted_arguments' only makes a deny or require rule object "
                "(an allow rule cannot let a call through because of where a value came from)",
            )
            return None
        names = self._strings(here, raw["untrusted_arguments"], label)
        return None if names is None else frozenset(names)

    def _label(self, index: int, raw: Mapping[str, Any]) -> str:
        rule_id = raw.get("id")
        if isinstance(rule_id, str) and rule_id:
            return f"rule {rule_id!r}"
        return f"rule #{index + 1}"

    def _rule_id(
        self, index: int, raw: Mapping[str, Any], seen: dict[str, int | None]
    ) -> str | None:
        here: KeyPath = ("rule", index)
        if "id" not in raw:
            self.error(here, f"rule #{index + 1}: missing 'id': give every rule a unique id")
            return None
        value = raw["id"]
        if not isinstance(value, str):
            self.error(
                (*here, "id"), f"rule #{index + 1}: 'id' must be a string, not {_type_name(value)}"
            )
            return None
        if not _RULE_ID.fullmatch(value):
            self.error(
                (*here, "id"),
                f"rule #{index + 1}: id {value!r} is not valid: use letters, digits and "
                "_ . : / - (at most 128), starting with a letter or digit",
            )
            return None
        if value.startswith("jevqueue."):
            self.error(
                (*here, "id"),
                f"rule #{index + 1}: ids starting with 'jevqueue.' belong to the default "
                "rules; choose another prefix",
            )
            return None
        line = self.lines.line_of((*here, "id"))
        if value in seen:
            first = seen[value]
            where = f" (first used on line {first})" if first is not None else ""
            self.error(
                (*here, "id"),
                f"rule #{index + 1}: duplicate rule id {value!r}{where}; ids must be unique",
            )
            return None
        seen[value] = line
        return value

    def _effect(self, index: int, raw: Mapping[str, Any], label: str) -> Effect | None:
        here: KeyPath = ("rule", index)
        if "effect" not in raw:
            self.error(here, f"{label}: missing 'effect': one of deny, require, allow")
            return None
        value = self._text((*here, "effect"), raw["effect"], label=label)
        if value is None:
            return None
        for effect in _EFFECTS:
            if value == effect:
                return effect
        self.error(
            (*here, "effect"),
            f"{label}: unknown effect {value!r}{_did_you_mean(value, _EFFECTS)}; "
            "use deny, require or allow",
        )
        return None

    def _obligations(
        self, index: int, raw: Mapping[str, Any], label: str, effect: Effect | None
    ) -> tuple[str, ...]:
        here: KeyPath = ("rule", index, "obligations")
        if "obligations" not in raw:
            if effect == "require":
                self.error(
                    ("rule", index),
                    f"{label}: effect 'require' needs 'obligations', e.g. "
                    'obligations = ["explicit_approval"]',
                )
            return ()
        if effect in ("deny", "allow"):
            self.error(here, f"{label}: 'obligations' only go with effect = \"require\"")
        values = self._strings(here, raw["obligations"], label)
        if values is None:
            return ()
        known = sorted(KNOWN_OBLIGATIONS)
        for position, value in enumerate(values):
            if value not in KNOWN_OBLIGATIONS:
                self.error(
                    (*here, position),
                    f"{label}: unknown obligation {value!r}{_did_you_mean(value, known)}; "
                    f"known obligations: {', '.join(known)}",
                )
        return tuple(dict.fromkeys(values))

    def _side_effects(
        self, index: int, raw: Mapping[str, Any], label: str
    ) -> frozenset[str] | None:
        if "side_effects" not in raw:
            return None
        here: KeyPath = ("rule", index, "side_effects")
        values = self._strings(here, raw["side_effects"], label)
        if values is None:
            return None
        known = sorted(self.side_effects)
        for position, value in enumerate(values):
            if value not in self.side_effects:
                self.error(
                    (*here, position),
                    f"{label}: unknown side effect {value!r}{_did_you_mean(value, known)}; "
                    f"known side effects: {', '.join(known)} (declare your own tools' side "
                    "effects in [policy] side_effects)",
                )
        return frozenset(values)

    def _names(
        self, index: int, raw: Mapping[str, Any], key: str, label: str
    ) -> NameMatcher | None:
        if key not in raw:
            return None
        here: KeyPath = ("rule", index, key)
        values = self._strings(here, raw[key], label)
        if values is None:
            return None
        exact: set[str] = set()
        globs: list[re.Pattern[str]] = []
        # Labels an agent's integrator writes in any case ("PROD", "Prod-eu") must not slip
        # past a rule for "prod*": actors and environments match regardless of case.
        fold = key in ("actors", "environments")
        for position, value in enumerate(values):
            if fold:
                value = value.casefold()
            if not is_glob(value):
                if value != value.strip() or not value:
                    self.error(
                        (*here, position),
                        f"{label}: {key} entry {value!r} is empty or has surrounding "
                        "whitespace; names are matched exactly",
                    )
                elif key == "tools" and not _TOOL_NAME.fullmatch(value):
                    self.error(
                        (*here, position),
                        f"{label}: {value!r} can never match a tool: registered tool names are "
                        "1-128 ASCII letters, digits or '_.:/-'",
                    )
                exact.add(value)
                continue
            compiled = self._glob((*here, position), value, label, key, compile_name_glob)
            if compiled is not None:
                globs.append(compiled)
        return NameMatcher(frozenset(exact), tuple(globs), fold=fold)

    def _paths(
        self, index: int, raw: Mapping[str, Any], label: str, *, objecting: bool
    ) -> tuple[re.Pattern[str], ...] | None:
        # Rules that object read a glob broadly (any case, a directory covers what is
        # below it); allow rules read it narrowly (exact case, the path itself only).
        if "paths" not in raw:
            return None
        here: KeyPath = ("rule", index, "paths")
        values = self._strings(here, raw["paths"], label)
        if values is None:
            return None
        compiled: list[re.Pattern[str]] = []
        for position, value in enumerate(values):
            try:
                glob = compile_path_glob(value, ignore_case=objecting, cover_below=objecting)
            except GlobError as error:
                self.error((*here, position), f"{label}: bad glob {value!r} in paths: {error}")
                continue
            compiled.append(glob)
        return tuple(compiled)

    def _glob(
        self,
        path: KeyPath,
        value: str,
        label: str,
        key: str,
        compile_glob: Callable[[str], re.Pattern[str]],
    ) -> re.Pattern[str] | None:
        try:
            return compile_glob(value)
        except GlobError as error:
            self.error(path, f"{label}: bad glob {value!r} in {key}: {error}")
            return None

    def _arguments(
        self, index: int, raw: Mapping[str, Any], label: str
    ) -> tuple[tuple[str, re.Pattern[str]], ...]:
        if "arguments" not in raw:
            return ()
        here: KeyPath = ("rule", index, "arguments")
        table = raw["arguments"]
        if not isinstance(table, dict):
            self.error(
                here,
                f"{label}: 'arguments' must be a table of argument name -> regular "
                f"expression, e.g. arguments = {{ CommandLine = 'rm -rf' }}, "
                f"not {_type_name(table)}",
            )
            return ()
        if not table:
            self.error(here, f"{label}: 'arguments' is empty; remove it or name an argument")
            return ()
        patterns: list[tuple[str, re.Pattern[str]]] = []
        for name, pattern in table.items():
            compiled = self._regex((*here, name), pattern, label, argument=name)
            if compiled is not None:
                patterns.append((name, compiled))
        return tuple(patterns)

    def _regex(
        self, path: KeyPath, value: Any, label: str, *, argument: str | None = None
    ) -> re.Pattern[str] | None:
        what = f"argument {argument!r}" if argument else "'arguments_json'"
        if not isinstance(value, str):
            self.error(
                path,
                f"{label}: the pattern for {what} must be a regular expression string, "
                f"not {_type_name(value)}",
            )
            return None
        try:
            compiled = re.compile(value)
        except re.error as error:
            self.error(
                path,
                f"{label}: bad regular expression for {what}: {error.msg} at position "
                f"{error.pos}; TOML literal strings ('...') keep backslashes as written",
            )
            return None
        except OverflowError:  # a repetition count such as a{4294967296}
            self.error(
                path,
                f"{label}: bad regular expression for {what}: a repetition count is too "
                "large; use a smaller count or '*'",
            )
            return None
        except RecursionError:
            self.error(
                path,
                f"{label}: bad regular expression for {what}: its groups nest too deeply to "
                "compile; flatten the pattern",
            )
            return None
        if _NESTED_QUANTIFIER.search(value):
            self.warn(
                path,
                f"{label}: the pattern for {what} repeats a group that itself repeats "
                "(like '(a+)+'); on a crafted argument it can take exponential time",
            )
        if matches_any_value(compiled):
            self.warn(
                path,
                f"{label}: the pattern for {what} matches the empty string, so it matches "
                "any value",
            )
        return compiled

    def _warn_unknown_tools(self, index: int, values: Any) -> None:
        if not isinstance(values, list):
            values = [values]
        known = _registered_tool_names()
        for position, value in enumerate(values):
            if isinstance(value, str) and value and not is_glob(value) and value not in known:
                self.warn(
                    ("rule", index, "tools", position),
                    f"tool {value!r} is not in the built-in registries"
                    f"{_did_you_mean(value, sorted(known))}; ignore this if you register "
                    "it yourself",
                )

    # --- primitive values -------------------------------------------------------------

    def _text(
        self, path: KeyPath, value: Any, *, label: str = "", allow_empty: bool = False
    ) -> str | None:
        prefix = f"{label}: " if label else ""
        key = path[-1]
        if not isinstance(value, str):
            self.error(path, f"{prefix}{key!r} must be a string, not {_type_name(value)}")
            return None
        if not allow_empty and not value.strip():
            self.error(path, f"{prefix}{key!r} must not be empty")
            return None
        return value

    def _strings(self, path: KeyPath, value: Any, label: str) -> list[str] | None:
        key = path[-1]
        if isinstance(value, str):
            value = [value]
        elif not isinstance(value, list):
            self.error(
                path,
                f"{label}: {key!r} must be a list of strings, not {_type_name(value)}",
            )
            return None
        if not value:
            self.error(
                path,
                f"{label}: {key!r} is an empty list, which matches nothing; remove the key "
                "to match anything",
            )
            return None
        strings: list[str] = []
        for position, item in enumerate(value):
            if isinstance(item, str):
                strings.append(item)
            else:
                self.error(
                    (*path, position),
                    f"{label}: {key!r} entries must be strings, not {_type_name(item)}",
                )
        return strings if len(strings) == len(value) else None


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__}"
