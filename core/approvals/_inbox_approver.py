"""The approver that asks people through the approval inbox, and waits for their answer."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from jevqueue.approvals._inbox import ApprovalInbox, check_expiry, open_inbox
from jevqueue.approvals._inbox_request import (
    DEFAULT_EXPIRY,
    InboxRequest,
    InboxState,
    Requester,
)
from jevqueue.errors import ApprovalDeclinedError, ApprovalExpiredError, ConfigurationError

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Coroutine

    from jevqueue.approvals._record import ApprovalRecord
    from jevqueue.policy._approval_request import ApprovalRequest

__all__ = ["InboxApprover"]

# A store whose clock runs behind ours may still read a request as pending this long
# after its expiry; past it the approver stops waiting all the same.
_CLOCK_GRACE = timedelta(seconds=30)


class InboxApprover:
    """Files each request in the approval inbox and waits until a reviewer decides.

    An :class:`~jevqueue.policy.Approver`: pass it as ``approver=`` to any plugin.

    * **approved** — returns the signed records of the reviewers who approved. They are
      not trusted because they came from the inbox: the PEP verifies each one
      (signature and approver allowlist, digest, freshness, single use).
    * **denied** — raises :class:`~jevqueue.errors.ApprovalDeclinedError` with the
      reviewer's reason; the call is refused.
    * **expired** — nobody decided within ``expires_in``: raises
      :class:`~jevqueue.errors.ApprovalExpiredError`; the guard refuses the call as
      expired, not declined, and audits it so.
    * **interrupted** — a cancelled task (``asyncio`` cancellation), a
      ``KeyboardInterrupt`` or any failure while waiting withdraws the request (it reads
      ``cancelled``), so nobody approves a call that no longer waits.

    Called where an event loop runs (the guard's ``acheck``, an ``async`` framework), it
    returns a coroutine that waits without blocking the loop; elsewhere it blocks the
    calling thread. :meth:`wait` and :meth:`wait_async` choose explicitly.

    Args:
        inbox: an :class:`~jevqueue.approvals.ApprovalInbox`, a SQLite path, a
            ``postgresql://`` URL, or ``None`` for the default SQLite inbox in the state
            directory (:func:`~jevqueue.approvals.default_inbox_path`).
        expires_in: how long reviewers have (default 15 minutes); the agent waits that
            long at most.
        required: how many distinct reviewers must approve (default 1). Each approval
            is a record the PEP checks on its own: until policies name approver groups,
            the PEP accepts the call on one valid record.
        poll_interval: seconds between looks at the inbox (default 0.5).
        framework: the agent framework, shown to reviewers as where the request came from.
        session_id: the framework's run or conversation id, shown to reviewers.

    Raises:
        ConfigurationError: impossible settings, or an inbox that cannot be opened.
    """

    def __init__(
        self,
        inbox: ApprovalInbox | str | os.PathLike[str] | None = None,
        *,
        expires_in: timedelta | float = DEFAULT_EXPIRY,
        required: int = 1,
        poll_interval: float = 0.5,
        framework: str | None = None,
        session_id: str | None = None,
    ) -> None:
        lifetime: Any = expires_in
        if isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool):
            lifetime = timedelta(seconds=expires_in)
        check_expiry(lifetime)
        if not isinstance(poll_interval, (int, float)) or not 0 < poll_interval <= 60:
            raise ConfigurationError("poll_interval must be a number of seconds from 0 to 60")
        self.inbox = open_inbox(inbox)
        self.expires_in: timedelta = lifetime
        self.required = required
        self.poll_interval = float(poll_interval)
        self.framework = framework
        self.session_id = session_id
        self.filed: list[str] = []
        """The ids of the requests this approver filed, oldest first."""

    def __call__(
        self, request: ApprovalRequest
    ) -> tuple[ApprovalRecord, ...] | Coroutine[Any, Any, tuple[ApprovalRecord, ...]]:
        """File ``request`` and wait for its outcome (a coroutine inside an event loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self.wait(request)
        return self.wait_async(request)

    def _file(self, request: ApprovalRequest) -> InboxRequest:
        filed = self.inbox.file(
            request,
            requester=Requester.of(request, framework=self.framework, session_id=self.session_id),
            expires_in=self.expires_in,
            required=self.required,
        )
        self.filed.append(filed.request_id)
        return filed

    def wait(self, request: ApprovalRequest) -> tuple[ApprovalRecord, ...]:
        """File ``request`` and block this thread until it is decided or expires."""
        filed = self._file(request)
        try:
            while True:
                current = self.inbox.get(filed.request_id)
                if current.state is not InboxState.PENDING:
                    break
                if _overdue(current):
                    self._withdraw(filed.request_id)
                    break
                time.sleep(self.poll_interval)
        except BaseException:
            self._withdraw(filed.request_id)
            raise
        return _outcome(current, request, self.expires_in)

    async def wait_async(self, request: ApprovalRequest) -> tuple[ApprovalRecord, ...]:
        """File ``request`` and wait, without blocking the event loop, for its outcome."""
        filed = await asyncio.to_thread(self._file, request)
        try:
            while True:
                current = await asyncio.to_thread(self.inbox.get, filed.request_id)
                if current.state is not InboxState.PENDING:
                    break
                if _overdue(current):
                    self._withdraw(filed.request_id)
                    break
                await asyncio.sleep(self.poll_interval)
        except BaseException:
            self._withdraw(filed.request_id)
            raise
        return _outcome(current, request, self.expires_in)

    def _withdraw(self, request_id: str) -> None:
        # Best effort: the wait is ending with its own error, which must not be masked.
        with contextlib.suppress(Exception):
            self.inbox.cancel(request_id)


def _overdue(current: InboxRequest) -> bool:
    return datetime.now(timezone.utc) >= current.expires_at + _CLOCK_GRACE


def _outcome(
    current: InboxRequest, request: ApprovalRequest, expires_in: timedelta
) -> tuple[ApprovalRecord, ...]:
    """The records of an approved request; the typed refusal of any other outcome."""
    where = f"approval request {current.request_id}"
    if current.state is InboxState.APPROVED:
        return current.records
    if current.state is InboxState.DENIED:
        denial = current.denial
        who, why = (denial.reviewer, denial.reason) if denial else ("a reviewer", "")
        raise ApprovalDeclinedError(f"{who} denied it ({where}): {why}", request.verdict)
    if current.state is InboxState.CANCELLED:
        raise ApprovalDeclinedError(
            f"{where} was withdrawn before anybody approved it", request.verdict
        )
    raise ApprovalExpiredError(
        f"nobody decided within {_duration(expires_in)} ({where} expired); the call was not "
        "approved: ask again, or have a reviewer watch `jevqueue approvals watch`",
        request.verdict,
    )


def _duration(span: timedelta) -> str:
    seconds = span.total_seconds()
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)} min"
    return f"{seconds:g} s"
