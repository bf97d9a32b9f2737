"""The policy decision point: every rule's opinion, combined into one verdict.

Combination, in precedence order:

1. any DENY wins; its reasons are every denying rule's reasons;
2. else any REPAIR wins (the first repairing rule's proposal; every repairing rule's
   reasons);
3. else ALLOW_WITH_OBLIGATIONS with the union of all obligations and of every rule's
   approval quorum (each must be met; a rule that names none adds nothing, since one
   approval from anyone trusted is given by any other quorum's approvals);
4. else ALLOW (no rule objected).

A rule may declare ``opinion_side_effects``, a frozenset of side-effect names: it is
then asked only about actions with at least one of them (it must have no opinion about the
others). The rules to ask are worked out once per set of side effects.

A rule that raises, or returns something that is not a
:class:`~jevqueue.policy.Verdict`, counts as a DENY naming the rule (fail closed). Rules
from policy files are added to the defaults, so they can tighten the policy but never turn
a default DENY into anything else. The verdict is bound to the action's digest and to the
PDP's ``revision``: a hash of the jevqueue version, the rule ids, any rule ``fingerprint``
and the bytes of every policy file, so an audit record says exactly which policy decided.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from jevqueue.errors import ConfigurationError, PolicyFileError
from jevqueue.policy._approval_quorum import ApprovalQuorum
from jevqueue.policy._default_rules import default_rules
from jevqueue.policy._verdict import Verdict, VerdictKind

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.policy._action import Action
    from jevqueue.policy._registry import ToolRegistry
    from jevqueue.policy._rule import Rule

__all__ = [
    "PolicyDecisionPoint",
    "RuleBasedPolicyDecisionPoint",
    "create_default_policy_decision_point",
]

_FAIL_CLOSED = "jevqueue.pdp.fail_closed"
_ALLOW = VerdictKind.ALLOW
_new = object.__new__
_set_attribute = object.__setattr__
_PLAN_LIMIT = 256


def _side_effect_filter(rule: object) -> frozenset[str] | None:
    wanted = getattr(rule, "opinion_side_effects", None)
    if isinstance(wanted, frozenset) and all(type(name) is str for name in wanted):
        return wanted
    return None


@runtime_checkable
class PolicyDecisionPoint(Protocol):
    """Anything that judges actions: a ``revision`` string and :meth:`evaluate`."""

    revision: str

    def evaluate(self, action: Action) -> Verdict:
        """Return the verdict for ``action``."""
        ...


def _revision(rules: Sequence[Rule], file_digests: Sequence[str]) -> str:
    from jevqueue import __version__

    # The version stands in for the default rules' code: a release that changes them
    # changes every revision, so an audit record always names the policy that decided.
    description = {
        "jevqueue": __version__,
        "rules": [[rule.rule_id, str(getattr(rule, "fingerprint", ""))] for rule in rules],
        "files": list(file_digests),
    }
    encoded = json.dumps(description, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(encoded).hexdigest()


class RuleBasedPolicyDecisionPoint:
    """Combines the verdicts of a sequence of rules.

    Args:
        rules: the rules, evaluated in order (every rule always runs).
        revision: a fixed revision string; by default a hash of the rule ids.
        registry: the tool registry the policy was written for, kept for reference.

    Raises:
        ConfigurationError: a rule lacks a string ``rule_id`` or an ``evaluate`` method,
            or two rules share an id.
    """

    def __init__(
        self,
        rules: Iterable[Rule],
        *,
        revision: str | None = None,
        registry: ToolRegistry | None = None,
    ) -> None:
        self.rules: tuple[Rule, ...] = tuple(rules)
        seen: set[str] = set()
        for rule in self.rules:
            rule_id = getattr(rule, "rule_id", None)
            if not isinstance(rule_id, str) or not rule_id:
                raise ConfigurationError(
                    f"{type(rule).__name__} has no rule_id: give every rule a stable string id"
                )
            if not callable(getattr(rule, "evaluate", None)):
                raise ConfigurationError(f"rule {rule_id!r} has no evaluate(action) method")
            if rule_id in seen:
                raise ConfigurationError(f"two rules share the id {rule_id!r}: ids must be unique")
            seen.add(rule_id)
        self.revision: str = revision if revision is not None else _revision(self.rules, ())
        self.registry = registry
        self._evaluators = tuple((rule.rule_id, rule.evaluate) for rule in self.rules)
        # A rule may declare ``opinion_side_effects``: the side effects without one of which
        # it has no opinion. The rules to ask are worked out once per set of side effects.
        self._filters = tuple(_side_effect_filter(rule) for rule in self.rules)
        self._plans: dict[frozenset[str], tuple[tuple[str, Any], ...]] = {}

    def _plan(self, side_effects: frozenset[str]) -> tuple[tuple[str, Any], ...]:
        plan = tuple(
            evaluator
            for evaluator, wanted in zip(self._evaluators, self._filters, strict=True)
            if wanted is None or not wanted.isdisjoint(side_effects)
        )
        if len(self._plans) >= _PLAN_LIMIT:
            self._plans.clear()
        self._plans[side_effects] = plan
        return plan

    def evaluate(self, action: Action) -> Verdict:
        """Ask every rule and combine the answers (see the module docstring)."""
        effects = action.side_effects
        evaluators = self._plans.get(effects) if type(effects) is frozenset else None
        if evaluators is None:
            evaluators = self._plan(effects) if type(effects) is frozenset else self._evaluators
        opinions: list[Verdict] | None = None
        for rule_id, evaluate in evaluators:
            try:
                verdict = evaluate(action)
            except Exception as error:  # fail closed, without echoing the message
                verdict = Verdict.deny(
                    f"rule {rule_id} failed ({type(error).__name__}): denied to fail closed",
                    rule_ids=(rule_id, _FAIL_CLOSED),
                )
            else:
                if verdict is None:
                    continue
                if type(verdict) is not Verdict:
                    verdict = Verdict.deny(
                        f"rule {rule_id} returned a {type(verdict).__name__}, not a Verdict: "
                        "denied to fail closed",
                        rule_ids=(rule_id, _FAIL_CLOSED),
                    )
            if opinions is None:
                opinions = [verdict]
            else:
                opinions.append(verdict)
        if opinions is None:
            # Verdict._trusted(ALLOW, ...), inline: most calls end here.
            allow = _new(Verdict)
            _set_attribute(
                allow,
                "__dict__",
                {
                    "kind": _ALLOW,
                    "reasons": (),
                    "obligations": (),
                    "repaired": None,
                    "action_digest": action.digest,
                    "policy_revision": self.revision,
                    "rule_ids": (),
                    "quorums": (),
                },
            )
            return allow
        if len(opinions) == 1:
            only = opinions[0]
            if only.kind is not VerdictKind.ALLOW_WITH_OBLIGATIONS or only.obligations:
                # only.bound(action.digest, self.revision), inline
                digest = action.digest
                revision = self.revision
                if only.action_digest == digest and only.policy_revision == revision:
                    return only
                bound = _new(Verdict)
                _set_attribute(
                    bound,
                    "__dict__",
                    {
                        "kind": only.kind,
                        "reasons": only.reasons,
                        "obligations": only.obligations,
                        "repaired": only.repaired,
                        "action_digest": digest,
                        "policy_revision": revision,
                        "rule_ids": only.rule_ids,
                        "quorums": only.quorums,
                    },
                )
                return bound
        denials: list[Verdict] = []
        repairs: list[Verdict] = []
        obligated: list[Verdict] = []
        allowances: list[Verdict] = []
        for verdict in opinions:
            kind = verdict.kind
            if kind is VerdictKind.DENY:
                denials.append(verdict)
            elif kind is VerdictKind.REPAIR:
                repairs.append(verdict)
            elif kind is VerdictKind.ALLOW_WITH_OBLIGATIONS and verdict.obligations:
                obligated.append(verdict)
            else:
                allowances.append(verdict)
        return self._combine(action, denials, repairs, obligated, allowances)

    def _combine(
        self,
        action: Action,
        denials: list[Verdict],
        repairs: list[Verdict],
        obligated: list[Verdict],
        allowances: list[Verdict],
    ) -> Verdict:
        digest = action.digest
        revision = self.revision
        if denials:
            chosen = denials
            kind = VerdictKind.DENY
        elif repairs:
            chosen = repairs
            kind = VerdictKind.REPAIR
        elif obligated:
            chosen = obligated
            kind = VerdictKind.ALLOW_WITH_OBLIGATIONS
        elif allowances:
            chosen = allowances
            kind = VerdictKind.ALLOW
        else:
            return Verdict._trusted(VerdictKind.ALLOW, (), (), None, digest, revision, ())
        if len(chosen) == 1 and chosen[0].kind is kind:
            return chosen[0].bound(digest, revision)
        reasons = tuple(reason for verdict in chosen for reason in verdict.reasons)
        rule_ids = tuple(dict.fromkeys(rid for verdict in chosen for rid in verdict.rule_ids))
        obligations: tuple[str, ...] = ()
        quorums: tuple[ApprovalQuorum, ...] = ()
        if kind is VerdictKind.ALLOW_WITH_OBLIGATIONS:
            obligations = tuple(
                dict.fromkeys(name for verdict in chosen for name in verdict.obligations)
            )
            # Every rule's quorum must be met. A rule that names none asks for one approval
            # from anyone trusted, which any other quorum's approvals already give.
            quorums = tuple(
                dict.fromkeys(quorum for verdict in chosen for quorum in verdict.quorums)
            )
        return Verdict._trusted(
            kind,
            reasons,
            obligations,
            chosen[0].repaired if kind is VerdictKind.REPAIR else None,
            digest,
            revision,
            rule_ids,
            quorums,
        )

    def __repr__(self) -> str:
        ids = [rule.rule_id for rule in self.rules]
        return f"RuleBasedPolicyDecisionPoint(rules={ids!r}, revision={self.revision!r})"


def _check_groups(
    file: str,
    declared: Mapping[str, frozenset[str]],
    groups: dict[str, tuple[frozenset[str], str]],
) -> None:
    """Add ``file``'s approver groups to ``groups``; one group means one set of approvers.

    Raises:
        PolicyFileError: ``file`` declares a group an earlier file declared otherwise.
    """
    for group, members in declared.items():
        earlier = groups.get(group)
        if earlier is None:
            groups[group] = (members, file)
        elif earlier[0] != members:
            raise PolicyFileError(
                file,
                None,
                f"approver group {group!r} is also declared in {earlier[1]} with other "
                f"approvers ({', '.join(sorted(earlier[0]))}, here "
                f"{', '.join(sorted(members))}): a group means the same people in every "
                "file; declare it once, or identically, or rename one",
            )


def create_default_policy_decision_point(
    *,
    policy_files: Iterable[str | PathLike[str]] = (),
    registry: ToolRegistry | None = None,
) -> RuleBasedPolicyDecisionPoint:
    """Return the default policy, plus the rules of any policy files.

    Args:
        policy_files: policy files whose rules are added after the defaults (see
            ``docs/policy.md``). They can only tighten the policy — a default DENY stays a
            DENY — except that ``[policy] relax`` may switch off the default rules listed
            in :data:`jevqueue.policy.RELAXABLE_RULES` (delete approval).
        registry: the tool registry the policy is meant for, kept on the PDP.

    Returns:
        A decision point whose ``revision`` hashes the rule ids and the files' bytes.

    Raises:
        PolicyFileError: a policy file cannot be read or is invalid (with file and line).
    """
    rules: list[Rule] = list(default_rules())
    file_digests: list[str] = []
    if isinstance(policy_files, (str, bytes, PathLike)):
        raise ConfigurationError(
            f"policy_files takes a list of paths, not one {type(policy_files).__name__}: "
            f"write policy_files=[{str(policy_files)!r}]"
        )
    sources = list(policy_files)
    if sources:
        # Imported only when needed: the default policy has no policy-file dependency.
        from jevqueue.policy_files._loader import load_policy_file

        names: dict[str, str] = {}
        groups: dict[str, tuple[frozenset[str], str]] = {}
        relaxed: set[str] = set()
        for source in sources:
            if not isinstance(source, (str, PathLike)):
                raise ConfigurationError(
                    f"policy_files holds a {type(source).__name__}: every entry must be a "
                    "path (str or pathlib.Path) to a policy file"
                )
            # One read per file: the revision hashes the very bytes the rules came from.
            report = load_policy_file(Path(source))
            earlier = names.get(report.name)
            if earlier is not None:
                raise PolicyFileError(
                    report.file,
                    None,
                    f"policy name {report.name!r} is also the name of {earlier}: rule ids "
                    "are prefixed with the name, so two policies must not share it; change "
                    "[policy] name in one of the two files",
                )
            names[report.name] = report.file
            _check_groups(report.file, report.approver_groups, groups)
            file_digests.append(report.sha256)
            rules.extend(report.rules)
            relaxed.update(report.relax)
        if relaxed:
            rules = [rule for rule in rules if getattr(rule, "rule_id", None) not in relaxed]
    return RuleBasedPolicyDecisionPoint(
        rules, revision=_revision(rules, file_digests), registry=registry
    )
