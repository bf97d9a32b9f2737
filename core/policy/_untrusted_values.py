"""The rule on provenance: a value the agent read in untrusted data never steers a side
effect unseen.

:class:`UntrustedValues` objects to a call when one of the arguments it names — or any,
when it names none — holds a value that came from an untrusted tool output and not from
the user's request (:class:`~jevqueue.policy.Provenance`): it requires an approval (the
request says which argument came from which output) or denies. A policy file says the
same with a rule's ``untrusted_arguments`` condition.

Without a transcript (a plugin that records nothing of what the agent read) a call has no
provenance and the rule has no opinion: provenance tightens a policy, it never relaxes one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from jevqueue.errors import ConfigurationError
from jevqueue.policy._provenance import Origin
from jevqueue.policy._verdict import Verdict

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.policy._action import Action

__all__ = ["UntrustedValues", "untrusted_reasons"]

_EXPLICIT_APPROVAL = "explicit_approval"
_NAMED_PER_REASON = 4


def untrusted_reasons(origins: Iterable[Origin]) -> tuple[str, ...]:
    """Where each untrusted value came from, without the value: what a verdict (and so the
    audit log) may say."""
    lines = []
    for origin in list(origins)[:_NAMED_PER_REASON]:
        what = f"a {origin.kind} in {origin.argument}" if origin.kind else origin.argument
        where = " and ".join(source.describe() for source in origin.sources) or (
            "an output no longer held"
        )
        lines.append(f"{what} came from {where}, not from the user's request")
    return tuple(lines)


@dataclass(frozen=True)
class UntrustedValues:
    """Require an approval for (or deny) a call steered by untrusted data.

    Args:
        rule_id: the rule's stable id.
        reason: why, for a person (the sources are added to it, never the values).
        arguments: the top-level argument names watched; empty watches every argument.
        side_effects: only tools with one of these side effects; empty means every tool.
        effect: ``"require"`` (an explicit approval) or ``"deny"``.

    Example::

        UntrustedValues(
            "acme.untrusted_recipients",
            "a recipient the agent read in an e-mail needs the user's approval",
            arguments=("to", "cc", "bcc"),
            side_effects=("send_email",),
        )
    """

    rule_id: str
    reason: str
    arguments: frozenset[str] = frozenset()
    side_effects: frozenset[str] = frozenset()
    effect: Literal["require", "deny"] = "require"
    opinion_side_effects: frozenset[str] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        for name, value in (("rule_id", self.rule_id), ("reason", self.reason)):
            if not isinstance(value, str) or not value.strip():
                raise ConfigurationError(f"UntrustedValues needs a non-empty {name}")
        for name in ("arguments", "side_effects"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(item, str) and item for item in value):
                raise ConfigurationError(
                    f"UntrustedValues {self.rule_id!r}: {name} must be a collection of "
                    f"names, such as ('to',), not {value!r}"
                )
            object.__setattr__(self, name, frozenset(value))
        if self.effect not in ("require", "deny"):
            raise ConfigurationError(
                f"UntrustedValues {self.rule_id!r}: effect must be 'require' or 'deny', "
                f"not {self.effect!r}"
            )
        if self.side_effects:
            object.__setattr__(self, "opinion_side_effects", self.side_effects)

    def evaluate(self, action: Action) -> Verdict | None:
        """Object when a watched argument came from untrusted data; no opinion otherwise."""
        provenance = action.provenance
        if provenance is None:
            return None
        if self.side_effects and self.side_effects.isdisjoint(action.side_effects):
            return None
        found = provenance.untrusted(self.arguments or None)
        if not found:
            return None
        reasons = (self.reason, *untrusted_reasons(found))
        if self.effect == "deny":
            return Verdict.deny(*reasons, rule_ids=(self.rule_id,))
        return Verdict.allow_with_obligations(
            (_EXPLICIT_APPROVAL,), *reasons, rule_ids=(self.rule_id,)
        )
