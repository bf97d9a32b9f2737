"""Verdicts: the four things a policy can say about one tool call.

A :class:`Verdict` is frozen and closed: its kind is one of :class:`VerdictKind`, and its
fields are checked against that kind when it is built. Build one with the named
constructors — :meth:`Verdict.allow`, :meth:`Verdict.deny`,
:meth:`Verdict.allow_with_obligations`, :meth:`Verdict.repair`.

Reasons are fixed sentences written by rules. They name fields, rules and categories
("TargetFile resolves outside the workspace", "content carries an AWS access key"), never
an argument's value, so a verdict can be logged or shown to the model without leaking
what the agent sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any

from jevqueue.policy._approval_quorum import ApprovalQuorum

__all__ = ["Verdict", "VerdictKind"]

_new = object.__new__
_set_attribute = object.__setattr__


class VerdictKind(str, Enum):
    """The closed set of verdict kinds."""

    ALLOW = "ALLOW"
    DENY = "DENY"
    ALLOW_WITH_OBLIGATIONS = "ALLOW_WITH_OBLIGATIONS"
    REPAIR = "REPAIR"


def _strings(value: Iterable[str], what: str) -> tuple[str, ...]:
    if isinstance(value, str):
        raise TypeError(f"Verdict {what} must be a tuple of strings, not a single string")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"Verdict {what} must hold strings, not {type(item).__name__}")
    return items


def _checked(value: Iterable[str], what: str) -> tuple[str, ...]:
    items = value if type(value) is tuple else _strings(value, what)
    for item in items:
        if type(item) is not str:
            raise TypeError(f"Verdict {what} must hold strings, not {type(item).__name__}")
    return items


_EXPLICIT_APPROVAL = "explicit_approval"


def _quorums(value: Any) -> tuple[ApprovalQuorum, ...]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise TypeError(
            f"Verdict quorums must be ApprovalQuorum values, not {type(value).__name__}"
        )
    items = tuple(value)
    for item in items:
        if type(item) is not ApprovalQuorum:
            raise TypeError(
                f"Verdict quorums must hold ApprovalQuorum values, not {type(item).__name__}"
            )
    return tuple(dict.fromkeys(items))


@dataclass(frozen=True)
class Verdict:
    """The decision about one action.

    Attributes:
        kind: ALLOW, DENY, ALLOW_WITH_OBLIGATIONS or REPAIR.
        reasons: why, in fixed sentences that never echo argument values.
        obligations: what must happen before the call may run (``explicit_approval``).
            Fulfilled obligations are removed, so an ``ALLOW_WITH_OBLIGATIONS`` with no
            obligations left is a fulfilled one (see :attr:`allowed`).
        repaired: for REPAIR, the proposal to resubmit: ``{"tool": ..., "arguments": ...}``.
        action_digest: the digest of the action judged (``sha256:<hex>``).
        policy_revision: the revision of the policy that judged it.
        rule_ids: the rules that produced this verdict.
        quorums: for ALLOW_WITH_OBLIGATIONS with ``explicit_approval``, who must approve
            and how many (:class:`~jevqueue.policy.ApprovalQuorum`); every one must be met.
            Empty means one approval from anyone the PEP's approval verifier trusts.
    """

    kind: VerdictKind
    reasons: tuple[str, ...]
    obligations: tuple[str, ...] = ()
    repaired: Mapping[str, Any] | None = field(default=None, hash=False)
    action_digest: str = ""
    policy_revision: str = ""
    rule_ids: tuple[str, ...] = ()
    quorums: tuple[ApprovalQuorum, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.kind, VerdictKind):
            raise TypeError(f"Verdict kind must be a VerdictKind, not {self.kind!r}")
        for name in ("reasons", "obligations", "rule_ids"):
            value = getattr(self, name)
            if type(value) is not tuple:
                object.__setattr__(self, name, _strings(value, name))
            else:
                for item in value:
                    if type(item) is not str:
                        raise TypeError(
                            f"Verdict {name} must hold strings, not {type(item).__name__}"
                        )
        if type(self.action_digest) is not str or type(self.policy_revision) is not str:
            raise TypeError("Verdict action_digest and policy_revision must be strings")
        if self.obligations and self.kind is not VerdictKind.ALLOW_WITH_OBLIGATIONS:
            raise ValueError("only an ALLOW_WITH_OBLIGATIONS verdict carries obligations")
        if self.kind is VerdictKind.REPAIR:
            repaired = self.repaired
            if (
                not isinstance(repaired, Mapping)
                or not isinstance(repaired.get("tool"), str)
                or not isinstance(repaired.get("arguments"), Mapping)
            ):
                raise ValueError(
                    "a REPAIR verdict needs repaired={'tool': str, 'arguments': mapping}"
                )
            if not isinstance(repaired, MappingProxyType):
                object.__setattr__(self, "repaired", MappingProxyType(dict(repaired)))
        elif self.repaired is not None:
            raise ValueError("only a REPAIR verdict carries a repaired proposal")
        quorums = self.quorums
        if type(quorums) is not tuple:
            quorums = _quorums(quorums)
            object.__setattr__(self, "quorums", quorums)
        elif any(type(quorum) is not ApprovalQuorum for quorum in quorums):
            raise TypeError("Verdict quorums must hold ApprovalQuorum values")
        if quorums and self.kind is not VerdictKind.ALLOW_WITH_OBLIGATIONS:
            raise ValueError("only an ALLOW_WITH_OBLIGATIONS verdict carries approval quorums")

    @classmethod
    def _trusted(
        cls,
        kind: VerdictKind,
        reasons: tuple[str, ...],
        obligations: tuple[str, ...],
        repaired: Mapping[str, Any] | None,
        action_digest: str,
        policy_revision: str,
        rule_ids: tuple[str, ...],
        quorums: tuple[ApprovalQuorum, ...] = (),
    ) -> Verdict:
        """Build a verdict from parts taken from already-validated verdicts (hot path).

        Skips ``__post_init__``: every part must come from a valid verdict of this kind.
        """
        verdict = _new(cls)
        _set_attribute(
            verdict,
            "__dict__",
            {
                "kind": kind,
                "reasons": reasons,
                "obligations": obligations,
                "repaired": repaired,
                "action_digest": action_digest,
                "policy_revision": policy_revision,
                "rule_ids": rule_ids,
                "quorums": quorums,
            },
        )
        return verdict

    def bound(self, action_digest: str, policy_revision: str) -> Verdict:
        """Return this verdict bound to ``action_digest`` and ``policy_revision``."""
        if self.action_digest == action_digest and self.policy_revision == policy_revision:
            return self
        return Verdict._trusted(
            self.kind,
            self.reasons,
            self.obligations,
            self.repaired,
            action_digest,
            policy_revision,
            self.rule_ids,
            self.quorums,
        )

    # --- named constructors -------------------------------------------------------

    @classmethod
    def allow(cls, *reasons: str, rule_ids: Iterable[str] = ()) -> Verdict:
        """The call may run."""
        return cls._trusted(
            VerdictKind.ALLOW,
            _checked(reasons, "reasons"),
            (),
            None,
            "",
            "",
            _checked(rule_ids, "rule_ids"),
        )

    @classmethod
    def deny(cls, *reasons: str, rule_ids: Iterable[str] = ()) -> Verdict:
        """The call must not run. Give at least one reason."""
        if not reasons:
            raise ValueError("a DENY verdict needs at least one reason")
        return cls._trusted(
            VerdictKind.DENY,
            _checked(reasons, "reasons"),
            (),
            None,
            "",
            "",
            _checked(rule_ids, "rule_ids"),
        )

    @classmethod
    def allow_with_obligations(
        cls,
        obligations: Iterable[str],
        *reasons: str,
        rule_ids: Iterable[str] = (),
        quorum: ApprovalQuorum | Iterable[ApprovalQuorum] | None = None,
    ) -> Verdict:
        """The call may run once every obligation (e.g. ``explicit_approval``) is met.

        Args:
            obligations: what must happen first.
            *reasons: why, in fixed sentences.
            rule_ids: the rules that produced the verdict.
            quorum: for ``explicit_approval``, who must approve and how many: an
                :class:`~jevqueue.policy.ApprovalQuorum` (or several, each to be met).
                ``None``: one approval from anyone the approval verifier trusts.

        Raises:
            ValueError: no obligation, or a quorum without ``explicit_approval``.
        """
        names = _checked(obligations, "obligations")
        if not names:
            raise ValueError("allow_with_obligations() needs at least one obligation")
        if len(names) > 1:
            names = tuple(dict.fromkeys(names))
        quorums: tuple[ApprovalQuorum, ...] = ()
        if quorum is not None:
            quorums = _quorums((quorum,) if type(quorum) is ApprovalQuorum else quorum)
            if quorums and _EXPLICIT_APPROVAL not in names:
                raise ValueError(
                    "an approval quorum goes with the explicit_approval obligation: add "
                    "'explicit_approval' to the obligations, or drop quorum="
                )
        return cls._trusted(
            VerdictKind.ALLOW_WITH_OBLIGATIONS,
            _checked(reasons, "reasons"),
            names,
            None,
            "",
            "",
            _checked(rule_ids, "rule_ids"),
            quorums,
        )

    @classmethod
    def repair(
        cls,
        tool: str,
        arguments: Mapping[str, Any],
        *reasons: str,
        rule_ids: Iterable[str] = (),
    ) -> Verdict:
        """The call must not run as proposed; resubmit ``tool`` with ``arguments``."""
        return cls(
            VerdictKind.REPAIR,
            reasons,
            repaired={"tool": tool, "arguments": dict(arguments)},
            rule_ids=tuple(rule_ids),
        )

    # --- reading ------------------------------------------------------------------

    @property
    def allowed(self) -> bool:
        """True for ALLOW, and for ALLOW_WITH_OBLIGATIONS once no obligation is left."""
        kind = self.kind
        return kind is VerdictKind.ALLOW or (
            kind is VerdictKind.ALLOW_WITH_OBLIGATIONS and not self.obligations
        )

    @property
    def denied(self) -> bool:
        """True for DENY."""
        return self.kind is VerdictKind.DENY

    def as_dict(self) -> dict[str, Any]:
        """Return a JSON-ready mapping of every field."""
        return {
            "kind": self.kind.value,
            "reasons": list(self.reasons),
            "obligations": list(self.obligations),
            "repaired": None
            if self.repaired is None
            else {"tool": self.repaired["tool"], "arguments": dict(self.repaired["arguments"])},
            "action_digest": self.action_digest,
            "policy_revision": self.policy_revision,
            "rule_ids": list(self.rule_ids),
            "quorums": [quorum.to_dict() for quorum in self.quorums],
        }
