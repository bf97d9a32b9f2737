"""The rules a policy file compiles to.

A :class:`PolicyFileRule` is one ``[[rule]]`` table, its globs and regular expressions
compiled once at load time. Its conditions are ANDed; the values listed under one
condition are ORed. What "matches" means depends on the effect, so that a rule can only
ever make the policy stricter:

* ``deny`` and ``require`` rules match when *any* target matches ``paths`` and the tool
  has *any* of the listed ``side_effects`` — a single bad target is enough to object;
* ``allow`` rules (which only matter under ``default = "deny"``) match when *every*
  target matches ``paths`` and *every* side effect of the tool is listed — an action
  is let through the allowlist only if all of it is covered.

``paths`` are matched against the action's resolved targets and, for tools with a working
directory (``run_command``), that directory too, each relative to the workspace. Rules that
object (``deny``, ``require``) compare case-insensitively, also match the targets'
filesystem-alias spelling (trailing dots and spaces dropped, ``GIT~1`` spelt out, as the
default rules see them), and let a glob that matches a directory cover everything below
it; ``allow`` rules compare exactly and match each path itself only.

``arguments`` patterns are searched in a string argument as it is. An argument that is
not a string (a list, an object, a number) is searched in its canonical JSON spelling
and, because that spelling escapes tabs, newlines, quotes and backslashes and wraps the
text in ``["…"]``, also in every string inside it (object keys included). A rule that
objects matches when *any* of those texts matches, so wrapping a value in a list cannot
hide it; an ``allow`` rule matches only when the JSON spelling *and every* string inside
match, so the extra texts can only narrow an allowlist. ``arguments_json`` works the same
way over all arguments for rules that object; for ``allow`` rules it is searched in the
canonical JSON alone.

``untrusted_arguments`` (only in rules that object) matches when one of the named
arguments — ``"*"`` for any — holds a value that came from an untrusted tool output and not
from the user's request (:class:`~jevqueue.policy.Provenance`); the verdict then also says,
without the value, which output it came from.

A :class:`PolicyFileAllowlistRule` stands for a file's ``default = "deny"``: it denies
whatever none of the file's ``allow`` rules matches.

Reasons are the text the policy author wrote; they never quote argument values.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from jevqueue.policy._approval_quorum import ApprovalQuorum
from jevqueue.policy._provenance import Origin, Provenance
from jevqueue.policy._untrusted_values import untrusted_reasons
from jevqueue.policy._verdict import Verdict

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.policy._action import Action

__all__ = [
    "Effect",
    "NameMatcher",
    "PolicyFileAllowlistRule",
    "PolicyFileRule",
    "workspace_relative",
]

Effect = Literal["deny", "require", "allow"]


def _combined(patterns: tuple[re.Pattern[str], ...]) -> re.Pattern[str] | None:
    """One alternation of ``patterns`` (same flags), so a match is a single regex call."""
    if not patterns:
        return None
    if len(patterns) == 1:
        return patterns[0]
    joined = "|".join(f"(?:{pattern.pattern})" for pattern in patterns)
    return re.compile(joined, patterns[0].flags)


@dataclass(frozen=True)
class NameMatcher:
    """Exact names plus compiled name globs; matches a name if either does.

    With ``fold``, names are compared case-insensitively (the exact names and the globs
    were case-folded when compiled): actors and environments.
    """

    exact: frozenset[str]
    globs: tuple[re.Pattern[str], ...] = ()
    fold: bool = False
    _glob: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_glob", _combined(self.globs))

    def __call__(self, name: str) -> bool:
        if self.fold:
            name = name.casefold()  # the exact names and globs were folded when compiled
        if name in self.exact:
            return True
        glob = self._glob
        return glob is not None and glob.fullmatch(name) is not None


def workspace_relative(target: str, workspace: str) -> str | None:
    """``target`` relative to ``workspace`` with ``/`` separators; None when outside.

    The workspace itself is ``""``. Both paths are taken as given: targets are already
    resolved (symlinks, ``..``, ``~``) when the action is built, and compared with the
    action's ``workspace_root`` (the workspace with its own symlinks resolved).
    """
    root = workspace.rstrip("/") or "/"
    if target == root:
        return ""
    prefix = root if root.endswith("/") else root + "/"
    if target.startswith(prefix):
        return target[len(prefix) :]
    return None


def _name_check(matcher: NameMatcher, name_of: Callable[[Action], str]) -> Callable[[Action], bool]:
    if matcher.globs or matcher.fold:
        return lambda action: matcher(name_of(action))
    contains = matcher.exact.__contains__
    return lambda action: contains(name_of(action))


def _json_text(value: Any) -> str:
    from jevqueue.policy._canonical import canonical_json

    return canonical_json(value).decode("utf-8")


def _strings_inside(value: Any) -> Iterator[str]:
    """Every string in a JSON value, object keys included; iterative, so depth is free."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, Mapping):
            for key, inner in item.items():
                if isinstance(key, str):
                    yield key
                pending.append(inner)
        elif isinstance(item, (list, tuple)):
            pending.extend(item)


