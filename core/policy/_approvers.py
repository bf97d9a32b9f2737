"""The approvers jevqueue ships: a person at a terminal, and a trusted authority's rule.

Both are :class:`~jevqueue.policy.Approver` s: pass either as ``approver=`` to any plugin.
(Reviewers who are not at the agent's terminal decide through the approval inbox:
:class:`jevqueue.approvals.InboxApprover`.) Neither decides alone: each answers with a
record signed for exactly the request's digest, and the PEP checks it (binding,
freshness, signature, single use).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from jevqueue.errors import ApprovalDeclinedError, ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.approvals import ApprovalAuthority, ApprovalRecord
    from jevqueue.policy._approval_request import ApprovalRequest

__all__ = ["AuthorityApprover", "ConsoleApprover"]


class ConsoleApprover:
    """Ask a person at the terminal; decline, with a clear message, when there is none.

    Args:
        authority: The approval authority that signs a "yes" (the PEP's verifier must
            trust its public key). Without one nothing can be signed and every request
            is declined with a message saying so.
        stdin: Where answers are read (default ``sys.stdin``), only when ``isatty()``.
        stdout: Where the request is shown (default ``sys.stderr``).
    """

    def __init__(
        self,
        authority: ApprovalAuthority | None = None,
        *,
        stdin: IO[str] | None = None,
        stdout: IO[str] | None = None,
    ) -> None:
        self.authority = authority
        self._stdin = stdin
        self._stdout = stdout

    def __call__(self, request: ApprovalRequest) -> ApprovalRecord:
        """Show ``request`` and read y/N; sign a "yes" with the authority."""
        stdin = self._stdin if self._stdin is not None else sys.stdin
        if stdin is None or not _is_tty(stdin):
            raise ApprovalDeclinedError(
                f"{request.tool!r} needs an explicit approval (action "
                f"{request.action_digest}) and no terminal is attached to ask a person: "
                "pass approver=AuthorityApprover(...) for automation, or issue an approval "
                "with `jevqueue approve` and pass it in",
                request.verdict,
            )
        if self.authority is None:
            raise ApprovalDeclinedError(
                f"{request.tool!r} needs an explicit approval (action "
                f"{request.action_digest}) but the console approver has no approval "
                "authority to sign it: pass ConsoleApprover(authority=ApprovalAuthority(key, "
                "approver_id)) with a key the PEP's verifier trusts",
                request.verdict,
            )
        stdout = self._stdout if self._stdout is not None else sys.stderr
        stdout.write(f"\n{request.describe()}\nApprove this exact action? [y/N] ")
        stdout.flush()
        answer = stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            raise ApprovalDeclinedError(
                f"the approver declined {request.tool!r} (action {request.action_digest})",
                request.verdict,
            )
        return self.authority.issue(request.action_digest)


def _is_tty(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except (OSError, ValueError):
        return False


class AuthorityApprover:
    """Approve with a trusted approval authority, for automation and tests.

    Every request the predicate accepts gets a fresh record signed for exactly its digest;
    the PEP still checks the signature, the binding, freshness and single use.

    Args:
        authority: The approval authority (its public key must be trusted by the PEP's
            approval verifier).
        approve: Which requests to approve (default: all). A request it rejects is
            declined with a message naming the tool and digest.

    Attributes:
        requests: Every request this approver was shown, in order.
    """

    def __init__(
        self,
        authority: ApprovalAuthority,
        approve: Callable[[ApprovalRequest], bool] | None = None,
    ) -> None:
        if authority is None or not callable(getattr(authority, "issue", None)):
            raise ConfigurationError(
                "AuthorityApprover needs an approval authority with an issue(action_digest) "
                "method, such as jevqueue.approvals.ApprovalAuthority(private_key, approver_id)"
            )
        self.authority = authority
        self._approve = approve
        self.requests: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> ApprovalRecord:
        """Sign an approval of ``request.action_digest`` when the predicate accepts it."""
        self.requests.append(request)
        if self._approve is not None and not self._approve(request):
            raise ApprovalDeclinedError(
                f"the approval authority's rule declined {request.tool!r} "
                f"(action {request.action_digest})",
                request.verdict,
            )
        return self.authority.issue(request.action_digest)
