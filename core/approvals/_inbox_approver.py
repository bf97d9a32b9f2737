"""The approver that asks people through the approval inbox, and waits for their answer."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import threading
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from jevqueue.approvals._inbox import ApprovalInbox, check_expiry, open_inbox
from jevqueue.approvals._inbox_answer import filed_request, inbox_answer, settled
from jevqueue.approvals._inbox_request import (
    DEFAULT_EXPIRY,
    InboxRequest,
    InboxState,
    Requester,
)
from jevqueue.errors import ApprovalDeclinedError, ConfigurationError

_log = logging.getLogger("jevqueue.approvals")

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable, Coroutine

    from jevqueue.approvals._record import ApprovalRecord
    from jevqueue.policy._approval_request import ApprovalRequest

__all__ = ["InboxApprover"]

# The agent's own deadline, on its monotonic clock from filing: expires_in plus this. The
# store decides expiry by its clock; the grace covers a store whose clock runs behind, and
# the time the request took to reach it. Past it the approver withdraws and stops waiting.
_CLOCK_GRACE = timedelta(seconds=30)

# A paused call's request in these states is never filed again for the same call id.
_REFILED_NEVER = (InboxState.PENDING, InboxState.APPROVED, InboxState.DENIED, InboxState.EXPIRED)


class InboxApprover:
    """Files each request in the approval inbox and waits until a reviewer decides.

    An :class:`~jevqueue.policy.Approver`: pass it as ``approver=`` to any plugin.

    * **approved** — the approvals met every quorum the policy named (who must approve,
      how many, filed with the request): returns the signed records of the reviewers who
      approved. They are not trusted because they came from the inbox: the PEP verifies
      each one (signature and approver allowlist, digest, freshness, not the requester,
      single use) and counts them against the same quorums.
    * **denied** — raises :class:`~jevqueue.errors.ApprovalDeclinedError` with the
      reviewer's reason; the call is refused.
    * **expired** — nobody decided within ``expires_in``: raises
      :class:`~jevqueue.errors.ApprovalExpiredError`; the guard refuses the call as
      expired, not declined, and audits it so.
    * **interrupted** — a cancelled task (``asyncio`` cancellation), a
      ``KeyboardInterrupt`` or any failure while filing or waiting withdraws the request
      (it reads ``cancelled``), so nobody approves a call that no longer waits. The
      approver chooses the request's id before the store is asked, so a request whose
      filing was interrupted is withdrawn too, once it is stored. In an event loop the
      withdrawal runs in a thread, shielded from a second cancellation.

    How long the agent waits is its own: ``expires_in`` plus 30 seconds from filing, on
    its monotonic clock; expiry itself is the store's, by the store's clock.

    Called where an event loop runs (the guard's ``acheck``, an ``async`` framework), it
    returns a coroutine that waits without blocking the loop; elsewhere it blocks the
    calling thread. :meth:`wait` and :meth:`wait_async` choose explicitly.

    Args:
        inbox: an :class:`~jevqueue.approvals.ApprovalInbox`, a SQLite path, a
            ``postgresql://`` URL, or ``None`` for the default SQLite inbox in the state
            directory (:func:`~jevqueue.approvals.default_inbox_path`).
        expires_in: how long reviewers have (default 4 minutes: the PEP's default
            approval freshness less a minute); the agent waits that long at most. A
            :class:`~jevqueue.policy.Guard` refuses an ``expires_in`` that leaves less
            than a minute of its PEP's ``approval_freshness``: early approvals would be
            stale at the end.
        poll_interval: seconds between looks at the inbox (default 0.5).
        framework: the agent framework, shown to reviewers as where the request came from.
        session_id: the framework's run or conversation id, shown to reviewers.
        pause: ``True`` to pause the run instead of waiting, in a framework that pauses
            for approvals (LangGraph, LlamaIndex, Pydantic AI, the OpenAI runner): the
            guard files the request (:meth:`file`) and the run pauses as it does with no
            approver; resume it later, in any process, with :meth:`answer`. In a
            framework that cannot pause, ``pause=True`` changes nothing: the approver
            waits as usual (for the request the guard filed).
        notify: called with each request this approver files, once, as stored — a
            :class:`~jevqueue.approvals.Webhook` posts it to reviewers where they are.
            It must return at once (a webhook delivers in the background); what it
            raises is logged and never stops the request.

    Raises:
        ConfigurationError: impossible settings, or an inbox that cannot be opened.
    """

    def __init__(
        self,
        inbox: ApprovalInbox | str | os.PathLike[str] | None = None,
        *,
        expires_in: timedelta | float = DEFAULT_EXPIRY,
        poll_interval: float = 0.5,
        framework: str | None = None,
        session_id: str | None = None,
        pause: bool = False,
        notify: Callable[[InboxRequest], object] | None = None,
    ) -> None:
        lifetime: Any = expires_in
        if isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool):
            lifetime = timedelta(seconds=expires_in)
        check_expiry(lifetime)
        if not isinstance(poll_interval, (int, float)) or not 0 < poll_interval <= 60:
            raise ConfigurationError("poll_interval must be a number of seconds from 0 to 60")
        # reviewers read both; a value a requester may not hold is refused now, not at filing
        Requester(actor_id="-", framework=framework, session_id=session_id)
        self.inbox = open_inbox(inbox)
        self.expires_in: timedelta = lifetime
        self.poll_interval = float(poll_interval)
        self.framework = framework
        self.session_id = session_id
        if type(pause) is not bool:
            raise ConfigurationError(
                f"pause={pause!r}: give True to pause the run for the inbox's decision, or "
                "False to wait for it"
            )
        if notify is not None and not callable(notify):
            raise ConfigurationError(
                f"notify={notify!r} is not callable: give a jevqueue.approvals.Webhook, or "
                "a function that takes the filed InboxRequest"
            )
        self.notify = notify
        self.pause = pause
        """Whether the guard should pause the run (where the framework can) instead of
        asking this approver to wait."""
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

    def _file(
        self,
        request: ApprovalRequest,
        request_id: str | None = None,
        abandoned: threading.Event | None = None,
    ) -> InboxRequest:
        """File ``request`` under ``request_id`` (default a new id).

        If filing fails or is interrupted, the id chosen is withdrawn, in case the store
        stored it. ``abandoned`` is set by a waiter that stopped waiting while this ran
        in a thread: what was filed is then withdrawn here, after the store answered.
        """
        chosen = request_id if request_id is not None else secrets.token_hex(16)
        try:
            filed = self.inbox.file(
                request,
                requester=Requester.of(
                    request, framework=self.framework, session_id=self.session_id
                ),
                expires_in=self.expires_in,
                request_id=chosen,
            )
        except BaseException:
            self._withdraw(chosen)
            raise
        self.filed.append(filed.request_id)
        if abandoned is not None and abandoned.is_set():
            self._withdraw(filed.request_id)
            return filed
        if self.notify is not None:
            try:
                self.notify(filed)
            except Exception:  # a notification never stops the request it announces
                _log.warning("notifying reviewers of %s failed", filed.request_id, exc_info=True)
        return filed

    def file(self, request: ApprovalRequest) -> InboxRequest:
        """File ``request`` without waiting, for a run that pauses; return it as stored.

        The guard calls this when the approver asks to pause (``pause=True``). A call
        filed before is not filed again, since a framework judges a paused call anew when
        it resumes, in this process or another: the newest request for the same action
        digest and call id is returned as it reads now, unless it was withdrawn. A
        request without a call id reuses only a pending request for the same digest.

        Raises:
            InboxError: the inbox cannot be read or written.
            ConfigurationError: the request cannot be stored.
        """
        return self._file_once(request)

    def _file_once(
        self,
        request: ApprovalRequest,
        request_id: str | None = None,
        abandoned: threading.Event | None = None,
    ) -> InboxRequest:
        earlier = filed_request(
            self.inbox,
            request.action_digest,
            call_id=request.call_id,
            states=_REFILED_NEVER if request.call_id else (InboxState.PENDING,),
        )
        if earlier is None:
            return self._file(request, request_id, abandoned)
        if abandoned is not None and abandoned.is_set():
            self._withdraw(earlier.request_id)
        return earlier

    def answer(self, action_digest: str) -> tuple[ApprovalRecord, ...] | ApprovalDeclinedError:
        """What a paused run resumes with: the decision on the newest request for
        ``action_digest`` (see :func:`~jevqueue.approvals.inbox_answer`).

        Returns:
            The reviewers' signed records when approved; an
            :class:`~jevqueue.errors.ApprovalDeclinedError` with the reviewer's reason
            when denied or withdrawn; an :class:`~jevqueue.errors.ApprovalExpiredError`
            when nobody decided in time.

        Raises:
            UnknownRequestError: no request was filed for ``action_digest``.
            ApprovalPendingError: the request is still pending.
            InboxError: the inbox cannot be read.
        """
        return inbox_answer(self.inbox, action_digest)

    def _filing(
        self,
        request: ApprovalRequest,
        request_id: str | None = None,
        abandoned: threading.Event | None = None,
    ) -> InboxRequest:
        # With pause=True the guard filed the request before asking (in a framework that
        # cannot pause): wait for that one rather than filing it twice.
        if self.pause:
            return self._file_once(request, request_id, abandoned)
        return self._file(request, request_id, abandoned)

    def _deadline(self) -> float:
        """When the agent stops waiting, on its monotonic clock: the store's clock decides
        expiry, and a wall clock that jumps or runs ahead of the store's must not."""
        return time.monotonic() + (self.expires_in + _CLOCK_GRACE).total_seconds()

    def wait(self, request: ApprovalRequest) -> tuple[ApprovalRecord, ...]:
        """File ``request`` and block this thread until it is decided or expires."""
        filed = self._filing(request)  # withdraws what it filed if it is interrupted
        deadline = self._deadline()
        try:
            while True:
                current = self.inbox.get(filed.request_id)
                if current.state is not InboxState.PENDING:
                    break
                if time.monotonic() >= deadline:
                    current = _after_withdrawal(current, self._withdraw(filed.request_id))
                    break
                time.sleep(self.poll_interval)
        except BaseException:
            self._withdraw(filed.request_id)
            raise
        return settled(current, request.verdict)

    async def wait_async(self, request: ApprovalRequest) -> tuple[ApprovalRecord, ...]:
        """File ``request`` and wait, without blocking the event loop, for its outcome."""
        request_id = secrets.token_hex(16)
        abandoned = threading.Event()
        try:
            filed = await asyncio.to_thread(self._filing, request, request_id, abandoned)
        except BaseException:
            # The filing thread may still be running: it withdraws what it files once it
            # sees ``abandoned``; this withdraws what it filed already.
            abandoned.set()
            await self._withdraw_async(request_id)
            raise
        deadline = self._deadline()
        try:
            while True:
                current = await asyncio.to_thread(self.inbox.get, filed.request_id)
                if current.state is not InboxState.PENDING:
                    break
                if time.monotonic() >= deadline:
                    withdrawn = await self._withdraw_async(filed.request_id)
                    current = _after_withdrawal(current, withdrawn)
                    break
                await asyncio.sleep(self.poll_interval)
        except BaseException:
            await self._withdraw_async(filed.request_id)
            raise
        return settled(current, request.verdict)

    def _withdraw(self, request_id: str) -> InboxRequest | None:
        """Cancel ``request_id``; the request as it is now, or None when that failed.

        Best effort: the wait is ending with its own error, which must not be masked (a
        request that was never stored is unknown, which is fine)."""
        try:
            return self.inbox.cancel(request_id)
        except Exception:
            return None

    async def _withdraw_async(self, request_id: str) -> InboxRequest | None:
        # In a thread, so the loop runs on while the store answers; shielded, so a second
        # cancellation of the waiting task does not stop the withdrawal half-way.
        return await asyncio.shield(asyncio.to_thread(self._withdraw, request_id))


def _after_withdrawal(pending: InboxRequest, now: InboxRequest | None) -> InboxRequest:
    """What the agent answers after giving up: a decision that landed before the
    withdrawal stands; anything else reads as the pending request, which settles as
    expired."""
    if now is not None and now.state in (InboxState.APPROVED, InboxState.DENIED):
        return now
    return pending
