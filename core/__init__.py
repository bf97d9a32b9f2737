"""jevqueue governs the tool calls of LLM agents.

Two halves over one framework-agnostic core:

* the governor (:class:`Governor`, package :mod:`jevqueue.governor`) picks, on every turn,
  one of nine paths (:class:`Path`) — above all which one tool the model must call — makes
  the host enforce it and checks that the provider obeyed;
* the policy layer (:class:`PolicyEnforcementPoint`, package :mod:`jevqueue.policy`) judges
  every concrete tool call before it runs, fails closed, and writes a tamper-evident audit
  log (:mod:`jevqueue.audit`); approvals are in :mod:`jevqueue.approvals`.

``__all__`` is what a user of either half needs on day one; everything else lives in its
package. Names are imported on first use, so ``import jevqueue`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jevqueue._lazy import lazy_getattr

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.approvals import ApprovalAuthority, ApprovalRecord, SignedApprovalVerifier
    from jevqueue.audit import SQLiteAuditLog, verify_audit_log
    from jevqueue.errors import (
        ApprovalDeclinedError,
        ConfigurationError,
        JevError,
        PolicyDeniedError,
        ProviderDisobeyedError,
        TurnInterruptedError,
        UnfulfilledObligationError,
        UsageError,
    )
    from jevqueue.governor._ballot import Ballot
    from jevqueue.governor._decision import Decision
    from jevqueue.governor._embedding_ballot import EmbeddingBallot
    from jevqueue.governor._governor import Governor
    from jevqueue.governor._hybrid_ballot import HybridBallot
    from jevqueue.governor._lexical_ballot import LexicalBallot
    from jevqueue.governor._path import Path  # noqa: F401  (resolves; not in __all__)
    from jevqueue.governor._thresholds import Thresholds
    from jevqueue.governor._turn_recorder import TurnRecorder
    from jevqueue.host import Host
    from jevqueue.policy._approval_request import ApprovalRequest, Approver
    from jevqueue.policy._approvers import AuthorityApprover, ConsoleApprover
    from jevqueue.policy._context import ExecutionContext
    from jevqueue.policy._guard import Guard, Judgement
    from jevqueue.policy._pdp import create_default_policy_decision_point
    from jevqueue.policy._pep import PolicyEnforcementPoint
    from jevqueue.policy._registry import ToolSpec, declare_side_effect
    from jevqueue.policy._tools_file import load_tools_file
    from jevqueue.policy._verdict import Verdict, VerdictKind
    from jevqueue.policy_files._shipped import shipped_policy_path

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    # the governor
    "Governor": "jevqueue.governor._governor",
    "Decision": "jevqueue.governor._decision",
    "Path": "jevqueue.governor._path",
    "Ballot": "jevqueue.governor._ballot",
    "LexicalBallot": "jevqueue.governor._lexical_ballot",
    "EmbeddingBallot": "jevqueue.governor._embedding_ballot",
    "HybridBallot": "jevqueue.governor._hybrid_ballot",
    "TurnRecorder": "jevqueue.governor._turn_recorder",
    "Thresholds": "jevqueue.governor._thresholds",
    "Host": "jevqueue.host",
    # the policy layer
    "ExecutionContext": "jevqueue.policy._context",
    "ToolSpec": "jevqueue.policy._registry",
    "declare_side_effect": "jevqueue.policy._registry",
    "shipped_policy_path": "jevqueue.policy_files._shipped",
    "Guard": "jevqueue.policy._guard",
    "Judgement": "jevqueue.policy._guard",
    "ApprovalRequest": "jevqueue.policy._approval_request",
    "Approver": "jevqueue.policy._approval_request",
    "AuthorityApprover": "jevqueue.policy._approvers",
    "ConsoleApprover": "jevqueue.policy._approvers",
    "load_tools_file": "jevqueue.policy._tools_file",
    "PolicyEnforcementPoint": "jevqueue.policy._pep",
    "create_default_policy_decision_point": "jevqueue.policy._pdp",
    "Verdict": "jevqueue.policy._verdict",
    "VerdictKind": "jevqueue.policy._verdict",
    "ApprovalRecord": "jevqueue.approvals",
    "ApprovalAuthority": "jevqueue.approvals",
    "SignedApprovalVerifier": "jevqueue.approvals",
    "SQLiteAuditLog": "jevqueue.audit",
    "verify_audit_log": "jevqueue.audit",
    # errors most callers catch
    "JevError": "jevqueue.errors",
    "UsageError": "jevqueue.errors",
    "ConfigurationError": "jevqueue.errors",
    "ProviderDisobeyedError": "jevqueue.errors",
    "TurnInterruptedError": "jevqueue.errors",
    "PolicyDeniedError": "jevqueue.errors",
    "UnfulfilledObligationError": "jevqueue.errors",
    "ApprovalDeclinedError": "jevqueue.errors",
}

# Names the top level exported before the packages had a home of their own. They still
# resolve, so no import breaks, but they are not advertised: import them from their
# package (the right-hand side, without the private module).
_COMPATIBLE: dict[str, str] = {
    "LOCAL_MODEL_ID": "jevqueue.host",
    "Action": "jevqueue.policy._action",
    "ToolRegistry": "jevqueue.policy._registry",
    "generic_registry": "jevqueue.policy._registry",
    "antigravity_registry": "jevqueue.policy._registry",
    "Rule": "jevqueue.policy._rule",
    "FunctionRule": "jevqueue.policy._rule",
    "PolicyDecisionPoint": "jevqueue.policy._pdp",
    "RuleBasedPolicyDecisionPoint": "jevqueue.policy._pdp",
    "default_rules": "jevqueue.policy._default_rules",
    "canonical_json": "jevqueue.policy._canonical",
    "JevRuntimeError": "jevqueue.errors",
    "ControlSignal": "jevqueue.errors",
    "DecisionError": "jevqueue.errors",
    "ProviderHTTPError": "jevqueue.errors",
    "ToolsFileError": "jevqueue.errors",
}

# ``Path`` (the governor's enum of the nine paths) resolves as ``jevqueue.Path`` but stays
# out of ``__all__``: ``from jevqueue import *`` must not shadow ``pathlib.Path``.
__all__ = [
    "ApprovalAuthority",
    "ApprovalDeclinedError",
    "ApprovalRecord",
    "ApprovalRequest",
    "Approver",
    "AuthorityApprover",
    "Ballot",
    "ConfigurationError",
    "ConsoleApprover",
    "Decision",
    "EmbeddingBallot",
    "ExecutionContext",
    "Governor",
    "Guard",
    "Host",
    "HybridBallot",
    "JevError",
    "Judgement",
    "LexicalBallot",
    "PolicyDeniedError",
    "PolicyEnforcementPoint",
    "ProviderDisobeyedError",
    "SQLiteAuditLog",
    "SignedApprovalVerifier",
    "Thresholds",
    "ToolSpec",
    "TurnInterruptedError",
    "TurnRecorder",
    "UnfulfilledObligationError",
    "UsageError",
    "Verdict",
    "VerdictKind",
    "__version__",
    "create_default_policy_decision_point",
    "declare_side_effect",
    "load_tools_file",
    "shipped_policy_path",
    "verify_audit_log",
]


__getattr__ = lazy_getattr(__name__, {**_EXPORTS, **_COMPATIBLE}, globals())


def __dir__() -> list[str]:
    return sorted({*__all__, "Path"})