def _found_in_any(pattern: re.Pattern[str], value: Any) -> bool:
    """For rules that object: in the JSON spelling of ``value`` or in any string inside.

    The JSON spelling alone is not enough: it escapes tab, newline, quote and backslash
    and wraps the text in ``["…"]``, which defeats whitespace classes, ``^``/``$``
    anchors and patterns that mention quotes (a tab inside a list is spelt ``\\t``).
    """
    if isinstance(value, str):
        return pattern.search(value) is not None
    if pattern.search(_json_text(value)) is not None:
        return True
    search = pattern.search
    if any(search(text) is not None for text in _strings_inside(value)):
        return True
    # An argv-style list says one thing across its items: ["curl x", "|", "sh"].
    return any(search(text) is not None for text in _joined_lists(value))


def _joined_lists(value: Any) -> Iterator[str]:
    """Each list inside ``value`` with its string items joined by a space, as a shell would."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, Mapping):
            pending.extend(item.values())
        elif isinstance(item, (list, tuple)):
            texts = [inner for inner in item if isinstance(inner, str)]
            if len(texts) > 1:
                yield " ".join(texts)
            pending.extend(inner for inner in item if not isinstance(inner, str))


def _found_in_all(pattern: re.Pattern[str], value: Any) -> bool:
    """For allow rules: in the JSON spelling of ``value`` and in every string inside.

    Requiring both keeps an allowlist at least as narrow as the JSON spelling alone, and
    makes it vouch for every piece of a list, as it must for every target.
    """
    if isinstance(value, str):
        return pattern.search(value) is not None
    if pattern.search(_json_text(value)) is None:
        return False
    search = pattern.search
    return all(search(text) is not None for text in _strings_inside(value))


@dataclass(frozen=True)
class PolicyFileRule:
    """One ``[[rule]]`` of a policy file, compiled.

    Attributes:
        rule_id: the rule's ``id``, unique within its file.
        effect: ``deny``, ``require`` or ``allow``.
        reason: the human reason, copied into verdicts verbatim.
        obligations: what a ``require`` rule asks for (e.g. ``explicit_approval``).
        source: ``file:line`` of the rule's ``[[rule]]`` header.
        quorum: for a ``require`` rule of ``explicit_approval``, who must approve and how
            many (``approvers`` and ``approvals``); ``None``: one approval from anyone the
            approval verifier trusts.
    """

    rule_id: str
    effect: Effect
    reason: str
    source: str
    obligations: tuple[str, ...] = ()
    tools: NameMatcher | None = None
    side_effects: frozenset[str] | None = None
    paths: tuple[re.Pattern[str], ...] | None = None
    actors: NameMatcher | None = None
    environments: NameMatcher | None = None
    arguments: tuple[tuple[str, re.Pattern[str]], ...] = ()
    arguments_json: re.Pattern[str] | None = None
    untrusted_arguments: frozenset[str] | None = None
    quorum: ApprovalQuorum | None = None
    _path: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)
    _checks: tuple[Callable[[Action], bool], ...] = field(
        default=(), init=False, repr=False, compare=False
    )
    _verdict: Verdict | None = field(default=None, init=False, repr=False, compare=False)
    opinion_side_effects: frozenset[str] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """For the decision point: a deny/require rule with a ``side_effects`` condition has
    no opinion about an action with none of them, so it need not be asked."""

    def __post_init__(self) -> None:
        # Compile the conditions into a tuple of small checks, cheapest first, and the
        # verdict once: a rule that does not apply costs a few attribute reads.
        set_field = object.__setattr__
        set_field(self, "_path", _combined(self.paths or ()))
        every = self.effect == "allow"
        checks: list[Callable[[Action], bool]] = []
        if self.tools is not None:
            checks.append(_name_check(self.tools, lambda action: action.tool))
        if self.environments is not None:
            checks.append(_name_check(self.environments, lambda action: action.context.environment))
        if self.actors is not None:
            checks.append(_name_check(self.actors, lambda action: action.context.actor_id))
        listed = self.side_effects
        if listed is not None:
            if every:
                checks.append(lambda action: action.side_effects <= listed)
            else:
                checks.append(lambda action: not listed.isdisjoint(action.side_effects))
        if self.paths is not None:
            checks.append(self._every_path_matches if every else self._any_path_matches)
        if self.arguments:
            checks.append(self._arguments_match)
        if self.arguments_json is not None:
            checks.append(self._arguments_json_match)
        if self.untrusted_arguments is not None:
            checks.append(self._untrusted_match)
        set_field(self, "_checks", tuple(checks))
        if not every and listed is not None:
            set_field(self, "opinion_side_effects", listed)
        if self.effect == "deny":
            set_field(self, "_verdict", Verdict.deny(self.reason, rule_ids=(self.rule_id,)))
        elif self.effect == "require":
            set_field(
                self,
                "_verdict",
                Verdict.allow_with_obligations(
                    self.obligations, self.reason, rule_ids=(self.rule_id,), quorum=self.quorum
                ),
            )

    def matches(self, action: Action) -> bool:
        """Whether every condition of this rule holds for ``action``."""
        return all(check(action) for check in self._checks)

    def _any_path_matches(self, action: Action) -> bool:
        return self._paths_match(action, every=False)

    def _every_path_matches(self, action: Action) -> bool:
        return self._paths_match(action, every=True)

    def _arguments_json_match(self, action: Action) -> bool:
        pattern = self.arguments_json
        if pattern is None:
            return False
        if pattern.search(_json_text(action.arguments)) is not None:
            return True
        if self.effect == "allow":
            # An allowlist reads the JSON spelling only: never broader than it.
            return False
        search = pattern.search
        if any(search(text) is not None for text in _strings_inside(action.arguments)):
            return True
        return any(search(text) is not None for text in _joined_lists(action.arguments))

    def _paths_match(self, action: Action, *, every: bool) -> bool:
        glob = self._path
        if glob is None:
            return False
        root = action.workspace_root or action.context.workspace
        components = action.relative_targets
        relative: list[str | None]
        if len(components) == len(action.targets):
            relative = [None if parts is None else "/".join(parts) for parts in components]
        else:  # an Action built by hand, without its precomputed relative targets
            relative = [workspace_relative(target, root) for target in action.targets]
        if action.cwd is not None:
            relative.append(workspace_relative(action.cwd, root))
        if not relative:
            return False
        fullmatch = glob.fullmatch
        for path in relative:
            hit = path is not None and fullmatch(path) is not None
            if hit and not every:
                return True
            if not hit and every:
                return False
        if every:
            return True
        # A rule that objects also sees each target the way an alias-forgiving filesystem
        # would (``secrets./key`` is ``secrets/key`` on NTFS); an allow rule never does.
        # The glob ignores case already, so only spellings that differ by more are retried.
        seen = {path.casefold() for path in relative if path is not None}
        for _, parts in getattr(action, "folded_targets", ()):
            alias = "/".join(parts)
            if alias not in seen and fullmatch(alias) is not None:
                return True
        return False

    def _arguments_match(self, action: Action) -> bool:
        arguments = action.arguments
        found = _found_in_all if self.effect == "allow" else _found_in_any
        for name, pattern in self.arguments:
            if name not in arguments:
                return False
            if not found(pattern, arguments[name]):
                return False
        return True

    def evaluate(self, action: Action) -> Verdict | None:
        """DENY or ALLOW_WITH_OBLIGATIONS when the rule matches; None otherwise.

        ``allow`` rules never return a verdict themselves: a file can only tighten the
        policy, and its allowlist is enforced by :class:`PolicyFileAllowlistRule`.
        """
        verdict = self._verdict
        if verdict is None:
            return None
        for check in self._checks:
            if not check(action):
                return None
        if self.untrusted_arguments is not None:
            # Say where the values came from (never the values): the audit log keeps it.
            extra = untrusted_reasons(self._untrusted(action))
            if self.effect == "deny":
                return Verdict.deny(self.reason, *extra, rule_ids=(self.rule_id,))
            return Verdict.allow_with_obligations(
                self.obligations,
                self.reason,
                *extra,
                rule_ids=(self.rule_id,),
                quorum=self.quorum,
            )
        return verdict

    def _untrusted(self, action: Action) -> tuple[Origin, ...]:
        provenance: Provenance | None = getattr(action, "provenance", None)
        if provenance is None or self.untrusted_arguments is None:
            return ()
        names = self.untrusted_arguments
        return provenance.untrusted(None if "*" in names else names)

    def _untrusted_match(self, action: Action) -> bool:
        return bool(self._untrusted(action))


@dataclass(frozen=True)
class PolicyFileAllowlistRule:
    """A file's ``default = "deny"``: deny every action none of its allow rules matches."""

    rule_id: str
    reason: str
    source: str
    allow_rules: tuple[PolicyFileRule, ...]

    def evaluate(self, action: Action) -> Verdict | None:
        """None when an ``allow`` rule of the file matches ``action``; DENY otherwise."""
        for rule in self.allow_rules:
            if rule.matches(action):
                return None
        return Verdict.deny(self.reason, rule_ids=(self.rule_id,))
