"""The policy layer: every concrete tool call judged before it runs.

A call becomes an :class:`Action` (tool, canonical JSON arguments, resolved targets, the
:class:`ExecutionContext`) against a fail-closed :class:`ToolRegistry` of
:class:`ToolSpec` declarations; the decision point (:class:`RuleBasedPolicyDecisionPoint`,
built by :func:`create_default_policy_decision_point` from :func:`default_rules` and any
policy files) returns a :class:`Verdict`; the :class:`PolicyEnforcementPoint` enforces it,
checks approvals (every :class:`ApprovalQuorum` the verdict names: M of N from a group)
and writes the audit record before the call may run.

The :class:`Guard` is where the policy layer meets a running agent: every plugin's tool-call
half adapts it. It judges a call (:class:`Judgement`: allowed with the arguments to run,
refused with a message, or pending an :class:`ApprovalRequest`), asks the
:class:`Approver`, and runs what was judged once. The approvers that ship:
:class:`AuthorityApprover` (automation), :class:`ConsoleApprover` (a person at the
terminal) and :class:`jevqueue.approvals.InboxApprover` (reviewers anywhere, through the
approval inbox and ``jevqueue approvals``; expiry is refused as expired, not declined).

A plugin in front of someone else's tools (an MCP server) reads each listing into
:class:`ListedTool` entries and holds the server to its declarations with
:class:`ListingPins`: a name listed twice, a tool listed otherwise than declared or changed
since first listed is withdrawn; a call carries only its :func:`declared_arguments`.

Names are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jevqueue._lazy import lazy_getattr

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.policy._action import (
        Action,
        UnresolvablePathError,
        resolve_path,
    )
    from jevqueue.policy._approval_quorum import (
        ApprovalQuorum,
    )
    from jevqueue.policy._approval_request import (
        ApprovalAnswer,
        ApprovalRequest,
        Approver,
        ApproverAnswerError,
        approval_records,
    )
    from jevqueue.policy._approvers import (
        AuthorityApprover,
        ConsoleApprover,
    )
    from jevqueue.policy._canonical import (
        MAX_BYTES,
        MAX_DEPTH,
        MAX_SAFE_INTEGER,
        canonical_arguments,
        canonical_json,
        check_canonical,
        encode_json_string,
        encode_prevalidated,
        encode_prevalidated_text,
    )
    from jevqueue.policy._context import (
        ExecutionContext,
    )
    from jevqueue.policy._default_rules import (
        EXPLICIT_APPROVAL,
        RELAXABLE_RULES,
        CIConfigRule,
        CredentialContentRule,
        DeleteApprovalRule,
        GitInternalsRule,
        HardLinkRule,
        MissingTargetRule,
        PathNormalizationRule,
        PathSpellingRule,
        SecretFileRule,
        ShellApprovalRule,
        ShellWorkingDirectoryRule,
        WorkspaceContainmentRule,
        default_rules,
    )
    from jevqueue.policy._guard import (
        Guard,
        Judgement,
        JudgementKind,
        Outcome,
        refusal_message,
    )
    from jevqueue.policy._listing_pins import (
        ListedTool,
        ListingPins,
        declared_arguments,
    )
    from jevqueue.policy._pdp import (
        PolicyDecisionPoint,
        RuleBasedPolicyDecisionPoint,
        create_default_policy_decision_point,
    )
    from jevqueue.policy._pep import (
        PolicyEnforcementPoint,
        new_decision_id,
    )
    from jevqueue.policy._provenance import (
        Origin,
        Provenance,
        Source,
        Transcript,
    )
    from jevqueue.policy._registry import (
        ACCOUNT_SETTINGS,
        BOOKING,
        BUILTIN_SIDE_EFFECTS,
        CREDENTIAL_CHANGE,
        DATA_DELETE,
        FILE_DELETE,
        FILE_READ,
        FILE_WRITE,
        NETWORK,
        PAYMENT,
        SEND_EMAIL,
        SEND_MESSAGE,
        SHARE,
        SHELL_COMMAND,
        TRUSTED,
        UNTRUSTED,
        ToolRegistry,
        ToolSpec,
        antigravity_registry,
        declare_side_effect,
        generic_registry,
        known_side_effects,
        registry_from_specs,
    )
    from jevqueue.policy._rule import (
        FunctionRule,
        Rule,
    )
    from jevqueue.policy._tools_file import (
        load_tools_file,
    )
    from jevqueue.policy._untrusted_values import (
        UntrustedValues,
    )
    from jevqueue.policy._verdict import (
        Verdict,
        VerdictKind,
    )

_EXPORTS: dict[str, str] = {
    "Action": "jevqueue.policy._action",
    "UnresolvablePathError": "jevqueue.policy._action",
    "resolve_path": "jevqueue.policy._action",
    "MAX_BYTES": "jevqueue.policy._canonical",
    "MAX_DEPTH": "jevqueue.policy._canonical",
    "MAX_SAFE_INTEGER": "jevqueue.policy._canonical",
    "canonical_arguments": "jevqueue.policy._canonical",
    "canonical_json": "jevqueue.policy._canonical",
    "check_canonical": "jevqueue.policy._canonical",
    "encode_json_string": "jevqueue.policy._canonical",
    "encode_prevalidated": "jevqueue.policy._canonical",
    "encode_prevalidated_text": "jevqueue.policy._canonical",
    "ApprovalQuorum": "jevqueue.policy._approval_quorum",
    "ApprovalAnswer": "jevqueue.policy._approval_request",
    "ApprovalRequest": "jevqueue.policy._approval_request",
    "Approver": "jevqueue.policy._approval_request",
    "ApproverAnswerError": "jevqueue.policy._approval_request",
    "approval_records": "jevqueue.policy._approval_request",
    "AuthorityApprover": "jevqueue.policy._approvers",
    "ConsoleApprover": "jevqueue.policy._approvers",
    "ExecutionContext": "jevqueue.policy._context",
    "Guard": "jevqueue.policy._guard",
    "Judgement": "jevqueue.policy._guard",
    "JudgementKind": "jevqueue.policy._guard",
    "Outcome": "jevqueue.policy._guard",
    "refusal_message": "jevqueue.policy._guard",
    "EXPLICIT_APPROVAL": "jevqueue.policy._default_rules",
    "RELAXABLE_RULES": "jevqueue.policy._default_rules",
    "CIConfigRule": "jevqueue.policy._default_rules",
    "CredentialContentRule": "jevqueue.policy._default_rules",
    "DeleteApprovalRule": "jevqueue.policy._default_rules",
    "GitInternalsRule": "jevqueue.policy._default_rules",
    "HardLinkRule": "jevqueue.policy._default_rules",
    "MissingTargetRule": "jevqueue.policy._default_rules",
    "PathNormalizationRule": "jevqueue.policy._default_rules",
    "PathSpellingRule": "jevqueue.policy._default_rules",
    "SecretFileRule": "jevqueue.policy._default_rules",
    "ShellApprovalRule": "jevqueue.policy._default_rules",
    "ShellWorkingDirectoryRule": "jevqueue.policy._default_rules",
    "WorkspaceContainmentRule": "jevqueue.policy._default_rules",
    "default_rules": "jevqueue.policy._default_rules",
    "ListedTool": "jevqueue.policy._listing_pins",
    "ListingPins": "jevqueue.policy._listing_pins",
    "declared_arguments": "jevqueue.policy._listing_pins",
    "PolicyDecisionPoint": "jevqueue.policy._pdp",
    "RuleBasedPolicyDecisionPoint": "jevqueue.policy._pdp",
    "create_default_policy_decision_point": "jevqueue.policy._pdp",
    "PolicyEnforcementPoint": "jevqueue.policy._pep",
    "new_decision_id": "jevqueue.policy._pep",
    "Origin": "jevqueue.policy._provenance",
    "Provenance": "jevqueue.policy._provenance",
    "Source": "jevqueue.policy._provenance",
    "Transcript": "jevqueue.policy._provenance",
    "ACCOUNT_SETTINGS": "jevqueue.policy._registry",
    "BOOKING": "jevqueue.policy._registry",
    "BUILTIN_SIDE_EFFECTS": "jevqueue.policy._registry",
    "CREDENTIAL_CHANGE": "jevqueue.policy._registry",
    "DATA_DELETE": "jevqueue.policy._registry",
    "FILE_DELETE": "jevqueue.policy._registry",
    "FILE_READ": "jevqueue.policy._registry",
    "FILE_WRITE": "jevqueue.policy._registry",
    "NETWORK": "jevqueue.policy._registry",
    "PAYMENT": "jevqueue.policy._registry",
    "SEND_EMAIL": "jevqueue.policy._registry",
    "SEND_MESSAGE": "jevqueue.policy._registry",
    "SHARE": "jevqueue.policy._registry",
    "SHELL_COMMAND": "jevqueue.policy._registry",
    "TRUSTED": "jevqueue.policy._registry",
    "UNTRUSTED": "jevqueue.policy._registry",
    "ToolRegistry": "jevqueue.policy._registry",
    "ToolSpec": "jevqueue.policy._registry",
    "antigravity_registry": "jevqueue.policy._registry",
    "declare_side_effect": "jevqueue.policy._registry",
    "generic_registry": "jevqueue.policy._registry",
    "registry_from_specs": "jevqueue.policy._registry",
    "known_side_effects": "jevqueue.policy._registry",
    "FunctionRule": "jevqueue.policy._rule",
    "Rule": "jevqueue.policy._rule",
    "load_tools_file": "jevqueue.policy._tools_file",
    "UntrustedValues": "jevqueue.policy._untrusted_values",
    "Verdict": "jevqueue.policy._verdict",
    "VerdictKind": "jevqueue.policy._verdict",
}

__all__ = [
    "ACCOUNT_SETTINGS",
    "BOOKING",
    "BUILTIN_SIDE_EFFECTS",
    "CREDENTIAL_CHANGE",
    "DATA_DELETE",
    "EXPLICIT_APPROVAL",
    "FILE_DELETE",
    "FILE_READ",
    "FILE_WRITE",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "NETWORK",
    "PAYMENT",
    "RELAXABLE_RULES",
    "SEND_EMAIL",
    "SEND_MESSAGE",
    "SHARE",
    "SHELL_COMMAND",
    "TRUSTED",
    "UNTRUSTED",
    "Action",
    "ApprovalAnswer",
    "ApprovalQuorum",
    "ApprovalRequest",
    "Approver",
    "ApproverAnswerError",
    "AuthorityApprover",
    "CIConfigRule",
    "ConsoleApprover",
    "CredentialContentRule",
    "DeleteApprovalRule",
    "ExecutionContext",
    "FunctionRule",
    "GitInternalsRule",
    "Guard",
    "HardLinkRule",
    "Judgement",
    "JudgementKind",
    "ListedTool",
    "ListingPins",
    "MissingTargetRule",
    "Origin",
    "Outcome",
    "PathNormalizationRule",
    "PathSpellingRule",
    "PolicyDecisionPoint",
    "PolicyEnforcementPoint",
    "Provenance",
    "Rule",
    "RuleBasedPolicyDecisionPoint",
    "SecretFileRule",
    "ShellApprovalRule",
    "ShellWorkingDirectoryRule",
    "Source",
    "ToolRegistry",
    "ToolSpec",
    "Transcript",
    "UnresolvablePathError",
    "UntrustedValues",
    "Verdict",
    "VerdictKind",
    "WorkspaceContainmentRule",
    "antigravity_registry",
    "approval_records",
    "canonical_arguments",
    "canonical_json",
    "check_canonical",
    "create_default_policy_decision_point",
    "declare_side_effect",
    "declared_arguments",
    "default_rules",
    "encode_json_string",
    "encode_prevalidated",
    "encode_prevalidated_text",
    "generic_registry",
    "known_side_effects",
    "load_tools_file",
    "new_decision_id",
    "refusal_message",
    "registry_from_specs",
    "resolve_path",
]

__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return __all__
