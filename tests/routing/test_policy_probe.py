"""risk_stop from the policy layer: a forced call that is certain to be denied is not sent."""

from __future__ import annotations

from typing import Any

import pytest
from jevqueue import (
    ExecutionContext,
    FunctionRule,
    Governor,
    Path,
    PolicyEnforcementPoint,
    RuleBasedPolicyDecisionPoint,
    Thresholds,
    ToolRegistry,
    ToolSpec,
    Verdict,
    create_default_policy_decision_point,
)
from jevqueue.errors import ConfigurationError
from jevqueue.policy import default_rules
from jevqueue.testing import ScriptedHost, tool_call_response

THRESHOLDS = Thresholds(confident=0.6, margin=0.2, floor=0.2)
CONTEXT = ExecutionContext(
    task_id="t-1", actor_id="agent-1", workspace="/tmp/ws", git_sha="abcdef1", environment="prod"
)
TOOLS = [
    {"name": "deploy", "description": "Deploy the service."},
    {
        "name": "read_file",
        "description": "Read a file.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
    {"name": "weather", "description": "The weather."},
]
SPECS = [
    ToolSpec("deploy", side_effects={"network"}),
    ToolSpec("read_file", side_effects={"file_read"}, path_fields=("path",)),
]


class FixedBallot:
    def __init__(self, top: str) -> None:
        self.top = top

    def score(self, messages: Any, tools: Any) -> dict[str, float]:
        return {t["name"]: (0.9 if t["name"] == self.top else 0.1) for t in tools}


def no_prod_network(action: Any) -> Verdict | None:
    if action.context.environment == "prod" and "network" in action.side_effects:
        return Verdict.deny("no network side effects in prod")
    return None


def pep(*extra: Any) -> PolicyEnforcementPoint:
    rules = [*default_rules(), *extra]
    return PolicyEnforcementPoint(RuleBasedPolicyDecisionPoint(rules, registry=ToolRegistry(SPECS)))


def run(top: str, enforcement: PolicyEnforcementPoint, reply: Any = None) -> tuple[Governor, Any]:
    host = ScriptedHost(TOOLS, [{"role": "user", "content": "go"}], [reply] if reply else [])
    governor = Governor(FixedBallot(top), thresholds=THRESHOLDS, pep=enforcement, context=CONTEXT)
    governor.step(host)
    return governor, host


def test_an_unregistered_tool_stops_locally_without_a_provider_call() -> None:
    governor, host = run("weather", pep())
    assert governor.last is not None and governor.last.path is Path.RISK_STOP
    assert governor.last.tool == "weather"
    assert "not registered" in (governor.last.reason or "")
    assert host.provider_calls == 0 and [c.kind for c in host.calls] == ["say"]


def test_a_tool_the_policy_denies_outright_stops_with_the_policys_reason() -> None:
    governor, host = run("deploy", pep(FunctionRule("acme.no_prod_network", no_prod_network)))
    assert governor.last is not None and governor.last.path is Path.RISK_STOP
    assert "no network side effects in prod" in (governor.last.reason or "")
    assert host.provider_calls == 0


def test_a_tool_the_policy_allows_is_forced() -> None:
    reply = tool_call_response(("deploy", {}))
    governor, host = run("deploy", pep(), reply)
    assert governor.last is not None and governor.last.path is Path.TOOL
    assert host.provider_calls == 1


def test_a_denial_that_could_depend_on_the_arguments_is_left_to_the_pep() -> None:
    def deny_reads(action: Any) -> Verdict | None:
        return Verdict.deny("no reads") if "file_read" in action.side_effects else None

    reply = tool_call_response(("read_file", {"path": "a.txt"}))
    governor, _ = run("read_file", pep(FunctionRule("acme.no_reads", deny_reads)), reply)
    assert governor.last is not None and governor.last.path is Path.TOOL


def test_the_probe_writes_no_audit_record() -> None:
    records: list[Any] = []

    class Sink:
        def append(self, event: Any) -> None:
            records.append(event)

    enforcement = PolicyEnforcementPoint(
        RuleBasedPolicyDecisionPoint(
            [*default_rules(), FunctionRule("acme.no_prod_network", no_prod_network)],
            registry=ToolRegistry(SPECS),
        ),
        audit_logger=Sink(),
    )
    run("deploy", enforcement)
    assert records == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"pep": PolicyEnforcementPoint(create_default_policy_decision_point())},
            "has no tool registry",
        ),
        ({"pep": object(), "context": CONTEXT}, "must be a jevqueue.PolicyEnforcementPoint"),
        ({"pep": pep()}, "needs context="),
        ({"pep": pep(), "context": {"task_id": "t"}}, "context is invalid"),
    ],
)
def test_an_incomplete_policy_setting_is_refused(kwargs: dict[str, Any], message: str) -> None:
    kwargs.setdefault("context", None)
    with pytest.raises(ConfigurationError, match=message):
        Governor(**kwargs)
