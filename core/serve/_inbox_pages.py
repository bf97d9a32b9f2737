"""The reviewers' pages: log in, read the pending requests and their history, decide.

========================  =====================================================
``GET  /login``           the login form (reviewer id and login token)
``POST /login``           log in; ``POST /logout`` logs out
``GET  /``                the pending requests, refreshed every few seconds
``GET  /history``         the decided, expired and cancelled ones
``GET  /requests/{id}``   one request: everything a decision rests on
``POST /requests/{id}/approve``  sign with the reviewer's own key and record it
``POST /requests/{id}/deny``     deny with a reason
========================  =====================================================

Every page but the login form needs a login; every post needs the session's CSRF token
(the login form's own, kept nowhere: see :class:`~jevqueue.serve._sessions.LoginForms`)
and the server's own origin. The pending list reloads itself at ``/?auto=1``: such a
reload does not count as the reviewer's use, so an open tab alone lets a session go idle.
The reviewers file is read again when it changes; while it does not load, every page is
refused with what is wrong (503), so nobody logs in or decides on a broken file.

The inbox keeps its rules and its refusals are shown with their message: 404 for an
unknown request, 403 for a decision this reviewer may not make (their own request, or
any other rule about who decides), 409 for one the request's state refuses (already
decided by them, closed, expired, another digest).
"""

from __future__ import annotations

import hmac
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from jevqueue.approvals import ApprovalInbox, InboxRequest, InboxState
from jevqueue.approvals._inbox_request import REQUEST_ID_PATTERN
from jevqueue.errors import (
    ConfigurationError,
    DecisionRefusedError,
    DigestMismatchError,
    DuplicateDecisionError,
    InboxCorruptionError,
    InboxError,
    JevError,
    RequestClosedError,
    SelfApprovalError,
    UnknownRequestError,
    UsageError,
)
from jevqueue.serve._action_diff import ActionDiff, DiffScope, action_diff
from jevqueue.serve._needed_approvals import may_approve, needed_approvals, who_must_approve
from jevqueue.serve._reviewers import Reviewers, ReviewersFile
from jevqueue.serve._sessions import (
    COOKIE_NAME,
    LOGIN_COOKIE_NAME,
    LoginForms,
    Session,
    SessionStore,
    clear_login_cookie,
    clear_session_cookie,
    csrf_matches,
    origin_refusal,
    set_login_cookie,
    set_session_cookie,
)
from jevqueue.serve._templates import hidden_characters
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.templating import Jinja2Templates

__all__ = [
    "DIFF_CACHE_SECONDS",
    "DIFF_CACHE_SIZE",
    "MAX_FORM_BYTES",
    "InboxPages",
    "refusal_status",
]

MAX_FORM_BYTES = 64 * 1024
"""A decision form is a reason and two tokens; anything larger is refused unread."""
DIFF_CACHE_SIZE = 256
"""How many requests' diffs are kept, the least recently shown dropped first."""
DIFF_CACHE_SECONDS = 30.0
"""How long a kept diff is shown before the current file is read again."""

_FINAL_STATES = (
    InboxState.APPROVED,
    InboxState.DENIED,
    InboxState.EXPIRED,
    InboxState.CANCELLED,
)
_WRONG_LOGIN = (
    "unknown reviewer or wrong login token: check both, or ask whoever runs the inbox for "
    "a new token (`jevqueue reviewers add NAME --key KEY --replace`)"
)


