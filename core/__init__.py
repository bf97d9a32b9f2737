"""jevqueue governs the tool calls of LLM agents.

Two halves over one framework-agnostic core:

* the governor (:class:`Governor`) picks, on every turn, one of nine paths (:class:`Path`) —
  above all which one tool the model must call — makes the host enforce it and checks
  that the provider obeyed;
* the policy layer (:class:`PolicyEnforcementPoint`) judges every concrete tool call before
  it runs, fails closed, and writes a tamper-evident audit log.

Names are imported on first use, so ``import jevqueue`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jevqueue._lazy import lazy_getattr

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.action import Action
    from jevqueue.approvals import ApprovalRecord
    from jevqueue.ballot import Ballot
    from jevqueue.canonical import canonical_json
    from jevqueue.context import ExecutionContext
    from jevqueue.decision import Decision
    from jevqueue.default_rules import default_rules
    from jevqueue.errors import (
        ConfigurationError,
        ControlSignal,
        DecisionError,
        JevError,
        JevRuntimeError,
        PolicyDeniedError,
        ProviderDisobeyedError,
        ProviderHTTPError,
        ToolsFileError,
        TurnInterruptedError,
        UnfulfilledObligationError,
        UsageError,
    )
    from jevqueue.governor import Governor
    from jevqueue.host import LOCAL_MODEL_ID, Host
    from jevqueue.lexical_ballot import LexicalBallot
    from jevqueue.path import Path
    from jevqueue.pdp import (
        PolicyDecisionPoint,
        RuleBasedPolicyDecisionPoint,
        create_default_policy_decision_point,
    )
    from jevqueue.pep import PolicyEnforcementPoint
    from jevqueue.registry import (
        ToolRegistry,
        ToolSpec,
        antigravity_registry,
        declare_side_effect,
        generic_registry,
    )
    from jevqueue.rule import FunctionRule, Rule
    from jevqueue.shipped_policies import shipped_policy_path
    from jevqueue.thresholds import Thresholds
    from jevqueue.tools_file import load_tools_file
    from jevqueue.verdict import Verdict, VerdictKind

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # the governor
    "Governor": "jevqueue.governor",
    "Decision": "jevqueue.decision",
    "Path": "jevqueue.path",
    "Ballot": "jevqueue.ballot",
    "LexicalBallot": "jevqueue.lexical_ballot",
    "Thresholds": "jevqueue.thresholds",
    "Host": "jevqueue.host",
    "LOCAL_MODEL_ID": "jevqueue.host",
    # the policy layer
    "ExecutionContext": "jevqueue.context",
    "PolicyEnforcementPoint": "jevqueue.pep",
    "create_default_policy_decision_point": "jevqueue.pdp",
    "Verdict": "jevqueue.verdict",
    "VerdictKind": "jevqueue.verdict",
    "ApprovalRecord": "jevqueue.approvals",
    "Action": "jevqueue.action",
    "ToolSpec": "jevqueue.registry",
    "ToolRegistry": "jevqueue.registry",
    "load_tools_file": "jevqueue.tools_file",
    "generic_registry": "jevqueue.registry",
    "antigravity_registry": "jevqueue.registry",
    "declare_side_effect": "jevqueue.registry",
    "shipped_policy_path": "jevqueue.shipped_policies",
    "Rule": "jevqueue.rule",
    "FunctionRule": "jevqueue.rule",
    "PolicyDecisionPoint": "jevqueue.pdp",
    "RuleBasedPolicyDecisionPoint": "jevqueue.pdp",
    "default_rules": "jevqueue.default_rules",
    "canonical_json": "jevqueue.canonical",
    # errors most callers catch
    "JevError": "jevqueue.errors",
    "UsageError": "jevqueue.errors",
    "ConfigurationError": "jevqueue.errors",
    "JevRuntimeError": "jevqueue.errors",
    "ControlSignal": "jevqueue.errors",
    "ProviderDisobeyedError": "jevqueue.errors",
    "DecisionError": "jevqueue.errors",
    "TurnInterruptedError": "jevqueue.errors",
    "ProviderHTTPError": "jevqueue.errors",
    "ToolsFileError": "jevqueue.errors",
    "PolicyDeniedError": "jevqueue.errors",
    "UnfulfilledObligationError": "jevqueue.errors",
}

__all__ = [
    "LOCAL_MODEL_ID",
    "Action",
    "ApprovalRecord",
    "Ballot",
    "ConfigurationError",
    "ControlSignal",
    "Decision",
    "DecisionError",
    "ExecutionContext",
    "FunctionRule",
    "Governor",
    "Host",
    "JevError",
    "JevRuntimeError",
    "LexicalBallot",
    "Path",
    "PolicyDecisionPoint",
    "PolicyDeniedError",
    "PolicyEnforcementPoint",
    "ProviderDisobeyedError",
    "ProviderHTTPError",
    "Rule",
    "RuleBasedPolicyDecisionPoint",
    "Thresholds",
    "ToolRegistry",
    "ToolSpec",
    "ToolsFileError",
    "TurnInterruptedError",
    "UnfulfilledObligationError",
    "UsageError",
    "Verdict",
    "VerdictKind",
    "__version__",
    "antigravity_registry",
    "canonical_json",
    "create_default_policy_decision_point",
    "declare_side_effect",
    "default_rules",
    "generic_registry",
    "load_tools_file",
    "shipped_policy_path",
]


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return __all__
