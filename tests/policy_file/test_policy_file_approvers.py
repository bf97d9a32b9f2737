"""Approver groups and M-of-N in policy files: the format, its mistakes, and the verdict."""

from __future__ import annotations

from pathlib import Path

import pytest
from jevqueue.errors import PolicyFileError
from jevqueue.policy import (
    Action,
    ApprovalQuorum,
    FunctionRule,
    RuleBasedPolicyDecisionPoint,
    Verdict,
    VerdictKind,
    create_default_policy_decision_point,
    generic_registry,
)
from jevqueue.policy_files import check_policy_file

CONTEXT = {
    "task_id": "task-1",
    "actor_id": "agent",
    "workspace": "/workspace/project",
    "git_sha": "0123456789abcdef0123456789abcdef01234567",
}

GROUPS = """
[approvers]
ops = ["alice", "bob", "carol"]
security = ["dave", "erin"]
"""

DEPLOY = """
[[rule]]
id = "prod-deploy"
effect = "require"
obligations = ["explicit_approval"]
reason = "deploys need two of ops"
tools = ["run_command"]
approvers = "ops"
approvals = 2
"""


def write(tmp_path: Path, text: str, name: str = "acme.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def command() -> Action:
    return Action.build(
        generic_registry(),
        "run_command",
        {"CommandLine": "make deploy", "Cwd": "/workspace/project"},
        CONTEXT,
    )


def test_a_require_rule_names_a_group_and_a_count(tmp_path: Path) -> None:
    pdp = create_default_policy_decision_point(policy_files=[write(tmp_path, GROUPS + DEPLOY)])
    verdict = pdp.evaluate(command())
    assert verdict.kind is VerdictKind.ALLOW_WITH_OBLIGATIONS
    ops = ApprovalQuorum.of_group("ops", ["alice", "bob", "carol"], 2)
    assert verdict.quorums == (ops,)  # the default shell approval adds nothing to it
    assert verdict.as_dict()["quorums"] == [
        {"count": 2, "group": "ops", "approvers": ["alice", "bob", "carol"]}
    ]
    assert ops.describe() == "2 approvals from ops (alice, bob, carol)"


def test_a_count_without_a_group_is_distinct_approvers_anyone_trusts(tmp_path: Path) -> None:
    text = DEPLOY.replace('approvers = "ops"\n', "")
    verdict = create_default_policy_decision_point(policy_files=[write(tmp_path, text)]).evaluate(
        command()
    )
    assert verdict.quorums == (ApprovalQuorum(2),)
    assert (
        ApprovalQuorum(2).describe()
        == "2 approvals from distinct approvers the approval verifier trusts"
    )


def test_without_a_group_or_count_the_verdict_is_as_before(tmp_path: Path) -> None:
    text = DEPLOY.replace('approvers = "ops"\n', "").replace("approvals = 2\n", "")
    verdict = create_default_policy_decision_point(policy_files=[write(tmp_path, text)]).evaluate(
        command()
    )
    assert verdict.quorums == () and verdict.as_dict()["quorums"] == []


def test_every_matching_rule_s_quorum_must_be_met(tmp_path: Path) -> None:
    security = (
        DEPLOY.replace('"prod-deploy"', '"security-look"')
        .replace('approvers = "ops"', 'approvers = "security"')
        .replace("approvals = 2", "approvals = 1")
    )
    pdp = create_default_policy_decision_point(
        policy_files=[write(tmp_path, GROUPS + DEPLOY + security)]
    )
    assert [q.group for q in pdp.evaluate(command()).quorums] == ["ops", "security"]


def test_programmatic_rules_name_a_quorum_on_the_constructor() -> None:
    ops = ApprovalQuorum.of_group("ops", ["alice", "bob", "carol"], 2)
    rule = FunctionRule(
        "acme.deploys",
        lambda action: Verdict.allow_with_obligations(
            ["explicit_approval"], "two of ops", quorum=ops
        ),
    )
    other = FunctionRule(
        "acme.anyone",
        lambda action: Verdict.allow_with_obligations(["explicit_approval"], "anyone"),
    )
    verdict = RuleBasedPolicyDecisionPoint([rule, other]).evaluate(command())
    assert verdict.quorums == (ops,)
    with pytest.raises(ValueError, match="goes with the explicit_approval obligation"):
        Verdict.allow_with_obligations(["other"], "x", quorum=ops)
    with pytest.raises(ValueError, match="only an ALLOW_WITH_OBLIGATIONS"):
        Verdict(VerdictKind.ALLOW, (), quorums=(ops,))


@pytest.mark.parametrize(
    ("arguments", "complaint"),
    [
        ((0,), "integer from 1 to 100"),
        ((True,), "integer from 1 to 100"),
        ((101,), "integer from 1 to 100"),
        ((2, "ops", None), "names a group and its approvers together"),
        ((4, "ops", frozenset({"alice", "bob"})), "can never be given"),
        ((1, "ops", frozenset()), "is empty"),
        ((1, "ops", frozenset({"bad id"})), "is not an approver id"),
        ((1, "bad group", frozenset({"alice"})), "is not an id"),
    ],
)
def test_an_impossible_quorum_is_a_configuration_error(
    arguments: tuple[object, ...], complaint: str
) -> None:
    from jevqueue.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match=complaint):
        ApprovalQuorum(*arguments)  # type: ignore[arg-type]


