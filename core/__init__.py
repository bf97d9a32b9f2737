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
    from jevqueue.approvals import ApprovalRecord
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
    from jevqueue.governor._ballot import Ballot
    from jevqueue.governor._decision import Decision
    from jevqueue.governor._governor import Governor
    from jevqueue.governor._lexical_ballot import LexicalBallot
    from jevqueue.governor._path import Path
    from jevqueue.governor._thresholds import Thresholds
    from jevqueue.host import LOCAL_MODEL_ID, Host
    from jevqueue.policy._action import Action
    from jevqueue.policy._canonical import canonical_json
    from jevqueue.policy._context import ExecutionContext
    from jevqueue.policy._default_rules import default_rules
    from jevqueue.policy._pdp import (
        PolicyDecisionPoint,
        RuleBasedPolicyDecisionPoint,
        create_default_policy_decision_point,
    )
    from jevqueue.policy._pep import PolicyEnforcementPoint
    from jevqueue.policy._registry import (
        ToolRegistry,
        ToolSpec,
        antigravity_registry,
        generic_registry,
    )
    from jevqueue.policy._rule import FunctionRule, Rule
    from jevqueue.policy._tools_file import load_tools_file
    from jevqueue.policy._verdict import Verdict, VerdictKind

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # the governor
    "Governor": "jevqueue.governor._governor",
    "Decision": "jevqueue.governor._decision",
    "Path": "jevqueue.governor._path",
    "Ballot": "jevqueue.governor._ballot",
    "LexicalBallot": "jevqueue.governor._lexical_ballot",
    "Thresholds": "jevqueue.governor._thresholds",
    "Host": "jevqueue.host",
    "LOCAL_MODEL_ID": "jevqueue.host",
    # the policy layer
    "ExecutionContext": "jevqueue.policy._context",
    "PolicyEnforcementPoint": "jevqueue.policy._pep",
    "create_default_policy_decision_point": "jevqueue.policy._pdp",
    "Verdict": "jevqueue.policy._verdict",
    "VerdictKind": "jevqueue.policy._verdict",
    "ApprovalRecord": "jevqueue.approvals",
    "Action": "jevqueue.policy._action",
    "ToolSpec": "jevqueue.policy._registry",
    "ToolRegistry": "jevqueue.policy._registry",
    "load_tools_file": "jevqueue.policy._tools_file",
    "generic_registry": "jevqueue.policy._registry",
    "antigravity_registry": "jevqueue.policy._registry",
    "Rule": "jevqueue.policy._rule",
    "FunctionRule": "jevqueue.policy._rule",
    "PolicyDecisionPoint": "jevqueue.policy._pdp",
    "RuleBasedPolicyDecisionPoint": "jevqueue.policy._pdp",
    "default_rules": "jevqueue.policy._default_rules",
    "canonical_json": "jevqueue.policy._canonical",
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
    "default_rules",
    "generic_registry",
    "load_tools_file",
]


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return __all__