class _Refused(Exception):
    """A post refused before anything was decided."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def refusal_status(error: BaseException) -> int:
    """The HTTP status of an error the inbox raised for a request or a decision."""
    if isinstance(error, UnknownRequestError):
        return 404
    if isinstance(error, (DuplicateDecisionError, RequestClosedError, DigestMismatchError)):
        return 409
    if isinstance(error, (SelfApprovalError, DecisionRefusedError)):
        return 403
    if isinstance(error, InboxCorruptionError):
        return 500
    if isinstance(error, InboxError):
        return 503
    if isinstance(error, UsageError):
        return 400
    return 500


class InboxPages:
    """The page handlers over one inbox, one set of reviewers and one session store.

    Args:
        inbox: Where the requests are.
        reviewers: Who may log in, and the key each signs with (read again on change).
        sessions: The logins.
        templates: The pages' templates.
        diff_roots: The folders a file-writing request's target may be read under for its
            diff; none: nothing is read from disk.
        never_read: Files besides the reviewers' folder and keys never read for a diff
            (the inbox's).
        approval_ttl: How long a signed approval stays valid.
        origins: Origins the server is reached at besides the one a request addresses
            (the https origin of a TLS proxy in front of it).
        secure_cookies: Mark the cookie ``Secure``; None: when the request came over https.
        refresh_seconds: How often the pending list reloads itself.
    """

    def __init__(
        self,
        inbox: ApprovalInbox,
        reviewers: Reviewers | ReviewersFile,
        sessions: SessionStore,
        templates: Jinja2Templates,
        *,
        approval_ttl: timedelta,
        origins: Iterable[str] = (),
        secure_cookies: bool | None = None,
        refresh_seconds: int = 10,
        diff_roots: Iterable[str] = (),
        never_read: Iterable[str] = (),
    ) -> None:
        self.inbox = inbox
        self.sessions = sessions
        self.reviewers_file = (
            reviewers
            if isinstance(reviewers, ReviewersFile)
            else ReviewersFile(reviewers, self._end_sessions)
        )
        self.login_forms = LoginForms(sessions.login_form_lifetime, sessions.clock)
        self.diff_roots = tuple(diff_roots)
        self.never_read = tuple(never_read)
        self._diffs: OrderedDict[tuple[str, str], tuple[float, ActionDiff | None]] = OrderedDict()
        self._diffs_lock = threading.Lock()
        self.templates = templates
        self.approval_ttl = approval_ttl
        self.origins = tuple(origins)
        self.secure_cookies = secure_cookies
        self.refresh_seconds = refresh_seconds

    def routes(self) -> list[BaseRoute]:
        """The routes of the pages."""
        return [
            Route("/", self.pending, methods=["GET"], name="pending"),
            Route("/history", self.history, methods=["GET"], name="history"),
            Route("/requests/{request_id}", self.show, methods=["GET"], name="request"),
            Route("/requests/{request_id}/approve", self.approve, methods=["POST"]),
            Route("/requests/{request_id}/deny", self.deny, methods=["POST"]),
            Route("/login", self.login_form, methods=["GET"], name="login"),
            Route("/login", self.login, methods=["POST"]),
            Route("/logout", self.logout, methods=["POST"], name="logout"),
        ]

    # --- reviewers, sessions and rendering ----------------------------------------------

    @property
    def reviewers(self) -> Reviewers:
        """The reviewers now (raises ConfigurationError while their file does not load)."""
        return self.reviewers_file.current()

    def _end_sessions(self, reviewer_ids: list[str]) -> None:
        for reviewer_id in reviewer_ids:
            self.sessions.end_reviewer(reviewer_id)

    def _broken_reviewers(self, request: Request) -> Response | None:
        """The refusal of every page while the reviewers file does not load, else None."""
        try:
            self.reviewers_file.current()
        except ConfigurationError as error:
            return self.render(
                request, "error.html", None, status=503, title="Unavailable", error=str(error)
            )
        return None

    def diff_scope(self) -> DiffScope:
        """Where a diff may read: the roots, never the reviewers' folder, keys or inbox."""
        if not self.diff_roots:
            return DiffScope()
        known = self.reviewers_file.last_loaded
        never = [*self.never_read]
        if known.path is not None:
            never.append(str(known.path.parent))
        never += [str(reviewer.key_path) for reviewer in known.values()]
        return DiffScope.of(self.diff_roots, [Path(p) for p in never])

    def _diff(self, item: InboxRequest) -> ActionDiff | None:
        """The request's diff, computed at most once per request every few seconds."""
        key = (item.request_id, item.action_digest)
        now = time.monotonic()
        with self._diffs_lock:
            kept = self._diffs.get(key)
            if kept is not None and now - kept[0] < DIFF_CACHE_SECONDS:
                self._diffs.move_to_end(key)
                return kept[1]
        diff = action_diff(item.request, self.diff_scope())
        with self._diffs_lock:
            self._diffs[key] = (now, diff)
            self._diffs.move_to_end(key)
            while len(self._diffs) > DIFF_CACHE_SIZE:
                self._diffs.popitem(last=False)
        return diff

    def _secure(self, request: Request) -> bool:
        if self.secure_cookies is not None:
            return self.secure_cookies
        return request.url.scheme == "https"

    def _session(self, request: Request, *, touch: bool = True) -> Session | None:
        return self.sessions.get(request.cookies.get(COOKIE_NAME), touch=touch)

    def _logged_in(self, request: Request, *, touch: bool = True) -> Session | None:
        session = self._session(request, touch=touch)
        if session is None or session.reviewer_id not in self.reviewers:
            return None
        return session

    def render(
        self,
        request: Request,
        name: str,
        session: Session | None,
        *,
        status: int = 200,
        **context: Any,
    ) -> Response:
        """Render template ``name`` with what every page shows."""
        page: dict[str, Any] = {
            "reviewer": session.reviewer_id if session is not None else None,
            "csrf_token": session.csrf_token if session is not None else "",
            "notice": session.take_notice() if session is not None else "",
            "error": "",
            "refresh": None,
            "now": datetime.now(timezone.utc),
        }
        page.update(context)
        return self.templates.TemplateResponse(request, name, page, status_code=status)

    def _error(
        self, request: Request, session: Session | None, status: int, message: str
    ) -> Response:
        return self.render(
            request, "error.html", session, status=status, title="Refused", error=message
        )

    @staticmethod
    def _to_login() -> Response:
        return RedirectResponse("/login", status_code=303)

    async def _checked_form(self, request: Request) -> FormData:
        """The form of a post from this server's own page, or :class:`_Refused`."""
        why = origin_refusal(request, self.origins)
        if why is not None:
            raise _Refused(403, why)
        length = request.headers.get("content-length")
        if length is None or not length.isdigit() or int(length) > MAX_FORM_BYTES:
            raise _Refused(
                413,
                f"the form is missing its length or is larger than {MAX_FORM_BYTES // 1024} "
                "KiB: post it from the inbox's page, with a shorter reason",
            )
        return await request.form(max_files=0, max_fields=16)

    async def _checked_post(self, request: Request) -> tuple[Session, FormData]:
        """The session and form of a post from this server's own page, or :class:`_Refused`."""
        try:
            self.reviewers_file.current()
        except ConfigurationError as error:
            raise _Refused(503, str(error)) from None
        session = self._logged_in(request)
        if session is None:
            why = origin_refusal(request, self.origins)
            raise _Refused(
                403,
                why
                or "your session has ended (logged out, expired, or the server restarted); "
                "nothing was decided: log in again and decide from the request's page",
            )
        form = await self._checked_form(request)
        if not csrf_matches(session, form.get("csrf_token")):
            raise _Refused(
                403,
                "the form does not carry this session's CSRF token (it is from another "
                "session, an old page, or another site); nothing was decided: reload the "
                "page and post the form again",
            )
        return session, form

    # --- pages ----------------------------------------------------------------------------

    async def login_form(self, request: Request) -> Response:
        """The login form; nothing is kept on the server until a login succeeds."""
        broken = self._broken_reviewers(request)
        if broken is not None:
            return broken
        if self._logged_in(request) is not None:
            return RedirectResponse("/", status_code=303)
        return self._login_page(request, status=200, error="")

    def _login_page(self, request: Request, *, status: int, error: str) -> Response:
        nonce, token = self.login_forms.issue()
        response = self.render(
            request,
            "login.html",
            None,
            status=status,
            title="Log in",
            error=error,
            login_csrf=token,
        )
        set_login_cookie(
            response, nonce, secure=self._secure(request), max_age=self.login_forms.lifetime
        )
        return response

    async def login(self, request: Request) -> Response:
        """Log a reviewer in: a new session, the only thing a login keeps on the server."""
        broken = self._broken_reviewers(request)
        if broken is not None:
            return broken
        try:
            form = await self._checked_form(request)
        except _Refused as refused:
            return self._error(request, None, refused.status, refused.message)
        if not self.login_forms.check(
            request.cookies.get(LOGIN_COOKIE_NAME), form.get("csrf_token")
        ):
            return self._login_page(
                request,
                status=403,
                error="the login form expired or was not opened here (or the server "
                "restarted): log in again with this fresh form",
            )
        reviewer_id, token = form.get("reviewer"), form.get("token")
        found = self.reviewers.authenticate(
            reviewer_id.strip() if isinstance(reviewer_id, str) else "",
            token.strip() if isinstance(token, str) else "",
        )
        if found is None:
            return self._login_page(request, status=401, error=_WRONG_LOGIN)
        self.sessions.end(request.cookies.get(COOKIE_NAME))
        fresh = self.sessions.start(found.reviewer_id)
        response = RedirectResponse("/", status_code=303)
        secure = self._secure(request)
        set_session_cookie(response, fresh, secure=secure, max_age=self.sessions.lifetime)
        clear_login_cookie(response, secure=secure)
        return response

    async def logout(self, request: Request) -> Response:
        """End the session; its cookie and its forms are worthless afterwards.

        A session that already ended needs no form: the cookie is cleared and the login
        form shown.
        """
        session = self._session(request)
        if session is None:
            self.sessions.end(request.cookies.get(COOKIE_NAME))
            response = RedirectResponse("/login", status_code=303)
            clear_session_cookie(response, secure=self._secure(request))
            return response
        try:
            form = await self._checked_form(request)
        except _Refused as refused:
            return self._error(request, None, refused.status, refused.message)
        if not csrf_matches(session, form.get("csrf_token")):
            return self._error(
                request,
                None,
                403,
                "the form does not carry this session's CSRF token (it is from another "
                "session, an old page, or another site): reload the page and log out again",
            )
        self.sessions.end(session.session_id)
        response = RedirectResponse("/login", status_code=303)
        clear_session_cookie(response, secure=self._secure(request))
        return response

    async def pending(self, request: Request) -> Response:
        """The pending requests of every agent, newest first.

        ``?auto=1`` marks the page's own reload, which does not count as the reviewer's use.
        """
        broken = self._broken_reviewers(request)
        if broken is not None:
            return broken
        session = self._logged_in(request, touch=request.query_params.get("auto") != "1")
        if session is None:
            return self._to_login()
        try:
            found = await run_in_threadpool(self.inbox.requests, (InboxState.PENDING,), limit=500)
        except JevError as error:
            return self._error(request, session, refusal_status(error), str(error))
        return self.render(
            request,
            "pending.html",
            session,
            title="Pending",
            requests=found,
            refresh=self.refresh_seconds,
        )

    async def history(self, request: Request) -> Response:
        """The decided, expired and cancelled requests, newest first."""
        broken = self._broken_reviewers(request)
        if broken is not None:
            return broken
        session = self._logged_in(request)
        if session is None:
            return self._to_login()
        try:
            found = await run_in_threadpool(self.inbox.requests, _FINAL_STATES, limit=200)
        except JevError as error:
            return self._error(request, session, refusal_status(error), str(error))
        return self.render(request, "history.html", session, title="History", requests=found)

    async def show(self, request: Request) -> Response:
        """One request, in full, with the forms to decide it while it is pending."""
        broken = self._broken_reviewers(request)
        if broken is not None:
            return broken
        session = self._logged_in(request)
        if session is None:
            return self._to_login()
        return await self._request_page(request, session, request.path_params["request_id"])

    async def _request_page(
        self,
        request: Request,
        session: Session,
        request_id: str,
        *,
        status: int = 200,
        error: str = "",
    ) -> Response:
        if not REQUEST_ID_PATTERN.fullmatch(request_id):
            return self._error(
                request,
                session,
                404,
                "no such request: request ids are 32 hex digits; open one from the list",
            )
        try:
            found = await run_in_threadpool(self.inbox.get, request_id)
            diff = await run_in_threadpool(self._diff, found)
        except JevError as failure:
            return self._error(request, session, refusal_status(failure), str(failure))
        decided_by_me = any(d.reviewer == session.reviewer_id for d in found.decisions)
        return self.render(
            request,
            "request.html",
            session,
            status=status,
            error=error,
            title=f"{found.tool} — {found.request_id[:12]}",
            item=found,
            document=found.request,
            covered=found.request.get("digest_document") or {},
            diff=diff,
            hidden_characters=hidden_characters(
                [found.tool, found.request.get("arguments"), covered_of(found)]
            ),
            needed=needed_approvals(found),
            may_decide=found.state is InboxState.PENDING and not decided_by_me,
            decided_by_me=decided_by_me,
            own_request=found.requester.actor_id == session.reviewer_id,
            who_must_approve=who_must_approve(found),
            outside_quorum=may_approve(found, session.reviewer_id or "") is False,
        )

    # --- deciding -----------------------------------------------------------------------

    async def approve(self, request: Request) -> Response:
        """Sign an approval of the request's digest with the reviewer's own key; record it."""
        request_id = request.path_params["request_id"]
        try:
            session, form = await self._checked_post(request)
        except _Refused as refused:
            return self._error(request, None, refused.status, refused.message)
        reviewer = self.reviewers[session.reviewer_id]
        reason, seen = _text(form.get("reason")), _text(form.get("action_digest"))

        def decide() -> InboxRequest:
            current = self.inbox.get(request_id)
            if not hmac.compare_digest(seen.encode(), current.action_digest.encode()):
                raise DigestMismatchError(
                    f"the page you approved from showed another action ({seen or 'no digest'}) "
                    f"than request {request_id} holds ({current.action_digest}); nothing was "
                    "signed: read the request again and decide from its page",
                    request_id=request_id,
                )
            record = reviewer.authority(self.approval_ttl).issue(current.action_digest)
            return self.inbox.approve(current.request_id, record, reason=reason)

        return await self._decide(request, session, request_id, decide)

    async def deny(self, request: Request) -> Response:
        """Deny the request in the reviewer's name, with the reason given."""
        request_id = request.path_params["request_id"]
        try:
            session, form = await self._checked_post(request)
        except _Refused as refused:
            return self._error(request, None, refused.status, refused.message)
        reviewer_id, reason = session.reviewer_id, _text(form.get("reason"))

        def decide() -> InboxRequest:
            return self.inbox.deny(request_id, reviewer_id, reason)

        return await self._decide(request, session, request_id, decide)

    async def _decide(
        self,
        request: Request,
        session: Session,
        request_id: str,
        decide: Callable[[], InboxRequest],
    ) -> Response:
        if not REQUEST_ID_PATTERN.fullmatch(request_id):
            return self._error(
                request, session, 404, "no such request: request ids are 32 hex digits"
            )
        try:
            decided = await run_in_threadpool(decide)
        except UnknownRequestError as error:
            return self._error(request, session, 404, str(error))
        except (DecisionRefusedError, UsageError) as error:
            return await self._request_page(
                request, session, request_id, status=refusal_status(error), error=str(error)
            )
        except JevError as error:
            return self._error(request, session, refusal_status(error), str(error))
        session.notice = _decided(decided, session.reviewer_id)
        return RedirectResponse(f"/requests/{decided.request_id}", status_code=303)


def covered_of(item: InboxRequest) -> Any:
    """What the request's digest covers besides the arguments (targets, cwd, ...)."""
    return item.request.get("digest_document") or {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _decided(request: InboxRequest, reviewer: str) -> str:
    mine = next((d for d in request.decisions if d.reviewer == reviewer), None)
    verb = "denied" if mine is not None and not mine.approve else "approved"
    if request.state is InboxState.PENDING:
        needed = needed_approvals(request)
        return (
            f"You approved this request: {len(request.approvals)} of "
            f"{needed if needed is not None else '?'} approvals; it waits for more."
        )
    return f"You {verb} this request: it is {request.state.value}."
