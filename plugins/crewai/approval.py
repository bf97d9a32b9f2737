"""Approvals for CrewAI tool calls: who says yes to one exact action, and how.

When the policy answers a call with an ``explicit_approval`` obligation, the tool guard
builds an :class:`ApprovalRequest` (the canonical action and its digest) and hands it to
an approval callback. The callback returns the :class:`~jevqueue.approvals.ApprovalRecord`
(s) it obtained for exactly that digest, or ``None``; the guard retries the PEP with them,
and the PEP checks the binding, freshness, signature and single use. A callback never
decides on its own: a record the PEP does not accept authorises nothing.

Two callbacks ship:

* :class:`ConsoleApproval` — the default: asks a person at the terminal, reading stdin only
  when it is a TTY. Without a terminal (a server, CI, a notebook kernel) it refuses with
  a message that says so, so the call is denied rather than hung on ``input()``.
* :class:`AuthorityApproval` — for automation: an approval authority you trust signs the
  requests its predicate accepts.

Any callable ``(ApprovalRequest) -> ApprovalRecord | Iterable[ApprovalRecord] | None``
works. To refuse with a reason, raise
:class:`~jevqueue.errors.ApprovalRequiredError`; its message reaches the agent.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Protocol, Union

from jevqueue.errors import ApprovalRequiredError, ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.approvals import ApprovalAuthority, ApprovalRecord
    from jevqueue.policy import Action, Verdict

__all__ = [
    "ApprovalCallback",
    "ApprovalRequest",
    "AuthorityApproval",
    "ConsoleApproval",
]

ApprovalAnswer = Union["ApprovalRecord", Iterable["ApprovalRecord"], None]


@dataclass(frozen=True)
class ApprovalRequest:
    """One call that needs an explicit approval before it may run.

    Attributes:
        action: The canonical action (tool, arguments, resolved targets, side effects,
            context) the approval must be bound to.
        verdict: The policy's answer: ``ALLOW_WITH_OBLIGATIONS`` with its reasons.
    """

    action: Action
    verdict: Verdict

    @property
    def action_digest(self) -> str:
        """``sha256:<hex>`` of the canonical action: what an approval record must name."""
        return self.action.digest

    @property
    def tool(self) -> str:
        """The tool the call runs."""
        return self.action.tool

    def describe(self) -> str:
        """The action as a person should read it before approving: canonical, complete."""
        document = self.action.digest_document()
        reasons = "; ".join(self.verdict.reasons) or "the policy requires an explicit approval"
        return (
            f"Approval needed for {self.action.tool!r}: {reasons}\n"
            f"action digest: {self.action.digest}\n"
            f"{json.dumps(document, indent=2, sort_keys=True, default=str)}"
        )


class ApprovalCallback(Protocol):
    """Obtain approval records for one request, or refuse.

    Return the record(s) issued for ``request.action_digest``, or ``None`` to refuse. Raise
    :class:`~jevqueue.errors.ApprovalRequiredError` to refuse with a reason the agent sees.
    Any other exception is a refusal too (the guard fails closed).
    """

    def __call__(self, request: ApprovalRequest) -> ApprovalAnswer: ...


class ConsoleApproval:
    """Ask a person at the terminal; refuse, with a clear message, when there is none.

    Args:
        authority: The approval authority that signs a "yes" (the PEP's verifier must
            trust its public key). Without one nothing can be signed and every request
            is refused with a message saying so.
        stdin: Where answers are read (default ``sys.stdin``). It is read only when
            ``isatty()`` is true.
        stdout: Where the request is shown (default ``sys.stderr``, so the agent's own
            output stays clean).
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

    def __call__(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Show ``request`` and read y/N; sign a "yes" with the authority."""
        stdin = self._stdin if self._stdin is not None else sys.stdin
        if stdin is None or not _is_tty(stdin):
            raise ApprovalRequiredError(
                f"{request.tool!r} needs an explicit approval (action "
                f"{request.action_digest}) and no terminal is attached to ask a person: "
                "configure the tool guard with approvals=AuthorityApproval(...) for "
                "automation, or issue an approval with `jevqueue approve` and pass it in",
                request.verdict,
            )
        if self.authority is None:
            raise ApprovalRequiredError(
                f"{request.tool!r} needs an explicit approval (action "
                f"{request.action_digest}) but the console approval has no approval "
                "authority to sign it: pass ConsoleApproval(authority=ApprovalAuthority(key, "
                "approver_id)) with a key the PEP's verifier trusts",
                request.verdict,
            )
        stdout = self._stdout if self._stdout is not None else sys.stderr
        stdout.write(f"\n{request.describe()}\nApprove this exact action? [y/N] ")
        stdout.flush()
        answer = stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            raise ApprovalRequiredError(
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


class AuthorityApproval:
    """Approve automatically with a trusted approval authority, for automation and tests.

    Every request the predicate accepts gets a fresh record signed for exactly its digest;
    the PEP still checks the signature, the binding, freshness and single use.

    Args:
        authority: The approval authority (its public key must be trusted by the PEP's
            approval verifier).
        approve: Which requests to approve (default: all). A request it rejects is
            refused with a message naming the tool and digest.
    """

    def __init__(
        self,
        authority: ApprovalAuthority,
        approve: Callable[[ApprovalRequest], bool] | None = None,
    ) -> None:
        if authority is None or not callable(getattr(authority, "issue", None)):
            raise ConfigurationError(
                "AuthorityApproval needs an approval authority with an issue(action_digest) "
                "method, such as jevqueue.approvals.ApprovalAuthority(private_key, approver_id)"
            )
        self.authority = authority
        self._approve = approve
        self.requests: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> ApprovalAnswer:
        """Sign an approval of ``request.action_digest`` when the predicate accepts it."""
        self.requests.append(request)
        if self._approve is not None and not self._approve(request):
            raise ApprovalRequiredError(
                f"the approval authority's rule declined {request.tool!r} "
                f"(action {request.action_digest})",
                request.verdict,
            )
        return self.authority.issue(request.action_digest)
