from __future__ import annotations

import dataclasses

import pytest
from jevqueue.policy import Verdict, VerdictKind


def test_named_constructors() -> None:
    assert Verdict.allow().kind is VerdictKind.ALLOW
    assert Verdict.allow().allowed
    denied = Verdict.deny("no", rule_ids=("r",))
    assert denied.kind is VerdictKind.DENY and denied.denied and not denied.allowed
    assert denied.rule_ids == ("r",)
    obliged = Verdict.allow_with_obligations(["explicit_approval", "explicit_approval"], "why")
    assert obliged.obligations == ("explicit_approval",)
    assert not obliged.allowed
    repaired = Verdict.repair("write_to_file", {"TargetFile": "a.py"}, "fixed")
    assert repaired.repaired == {"tool": "write_to_file", "arguments": {"TargetFile": "a.py"}}
    assert not repaired.allowed


def test_kinds_are_closed() -> None:
    assert {kind.value for kind in VerdictKind} == {
        "ALLOW",
        "DENY",
        "ALLOW_WITH_OBLIGATIONS",
        "REPAIR",
    }
    with pytest.raises(TypeError):
        Verdict("ALLOW", ())  # type: ignore[arg-type]


def test_fields_must_fit_the_kind() -> None:
    with pytest.raises(ValueError):
        Verdict(VerdictKind.ALLOW, (), obligations=("explicit_approval",))
    with pytest.raises(ValueError):
        Verdict(VerdictKind.REPAIR, ())
    with pytest.raises(ValueError):
        Verdict(VerdictKind.DENY, ("x",), repaired={"tool": "t", "arguments": {}})
    with pytest.raises(ValueError):
        Verdict.deny()
    with pytest.raises(ValueError):
        Verdict.allow_with_obligations([])
    with pytest.raises(TypeError):
        Verdict(VerdictKind.DENY, "a reason")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Verdict(VerdictKind.DENY, (1,))  # type: ignore[arg-type]


def test_verdicts_are_frozen_and_repairs_read_only() -> None:
    verdict = Verdict.repair("t", {"a": 1}, "r")
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.kind = VerdictKind.ALLOW  # type: ignore[misc]
    with pytest.raises(TypeError):
        verdict.repaired["tool"] = "other"  # type: ignore[index]


def test_fulfilled_obligations_allow() -> None:
    obliged = Verdict.allow_with_obligations(["explicit_approval"], "why")
    fulfilled = dataclasses.replace(obliged, obligations=())
    assert fulfilled.kind is VerdictKind.ALLOW_WITH_OBLIGATIONS
    assert fulfilled.allowed


def test_as_dict_is_plain_json() -> None:
    verdict = Verdict.repair("t", {"a": 1}, "r", rule_ids=("x",))
    assert verdict.as_dict() == {
        "kind": "REPAIR",
        "reasons": ["r"],
        "obligations": [],
        "repaired": {"tool": "t", "arguments": {"a": 1}},
        "action_digest": "",
        "policy_revision": "",
        "rule_ids": ["x"],
        "quorums": [],
    }
