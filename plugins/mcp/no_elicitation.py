"""The denials a call that needs approval gets when nobody can be asked."""

from __future__ import annotations

from jevqueue.plugins.mcp.call_judge import APPROVALS_META_KEY
from jevqueue.policy import Action

__all__ = ["no_authority_message", "no_elicitation_message"]


def _unattended(action: Action) -> str:
    return (
        f"For unattended use, an approver runs `jevqueue approve {action.digest} --key KEY "
        "--approver ID` and the record goes into the proxy's --approvals-dir (the proxy "
        "trusts ID with --approver-key ID=KEY.pub), or the client sends it in the call's "
        f"_meta[{APPROVALS_META_KEY!r}]."
    )


def no_elicitation_message(action: Action) -> str:
    """The denial for a client that declared no elicitation capability."""
    return (
        f"Not run: {action.tool} needs an explicit approval of action {action.digest}, and "
        "this MCP client cannot ask its user (it declared no elicitation capability). Use "
        "a client with elicitation support to approve it interactively. " + _unattended(action)
    )


def no_authority_message(action: Action) -> str:
    """The denial when the proxy has no authority to sign a user's "yes"."""
    return (
        f"Not run: {action.tool} needs an explicit approval of action {action.digest}, and "
        "this proxy has no approval authority to sign an interactive answer (pass "
        "authority=ApprovalAuthority(...) to PolicyProxyServer). " + _unattended(action)
    )