RULE_HEAD = """
[[rule]]
id = "r"
effect = "require"
obligations = ["explicit_approval"]
reason = "why"
tools = ["run_command"]
"""

MISTAKES = [
    (
        "unknown-group",
        GROUPS + RULE_HEAD + 'approvers = "opz"\n',
        12,
        "unknown approver group 'opz' (did you mean 'ops'?)",
    ),
    ("empty-group", "[approvers]\nops = []\n" + RULE_HEAD + 'approvers = "ops"\n', 2, "is empty"),
    (
        "bad-member",
        '[approvers]\nops = ["alice",\n  "bob smith"]\n',
        3,
        "'bob smith' in group 'ops' is not an approver id",
    ),
    ("member-twice", '[approvers]\nops = ["alice", "alice"]\n', 2, "listed twice"),
    ("group-not-list", '[approvers]\nops = "alice"\n', 2, "must be a list of approver ids"),
    (
        "zero",
        GROUPS + RULE_HEAD + 'approvers = "ops"\napprovals = 0\n',
        13,
        "approvals = 0 can never be met",
    ),
    (
        "too-many",
        GROUPS + RULE_HEAD + 'approvers = "ops"\napprovals = 4\n',
        13,
        "group 'ops' has 3 approvers; give 1 to 3",
    ),
    ("bool", GROUPS + RULE_HEAD + "approvals = true\n", 12, "must be a whole number"),
    ("float", GROUPS + RULE_HEAD + "approvals = 2.0\n", 12, "must be a whole number"),
    ("group-not-string", GROUPS + RULE_HEAD + 'approvers = ["alice"]\n', 12, "names one group"),
    (
        "deny-rule",
        GROUPS + '[[rule]]\nid = "r"\neffect = "deny"\nreason = "no"\napprovers = "ops"\n',
        9,
        'only goes with effect = "require" and obligations = ["explicit_approval"]',
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "phrase"),
    [case[1:] for case in MISTAKES],
    ids=[case[0] for case in MISTAKES],
)
def test_each_mistake_is_reported_with_its_line(
    tmp_path: Path, text: str, line: int, phrase: str
) -> None:
    report = check_policy_file(write(tmp_path, text))
    assert len(report.errors) == 1, [str(error) for error in report.errors]
    (error,) = report.errors
    assert error.line == line and phrase in error.detail, str(error)
    assert report.rules == ()


def test_a_group_two_files_declare_differently_is_refused(tmp_path: Path) -> None:
    first = write(tmp_path, GROUPS + DEPLOY, "a.toml")
    same = write(
        tmp_path, '[policy]\nname = "b"\n' + GROUPS + DEPLOY.replace("prod-deploy", "b"), "b.toml"
    )
    other = write(
        tmp_path,
        '[policy]\nname = "c"\n[approvers]\nops = ["alice", "mallory"]\n'
        + DEPLOY.replace("prod-deploy", "c"),
        "c.toml",
    )
    create_default_policy_decision_point(policy_files=[first, same])  # identical: fine
    with pytest.raises(PolicyFileError, match="approver group 'ops' is also declared in") as why:
        create_default_policy_decision_point(policy_files=[first, other])
    assert why.value.file == str(other) and "a group means the same people" in str(why.value)
