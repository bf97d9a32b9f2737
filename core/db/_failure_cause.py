"""Why a database call failed, on one line, and what to do when a grant is missing."""

from __future__ import annotations

__all__ = ["failure_cause"]

_INSUFFICIENT_PRIVILEGE = "42501"


def failure_cause(error: BaseException, *, grants: bool = True) -> str:
    """Return ``"Type: message"`` on one line (libpq's messages span several).

    With ``grants``, when the server refused for want of a privilege, say which grants the
    roles of a fleet need.
    """
    text = " ".join(str(error).split()) or "no detail"
    cause = f"{type(error).__name__}: {text}"
    if grants and getattr(error, "sqlstate", None) == _INSUFFICIENT_PRIVILEGE:
        cause += (
            "; the database user lacks a grant: give it exactly the grants docs/deployment.md "
            "lists for its role (a worker: USAGE on the schema, SELECT on its audit and "
            "consumed-approval tables and schema_version, EXECUTE on append_records, "
            "flush_appends, consume_approval, read_approval_requests, file_approval_request "
            "and cancel_approval_request; a reviewer: SELECT on the inbox's tables, EXECUTE "
            "on read_approval_requests and decide_approval_request; the pruning job: "
            "EXECUTE on prune_consumed_approvals and prune_approval_requests; an auditor)"
        )
    return cause
