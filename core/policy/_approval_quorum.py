"""Who must approve a call, and how many of them: the quorum of an ``explicit_approval``.

A policy names approver groups and, per rule, the group that may approve and how many
distinct members must (M of N)::

    [approvers]
    ops = ["alice", "bob", "carol"]

    [[rule]]
    effect = "require"
    obligations = ["explicit_approval"]
    approvers = "ops"
    approvals = 2

Such a rule's verdict carries ``ApprovalQuorum(count=2, group="ops", approvers=...)``. A
quorum without a group admits anyone the PEP's approval verifier trusts; the default,
``ApprovalQuorum()``, is one approval from anyone, which is what an ``explicit_approval``
without a named group has always meant. When several rules ask, every quorum must be met
(each by distinct approvers; one approver may count toward several quorums).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from jevqueue.approvals._record import IDENTIFIER_PATTERN
from jevqueue.errors import ConfigurationError

__all__ = [
    "DEFAULT_QUORUM",
    "MAX_APPROVALS",
    "ApprovalQuorum",
    "describe_quorums",
    "effective_quorums",
    "no_record_reason",
    "quorums_met",
]

MAX_APPROVALS = 100
"""The most distinct approvals one quorum may ask for."""


@dataclass(frozen=True)
class ApprovalQuorum:
    """How many distinct approvers, from which group, an ``explicit_approval`` needs.

    Attributes:
        count: How many distinct approvers must approve (1 to 100).
        group: The approver group's name, or ``None`` for anyone the verifier trusts.
        approvers: The group's approver ids (as the verifier knows their keys), or
            ``None`` for anyone the verifier trusts. Given exactly when ``group`` is.

    Raises:
        ConfigurationError: a count that is not an integer from 1 to 100 (or exceeds the
            group), a group without approvers or approvers without a group, an empty group,
            or a name that is not an id (letters, digits and ``._:@+-``, at most 128).
    """

    count: int = 1
    group: str | None = None
    approvers: frozenset[str] | None = None

    def __post_init__(self) -> None:
        count = self.count
        if type(count) is not int or not 1 <= count <= MAX_APPROVALS:
            raise ConfigurationError(
                f"an approval quorum's count must be an integer from 1 to {MAX_APPROVALS} "
                f"(distinct approvers), not {count!r}"
            )
        if (self.group is None) != (self.approvers is None):
            raise ConfigurationError(
                "an approval quorum names a group and its approvers together, or neither "
                "(anyone the approval verifier trusts)"
            )
        if self.group is None:
            return
        if type(self.group) is not str or not IDENTIFIER_PATTERN.fullmatch(self.group):
            raise ConfigurationError(
                f"approver group name {self.group!r} is not an id: 1-128 letters, digits and "
                "'._:@+-', starting with a letter or digit"
            )
        members = _members(self.approvers, self.group)
        if count > len(members):
            raise ConfigurationError(
                f"{count} approvals from {self.group} can never be given: the group has "
                f"{len(members)} member{'s' if len(members) != 1 else ''}; lower the count or "
                "add approvers"
            )
        object.__setattr__(self, "approvers", members)

    @classmethod
    def of_group(cls, group: str, approvers: Iterable[str], count: int = 1) -> ApprovalQuorum:
        """``count`` distinct approvals from the members of ``group``."""
        return cls(count, group, _members(approvers, group))

    def admits(self, approver_id: str) -> bool:
        """Whether an approval by ``approver_id`` may count toward this quorum."""
        return self.approvers is None or approver_id in self.approvers

    def describe(self) -> str:
        """The quorum as a reviewer reads it: ``2 approvals from ops (alice, bob, carol)``."""
        noun = "approval" if self.count == 1 else "approvals"
        if self.approvers is None:
            who = "anyone" if self.count == 1 else "distinct approvers"
            return f"{self.count} {noun} from {who} the approval verifier trusts"
        return f"{self.count} {noun} from {self.group} ({', '.join(sorted(self.approvers))})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (approvers sorted); :meth:`from_dict` reads them back."""
        return {
            "count": self.count,
            "group": self.group,
            "approvers": None if self.approvers is None else sorted(self.approvers),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ApprovalQuorum:
        """Read :meth:`to_dict`'s form.

        Raises:
            ConfigurationError: not that form, or an impossible quorum.
        """
        if not isinstance(data, Mapping) or set(data) != {"count", "group", "approvers"}:
            raise ConfigurationError(
                "an approval quorum is an object with exactly count, group and approvers"
            )
        approvers = data["approvers"]
        if approvers is not None and not isinstance(approvers, list):
            raise ConfigurationError("an approval quorum's approvers are a list of ids or null")
        return cls(
            data["count"], data["group"], None if approvers is None else frozenset(approvers)
        )


def _members(approvers: Any, group: str) -> frozenset[str]:
    if isinstance(approvers, (str, bytes)) or not isinstance(approvers, Iterable):
        raise ConfigurationError(
            f"the approvers of group {group} must be a collection of approver ids, not "
            f"{type(approvers).__name__}"
        )
    members = tuple(approvers)
    if not members:
        raise ConfigurationError(
            f"approver group {group} is empty: nobody could approve; list its approver ids"
        )
    for member in members:
        if type(member) is not str or not IDENTIFIER_PATTERN.fullmatch(member):
            raise ConfigurationError(
                f"approver {member!r} of group {group} is not an approver id: 1-128 letters, "
                "digits and '._:@+-', starting with a letter or digit, as the approval "
                "verifier knows the approver's key"
            )
    return frozenset(members)


DEFAULT_QUORUM = ApprovalQuorum()
"""One approval from anyone the approval verifier trusts."""


def effective_quorums(quorums: tuple[ApprovalQuorum, ...]) -> tuple[ApprovalQuorum, ...]:
    """The quorums that must be met: ``quorums``, or the default when none is named."""
    return quorums if quorums else (DEFAULT_QUORUM,)


def quorums_met(quorums: Iterable[ApprovalQuorum], approvers: Iterable[str]) -> bool:
    """Whether the distinct ``approvers`` meet every quorum (the default when none)."""
    given = frozenset(approvers)
    return all(
        sum(1 for approver in given if quorum.admits(approver)) >= quorum.count
        for quorum in effective_quorums(tuple(quorums))
    )


def describe_quorums(quorums: Iterable[ApprovalQuorum]) -> str:
    """Every quorum that must be met, as one phrase joined by "and"."""
    return " and ".join(quorum.describe() for quorum in effective_quorums(tuple(quorums)))


def no_record_reason(quorums: tuple[ApprovalQuorum, ...], action_digest: str) -> str:
    """The reason of an ``explicit_approval`` offered no record: what to obtain for which
    digest (for a named quorum, how many approvals from whom)."""
    if not quorums:
        return (
            "explicit approval required: no approval record supplied; obtain one for "
            f"{action_digest} and retry"
        )
    return (
        "explicit approval required: no approval record supplied; obtain "
        f"{describe_quorums(quorums)} for {action_digest} and retry"
    )
