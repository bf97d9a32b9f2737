"""Logins and CSRF: server-side sessions, the session cookie, and the checks on every post.

A session is a random id in an ``HttpOnly``, ``SameSite=Strict`` cookie (``Secure`` over
https) that names a record kept in memory here: who is logged in, the CSRF token every
form of the session carries, and when it expires (an absolute lifetime and an idle
limit). Only a login makes a session: the login form keeps nothing on the server. Its
CSRF token is an HMAC, under a secret drawn when the server starts, over a random nonce
and an expiry, and the nonce travels in a cookie of its own
(:class:`LoginForms`), so a flood of anonymous visits costs no memory and evicts nobody.
Logging in makes a new session, so an id known before the login is worthless after it;
logging out ends it, so a form posted with the old cookie is refused. A restart of the
server logs everybody out.

The sessions are kept by last use, so the least recently used goes first when the store
is full (constant time), and each reviewer holds a bounded number of them.

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
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

from jevqueue.errors import ConfigurationError
from starlette.requests import Request
from starlette.responses import Response

__all__ = [
    "COOKIE_NAME",
    "LOGIN_COOKIE_NAME",
    "LoginForms",
    "Session",
    "SessionStore",
    "clear_login_cookie",
    "clear_session_cookie",
    "csrf_matches",
    "origin_refusal",
    "set_login_cookie",
    "set_session_cookie",
]

COOKIE_NAME = "jevqueue_session"
LOGIN_COOKIE_NAME = "jevqueue_login"


@dataclass
class Session:
    """One reviewer's session in one browser.

    Attributes:
        session_id: The cookie's value.
        reviewer_id: Who is logged in.
        csrf_token: What every form of this session carries.
        started: When it began (the store's clock, seconds).
        last_seen: When a reviewer last used it (automatic reloads do not count).
        notice: A line to show on the next page (what the last decision did), then cleared.
    """

    session_id: str
    reviewer_id: str
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


def _count(value: int, name: str) -> int:
    if type(value) is not int or value < 1:
        raise ConfigurationError(f"{name} must be a positive number of sessions")
    return value


class SessionStore:
    """The sessions of one server, in memory.

    Args:
        lifetime: How long a login lasts at most.
        idle: How long a login lasts without a reviewer's request.
        login_form_lifetime: How long a login form may be posted after it was shown.
        limit: At most this many sessions; beyond it the least recently used is dropped.
        per_reviewer: At most this many sessions of one reviewer; beyond it their least
            recently used is dropped.
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
        per_reviewer: int = 16,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lifetime = _positive(lifetime, "lifetime")
        self.idle = _positive(idle, "idle")
        self.login_form_lifetime = _positive(login_form_lifetime, "login_form_lifetime")
        self.limit = _count(limit, "limit")
        self.per_reviewer = _count(per_reviewer, "per_reviewer")
        self.clock = clock
        self._lock = threading.Lock()
        # by the SHA-256 of the id, least recently used first
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        # each reviewer's keys, least recently used first
        self._by_reviewer: dict[str, OrderedDict[str, None]] = {}

    @staticmethod
    def _key(session_id: str) -> str:
        return hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()

    def _expired(self, session: Session, now: float) -> bool:
        return now - session.started >= self.lifetime or now - session.last_seen >= self.idle

    def start(self, reviewer_id: str) -> Session:
        """A new session for ``reviewer_id``."""
        if not isinstance(reviewer_id, str) or not reviewer_id:
            raise ConfigurationError("a session is for a logged-in reviewer: name them")
        now = self.clock()
        session = Session(
            secrets.token_urlsafe(32), reviewer_id, secrets.token_urlsafe(32), now, now
        )
        key = self._key(session.session_id)
        with self._lock:
            self._sweep(now)
            mine = self._by_reviewer.setdefault(reviewer_id, OrderedDict())
            while len(mine) >= self.per_reviewer:
                self._drop(next(iter(mine)))
            while len(self._sessions) >= self.limit:
                self._drop(next(iter(self._sessions)))
            self._sessions[key] = session
            self._by_reviewer.setdefault(reviewer_id, OrderedDict())[key] = None
        return session

    def get(self, session_id: str | None, *, touch: bool = True) -> Session | None:
        """The live session with ``session_id``; None if unknown or expired.

        ``touch``: count this as the reviewer's use (False for an automatic reload, so that
        an open tab alone never keeps a session from going idle).
        """
        if not session_id:
            return None
        now = self.clock()
        key = self._key(session_id)
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                return None
            if self._expired(session, now):
                self._drop(key)
                return None
            if touch:
                session.last_seen = now
                self._sessions.move_to_end(key)
                self._by_reviewer[session.reviewer_id].move_to_end(key)
            return session

    def end(self, session_id: str | None) -> None:
        """End the session with ``session_id`` (nothing if there is none)."""
        if session_id:
            with self._lock:
                self._drop(self._key(session_id))

    def end_reviewer(self, reviewer_id: str) -> int:
        """End every session of ``reviewer_id``; how many there were."""
        with self._lock:
            keys = list(self._by_reviewer.get(reviewer_id, ()))
            for key in keys:
                self._drop(key)
            return len(keys)

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def _drop(self, key: str) -> None:
        session = self._sessions.pop(key, None)
        if session is None:
            return
        mine = self._by_reviewer.get(session.reviewer_id)
        if mine is not None:
            mine.pop(key, None)
            if not mine:
                del self._by_reviewer[session.reviewer_id]

    def _sweep(self, now: float) -> None:
        # the least recently used come first: drop them while they are idle too long
        while self._sessions:
            key, oldest = next(iter(self._sessions.items()))
            if not self._expired(oldest, now):
                return
            self._drop(key)


class LoginForms:
    """The login form's CSRF tokens, kept nowhere: an HMAC over a nonce and an expiry.

    :meth:`issue` gives a nonce (for the login cookie) and the form's token; :meth:`check`
    accepts the pair until the expiry. The secret is drawn when the server starts, so a
    restart makes every open login form stale (reloading it gives a fresh one).

    Args:
        lifetime: Seconds a login form may be posted after it was shown.
        clock: The session store's clock.
    """

    def __init__(self, lifetime: float, clock: Callable[[], float]) -> None:
        self.lifetime = lifetime
        self._clock = clock
        self._secret = secrets.token_bytes(32)

    def _mac(self, nonce: str, expires: int) -> str:
        message = f"jevqueue login form|{nonce}|{expires}".encode("utf-8", "replace")
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def issue(self) -> tuple[str, str]:
        """A fresh ``(nonce, token)``: the nonce goes in the login cookie, the token in the form."""
        nonce = secrets.token_urlsafe(24)
        expires = int(self._clock() + self.lifetime) + 1
        return nonce, f"{expires}.{self._mac(nonce, expires)}"

    def check(self, nonce: object, token: object) -> bool:
        """Whether ``token`` was issued with ``nonce`` by this server and has not expired."""
        if not isinstance(nonce, str) or not nonce or not isinstance(token, str):
            return False
        expires_text, _, mac = token.partition(".")
        if not expires_text.isdigit() or len(expires_text) > 20:
            return False
        expires = int(expires_text)
        good = hmac.compare_digest(
            mac.encode("utf-8", "replace"), self._mac(nonce, expires).encode()
        )
        return good and self._clock() < expires


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


def set_login_cookie(response: Response, nonce: str, *, secure: bool, max_age: float) -> None:
    """Give the browser the login form's nonce: HttpOnly, SameSite=Strict, for /login only."""
    response.set_cookie(
        LOGIN_COOKIE_NAME,
        nonce,
        max_age=max(1, int(max_age)),
        path="/login",
        secure=secure,
        httponly=True,
        samesite="strict",
    )


def clear_login_cookie(response: Response, *, secure: bool) -> None:
    """Tell the browser to forget the login form's nonce."""
    response.delete_cookie(
        LOGIN_COOKIE_NAME, path="/login", secure=secure, httponly=True, samesite="strict"
    )
