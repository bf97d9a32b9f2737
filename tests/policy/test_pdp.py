from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from jevqueue.errors import ConfigurationError, PolicyFileError
from jevqueue.policy import (
    Action,
    FunctionRule,
    PolicyDecisionPoint,
    Rule,
    RuleBasedPolicyDecisionPoint,
    Verdict,
    VerdictKind,
    create_default_policy_decision_point,
    default_rules,
    generic_registry,
)

from .conftest import context_mapping

REGISTRY = generic_registry()


def action(path: str = "src/a.py", content: str = "x = 1\n") -> Action:
    return Action.build(
        REGISTRY, "write_to_file", {"TargetFile": path, "CodeContent": content}, context_mapping()
    )


def rule(rule_id: str, verdict: Verdict | None) -> FunctionRule:
    return FunctionRule(rule_id, lambda _action: verdict)


def test_default_pdp_satisfies_the_protocols() -> None:
    pdp = create_default_policy_decision_point()
    assert isinstance(pdp, PolicyDecisionPoint)
    assert all(isinstance(item, Rule) for item in pdp.rules)
    assert pdp.revision.startswith("sha256:")


def test_revision_is_stable_and_tracks_the_rules() -> None:
    one = create_default_policy_decision_point()
    two = create_default_policy_decision_point(registry=REGISTRY)
    assert one.revision == two.revision
    assert two.registry is REGISTRY
    extended = RuleBasedPolicyDecisionPoint([*default_rules(), rule("acme.extra", None)])
    assert extended.revision != RuleBasedPolicyDecisionPoint(default_rules()).revision


def test_no_opinion_is_allow() -> None:
    verdict = RuleBasedPolicyDecisionPoint([rule("a", None)]).evaluate(action())
    assert verdict.kind is VerdictKind.ALLOW
    assert verdict.action_digest == action().digest


def test_combination_precedence() -> None:
    deny = Verdict.deny("d", rule_ids=("d",))
    repair = Verdict.repair("write_to_file", {"TargetFile": "b.py"}, "r", rule_ids=("r",))
    review = Verdict.allow_with_obligations(["review"], "o1", rule_ids=("o1",))
    approval = Verdict.allow_with_obligations(["explicit_approval"], "o2", rule_ids=("o2",))
    allow = Verdict.allow("a", rule_ids=("a",))

    def combine(*verdicts: Verdict) -> Verdict:
        rules = [rule(f"rule{index}", item) for index, item in enumerate(verdicts)]
        return RuleBasedPolicyDecisionPoint(rules).evaluate(action())

    assert combine(allow, review, repair, deny).kind is VerdictKind.DENY
    assert combine(deny, allow).reasons == ("d",)
    repaired = combine(allow, review, repair)
    assert repaired.kind is VerdictKind.REPAIR and repaired.repaired == repair.repaired
    union = combine(review, allow, approval, review)
    assert union.kind is VerdictKind.ALLOW_WITH_OBLIGATIONS
    assert union.obligations == ("review", "explicit_approval")
    assert union.rule_ids == ("o1", "o2")
    assert combine(allow).kind is VerdictKind.ALLOW


def test_added_rules_can_never_relax_a_default_deny() -> None:
    lenient = FunctionRule("acme.allow_everything", lambda _a: Verdict.allow("trust me"))
    pdp = RuleBasedPolicyDecisionPoint([*default_rules(), lenient])
    assert pdp.evaluate(action("../escape.py")).kind is VerdictKind.DENY
    assert pdp.evaluate(action(".git/hooks/pre-commit")).kind is VerdictKind.DENY


@pytest.mark.parametrize(
    "behaviour",
    [
        lambda _a: (_ for _ in ()).throw(RuntimeError("secret-value-123")),
        lambda _a: 1 / 0,
        lambda _a: "ALLOW",
        lambda _a: {"kind": "ALLOW"},
    ],
)
def test_a_failing_rule_denies_without_echoing(behaviour: Any) -> None:
    pdp = RuleBasedPolicyDecisionPoint([FunctionRule("acme.broken", behaviour)])
    verdict = pdp.evaluate(action())
    assert verdict.kind is VerdictKind.DENY
    assert "acme.broken" in verdict.rule_ids
    assert "secret-value-123" not in " ".join(verdict.reasons)


def test_rules_must_have_ids_and_be_unique() -> None:
    class Nameless:
        def evaluate(self, _action: Action) -> None:
            return None

    with pytest.raises(ConfigurationError):
        RuleBasedPolicyDecisionPoint([Nameless()])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError):
        RuleBasedPolicyDecisionPoint([rule("same", None), rule("same", None)])


def test_missing_policy_file_is_a_policy_file_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyFileError) as caught:
        create_default_policy_decision_point(policy_files=[tmp_path / "absent.toml"])
    assert "absent.toml" in str(caught.value)


def test_policy_file_module_is_imported_only_when_needed() -> None:
    code = (
        "import sys\n"
        "from jevqueue import create_default_policy_decision_point as c\n"
        "c()\n"
        "assert 'jevqueue.policy_files._loader' not in sys.modules, 'imported eagerly'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
