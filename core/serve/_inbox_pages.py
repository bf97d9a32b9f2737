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
and the server's own origin. The inbox keeps its rules and its refusals are shown with
their message: 404 for an unknown request, 403 for a decision this reviewer may not make
(their own request, or any other rule about who decides), 409 for one the request's
state refuses (already decided by them, closed, expired, another digest).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta, timezone
from typing import Any

from jevqueue.approvals import ApprovalInbox, InboxRequest, InboxState
from jevqueue.approvals._inbox_request import REQUEST_ID_PATTERN
from jevqueue.errors import (
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
from jevqueue.serve._action_diff import action_diff
from jevqueue.serve._needed_approvals import may_approve, needed_approvals, who_must_approve
from jevqueue.serve._reviewers import Reviewers
from jevqueue.serve._sessions import (
    COOKIE_NAME,
    Session,
    SessionStore,
    clear_session_cookie,
    csrf_matches,
    origin_refusal,
    set_session_cookie,
)
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.templating import Jinja2Templates

__all__ = ["MAX_FORM_BYTES", "InboxPages", "refusal_status"]

MAX_FORM_BYTES = 64 * 1024
"""A decision form is a reason and two tokens; anything larger is refused unread."""

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
        reviewers: Who may log in, and the key each signs with.
        sessions: The logins.
        templates: The pages' templates.
        approval_ttl: How long a signed approval stays valid.
        origins: Origins the server is reached at besides the one a request addresses
            (the https origin of a TLS proxy in front of it).
        secure_cookies: Mark the cookie ``Secure``; None: when the request came over https.
        refresh_seconds: How often the pending list reloads itself.
    """

    def __init__(
        self,
        inbox: ApprovalInbox,
        reviewers: Reviewers,
        sessions: SessionStore,
        templates: Jinja2Templates,
        *,
        approval_ttl: timedelta,
        origins: Iterable[str] = (),
        secure_cookies: bool | None = None,
        refresh_seconds: int = 10,
    ) -> None:
        self.inbox = inbox
        self.reviewers = reviewers
        self.sessions = sessions
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

    # --- sessions and rendering ---------------------------------------------------------

    def _secure(self, request: Request) -> bool:
        if self.secure_cookies is not None:
            return self.secure_cookies
        return request.url.scheme == "https"

    def _session(self, request: Request) -> Session | None:
        return self.sessions.get(request.cookies.get(COOKIE_NAME))

    def _logged_in(self, request: Request) -> Session | None:
        session = self._session(request)
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

    async def _checked_post(
        self, request: Request, *, login: bool = False
    ) -> tuple[Session, FormData]:
        """The session and form of a post from this server's own page, or :class:`_Refused`."""
        why = origin_refusal(request, self.origins)
        if why is not None:
            raise _Refused(403, why)
        session = self._session(request)
        if session is None or (not login and session.reviewer_id not in self.reviewers):
            if login:
                raise _Refused(
                    403, "the login form expired or was not opened here: reload it and log in"
                )
            raise _Refused(
                403,
                "your session has ended (logged out, expired, or the server restarted); "
                "nothing was decided: log in again and decide from the request's page",
            )
        length = request.headers.get("content-length")
        if length is None or not length.isdigit() or int(length) > MAX_FORM_BYTES:
            raise _Refused(
                413,
                f"the form is missing its length or is larger than {MAX_FORM_BYTES // 1024} "
                "KiB: post it from the inbox's page, with a shorter reason",
            )
        form = await request.form(max_files=0, max_fields=16)
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
        """The login form, with a session of its own for its CSRF token."""
        if self._logged_in(request) is not None:
            return RedirectResponse("/", status_code=303)
        return self._login_page(request, status=200, error="")

    def _login_page(self, request: Request, *, status: int, error: str) -> Response:
        session = self._session(request)
        if session is None or session.reviewer_id is not None:
            session = self.sessions.start(None)
        response = self.render(
            request,
            "login.html",
            None,
            status=status,
            title="Log in",
            error=error,
            login_csrf=session.csrf_token,
        )
        set_session_cookie(
            response,
            session,
            secure=self._secure(request),
            max_age=self.sessions.login_form_lifetime,
        )
        return response

    async def login(self, request: Request) -> Response:
        """Log a reviewer in: a new session replaces the login form's."""
        try:
            session, form = await self._checked_post(request, login=True)
        except _Refused as refused:
            return self._error(request, None, refused.status, refused.message)
        reviewer_id, token = form.get("reviewer"), form.get("token")
        found = self.reviewers.authenticate(
            reviewer_id.strip() if isinstance(reviewer_id, str) else "",
            token.strip() if isinstance(token, str) else "",
        )
        if found is None:
            return self._login_page(request, status=401, error=_WRONG_LOGIN)
        self.sessions.end(session.session_id)
        fresh = self.sessions.start(found.reviewer_id)
        response = RedirectResponse("/", status_code=303)
        set_session_cookie(
            response, fresh, secure=self._secure(request), max_age=self.sessions.lifetime
        )
        return response

    async def logout(self, request: Request) -> Response:
        """End the session; its cookie and its forms are worthless afterwards."""
        try:
            session, _ = await self._checked_post(request)
        except _Refused as refused:
            return self._error(request, None, refused.status, refused.message)
        self.sessions.end(session.session_id)
        response = RedirectResponse("/login", status_code=303)
        clear_session_cookie(response, secure=self._secure(request))
        return response

    async def pending(self, request: Request) -> Response:
        """The pending requests of every agent, newest first."""
        session = self._logged_in(request)
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
            diff = await run_in_threadpool(action_diff, found.request)
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
        assert session.reviewer_id is not None  # _checked_post admits logged-in sessions only
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
        assert session.reviewer_id is not None
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
        session.notice = _decided(decided, session.reviewer_id or "")
        return RedirectResponse(f"/requests/{decided.request_id}", status_code=303)


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
