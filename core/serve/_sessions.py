"""Logins and CSRF: server-side sessions, the session cookie, and the checks on every post.

A session is a random id in an ``HttpOnly``, ``SameSite=Strict`` cookie (``Secure`` over
https) that names a record kept in memory here: who is logged in (nobody yet for the
login form's own session), the CSRF token every form of the session carries, and when it
expires (an absolute lifetime and an idle limit). Logging in replaces the session with a
new one, so an id known before the login is worthless after it; logging out ends it, so a
form posted with the old cookie is refused. A restart of the server logs everybody out.

A post is accepted only if it carries the session's CSRF token (compared in constant time)
and its ``Origin`` (or, without one, its ``Referer``) is the server's own origin or one of
the origins the server was told it is reached at.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

from jevqueue.errors import ConfigurationError
from starlette.requests import Request
from starlette.responses import Response

__all__ = [
    "COOKIE_NAME",
    "Session",
    "SessionStore",
    "clear_session_cookie",
    "csrf_matches",
    "origin_refusal",
    "set_session_cookie",
]

COOKIE_NAME = "jevqueue_session"


@dataclass
class Session:
    """One browser's session.

    Attributes:
        session_id: The cookie's value.
        reviewer_id: Who is logged in; ``None`` for the session of the login form.
        csrf_token: What every form of this session carries.
        started: When it began (the store's clock, seconds).
        last_seen: When it was last used.
        notice: A line to show on the next page (what the last decision did), then cleared.
    """

    session_id: str
    reviewer_id: str | None
    csrf_token: str
    started: float
    last_seen: float
    notice: str = ""

    def take_notice(self) -> str:
        """The pending notice, cleared."""
        notice, self.notice = self.notice, ""
        return notice


def _positive(value: timedelta, name: str) -> float:
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise ConfigurationError(f"{name} must be a positive timedelta")
    return value.total_seconds()


class SessionStore:
    """The sessions of one server, in memory.

    Args:
        lifetime: How long a login lasts at most.
        idle: How long a login lasts without a request.
        login_form_lifetime: How long the session of a login form lasts before it is used.
        limit: At most this many sessions; beyond it the oldest login forms, then the
            oldest logins, are dropped.
        clock: Seconds from any origin that never go back (``time.monotonic``).

    Raises:
        ConfigurationError: a duration that is not positive, or a limit below 1.
    """

    def __init__(
        self,
        *,
        lifetime: timedelta = timedelta(hours=8),
        idle: timedelta = timedelta(minutes=30),
        login_form_lifetime: timedelta = timedelta(minutes=15),
        limit: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lifetime = _positive(lifetime, "lifetime")
        self.idle = _positive(idle, "idle")
        self.login_form_lifetime = _positive(login_form_lifetime, "login_form_lifetime")
        if type(limit) is not int or limit < 1:
            raise ConfigurationError("limit must be a positive number of sessions")
        self.limit = limit
        self._clock = clock
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}  # by the SHA-256 of the id

    @staticmethod
    def _key(session_id: str) -> str:
        return hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()

    def _expired(self, session: Session, now: float) -> bool:
        if session.reviewer_id is None:
            return now - session.started >= self.login_form_lifetime
        return now - session.started >= self.lifetime or now - session.last_seen >= self.idle

    def start(self, reviewer_id: str | None) -> Session:
        """A new session for ``reviewer_id`` (``None``: the login form's)."""
        now = self._clock()
        session = Session(
            secrets.token_urlsafe(32), reviewer_id, secrets.token_urlsafe(32), now, now
        )
        with self._lock:
            self._sweep(now)
            self._sessions[self._key(session.session_id)] = session
        return session

    def get(self, session_id: str | None) -> Session | None:
        """The live session with ``session_id``, touched; None if unknown or expired."""
        if not session_id:
            return None
        now = self._clock()
        key = self._key(session_id)
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                return None
            if self._expired(session, now):
                del self._sessions[key]
                return None
            session.last_seen = now
            return session

    def end(self, session_id: str | None) -> None:
        """End the session with ``session_id`` (nothing if there is none)."""
        if session_id:
            with self._lock:
                self._sessions.pop(self._key(session_id), None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def _sweep(self, now: float) -> None:
        for key in [k for k, s in self._sessions.items() if self._expired(s, now)]:
            del self._sessions[key]
        excess = len(self._sessions) + 1 - self.limit
        if excess > 0:
            oldest = sorted(
                self._sessions.items(),
                key=lambda kv: (kv[1].reviewer_id is not None, kv[1].started),
            )
            for key, _ in oldest[:excess]:
                del self._sessions[key]


def csrf_matches(session: Session, presented: object) -> bool:
    """Whether ``presented`` is ``session``'s CSRF token (a constant-time comparison)."""
    if not isinstance(presented, str) or not presented:
        return False
    return hmac.compare_digest(presented.encode("utf-8", "replace"), session.csrf_token.encode())


def _origin_of(url: str) -> str | None:
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}".lower()


def origin_refusal(request: Request, origins: Iterable[str] = ()) -> str | None:
    """Why a post does not come from this server's own pages, or None when it does.

    The post's ``Origin`` header — or, without one, its ``Referer``'s origin — must be the
    origin the request was addressed to, or one of ``origins``.
    """
    own = {f"{request.url.scheme}://{request.url.netloc}".lower(), *(o.lower() for o in origins)}
    origin = request.headers.get("origin")
    if origin is not None:
        if origin.strip().lower() in own:
            return None
        return (
            f"the form was posted from {origin!r}, not from this server's own pages: "
            "open the inbox at its own address and post the form from there"
        )
    referer = request.headers.get("referer")
    if referer is not None:
        if _origin_of(referer) in own:
            return None
        return (
            "the form was posted from another site's page: open the inbox at its own address "
            "and post the form from there"
        )
    return (
        "the form was posted without an Origin or Referer header, so nothing shows it came "
        "from this server's pages: post it from the inbox's page in a browser"
    )


def set_session_cookie(
    response: Response, session: Session, *, secure: bool, max_age: float
) -> None:
    """Give the browser ``session``'s cookie: HttpOnly, SameSite=Strict, Secure over https."""
    response.set_cookie(
        COOKIE_NAME,
        session.session_id,
        max_age=max(1, int(max_age)),
        path="/",
        secure=secure,
        httponly=True,
        samesite="strict",
    )


def clear_session_cookie(response: Response, *, secure: bool) -> None:
    """Tell the browser to forget the session cookie."""
    response.delete_cookie(COOKIE_NAME, path="/", secure=secure, httponly=True, samesite="strict")
