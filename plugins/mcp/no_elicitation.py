"""Why a call that needs approval is declined when nobody can be asked."""

from __future__ import annotations

from jevqueue.policy import ApprovalRequest

__all__ = ["APPROVALS_META_KEY", "no_authority_message", "no_elicitation_message"]

APPROVALS_META_KEY = "jevqueue/approval_records"
"""The ``_meta`` key of a ``tools/call`` under which a client may send signed records."""


def _unattended(request: ApprovalRequest) -> str:
    return (
        f"For unattended use, an approver runs `jevqueue approve {request.action_digest} --key "
        "KEY --approver ID` and the record goes into the proxy's --approvals-dir (the proxy "
        "trusts ID with --approver-key ID=KEY.pub), or the client sends it in the call's "
        f"_meta[{APPROVALS_META_KEY!r}]; an embedding passes PolicyProxyServer(approver=...)."
    )


def no_elicitation_message(request: ApprovalRequest) -> str:
    """The decline for a client that declared no elicitation capability."""
    return (
        f"{request.tool} needs an explicit approval of action {request.action_digest}, and "
        "this MCP client cannot ask its user (it declared no elicitation capability). Use "
        "a client with elicitation support to approve it interactively. " + _unattended(request)
    )


def no_authority_message(request: ApprovalRequest) -> str:
    """The decline when the proxy has no authority to sign a user's "yes"."""
    return (
        f"{request.tool} needs an explicit approval of action {request.action_digest}, and "
        "this proxy has no approval authority to sign an interactive answer (pass "
        "authority=ApprovalAuthority(...) to PolicyProxyServer). " + _unattended(request)
    )
