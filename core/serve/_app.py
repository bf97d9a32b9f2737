"""The ASGI app of ``jevqueue serve``: its routes, its middleware and its security headers.

Everything the server answers is assembled here, in :func:`create_app`: the reviewers'
pages (:class:`~jevqueue.serve._inbox_pages.InboxPages`), the stylesheet, the error pages,
and the headers every response carries. Another group of routes joins the list in
:func:`create_app` and is served under the same headers and hosts.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

from jevqueue.approvals import ApprovalInbox, open_inbox
from jevqueue.errors import ConfigurationError
from jevqueue.serve._inbox_pages import InboxPages
from jevqueue.serve._reviewers import Reviewers
from jevqueue.serve._sessions import SessionStore
from jevqueue.serve._templates import page_templates
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["SECURITY_HEADERS", "SecurityHeaders", "create_app"]

STATIC_DIR = Path(__file__).parent / "static"

SECURITY_HEADERS: dict[str, str] = {
    "content-security-policy": (
        "default-src 'self'; script-src 'none'; object-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    ),
    "x-frame-options": "DENY",
    # Not "no-referrer": under it a browser posts the pages' own forms with "Origin: null",
    # and the origin check could not tell them from a forged post. "same-origin" sends
    # nothing to any other site, which is what "no-referrer" is for here.
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}
"""What every response carries: no script at all, no framing, no caching, no referrer to
other sites."""


class SecurityHeaders:
    """ASGI middleware: set :data:`SECURITY_HEADERS` on every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._headers = [
            (k.encode("latin-1"), v.encode("latin-1")) for k, v in SECURITY_HEADERS.items()
        ]
        self._names = {name for name, _ in self._headers}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() not in self._names
                ]
                message = {**message, "headers": [*kept, *self._headers]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _origin(value: str) -> str:
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
        raise ConfigurationError(
            f"origin {value!r} is not an origin: give scheme://host[:port], such as "
            "https://inbox.example.com (the address reviewers' browsers open)"
        )
    return f"{parts.scheme}://{parts.netloc}".lower()


def _diff_root(value: str | os.PathLike[str]) -> str:
    path = os.path.realpath(os.fspath(value))
    if not os.path.isdir(path):
        raise ConfigurationError(
            f"diff root {os.fspath(value)!r} is not a folder: give the folder the agents write "
            "under (such as the project's checkout), or leave it out to read no file"
        )
    return path


def create_app(
    inbox: ApprovalInbox | str | os.PathLike[str] | None,
    reviewers: Reviewers,
    *,
    schema: str = "jevqueue",
    sessions: SessionStore | None = None,
    approval_ttl: timedelta = timedelta(minutes=5),
    origins: Iterable[str] = (),
    allowed_hosts: Iterable[str] | None = None,
    secure_cookies: bool | None = None,
    refresh_seconds: int = 10,
    diff_roots: Iterable[str | os.PathLike[str]] = (),
) -> Starlette:
    """The ASGI app serving the approval inbox to reviewers.

    Args:
        inbox: An :class:`~jevqueue.approvals.ApprovalInbox`, a SQLite path, a
            ``postgresql://`` URL, or None for the default inbox. One the app opens itself
            it closes when the server shuts down.
        reviewers: Who may log in and decide (:meth:`Reviewers.load`).
        schema: For a ``postgresql://`` URL, the schema holding the inbox.
        sessions: The login sessions (default: 8 hours at most, 30 minutes idle).
        approval_ttl: How long each signed approval stays valid (the PEP also bounds it).
        origins: The origins reviewers' browsers reach the server at when that is not the
            address the server sees (a TLS proxy in front: ``https://inbox.example.com``).
        allowed_hosts: When given, requests whose ``Host`` is none of these are refused
            (DNS rebinding); ``jevqueue serve`` passes the address it binds.
        secure_cookies: Mark the session cookie ``Secure``; None decides per request
            (over https only).
        refresh_seconds: How often the pending list reloads itself (no JavaScript).
        diff_roots: Folders under which a file-writing request's target is read to show a
            diff (``jevqueue serve --diff-root``). None (the default): no file is read, the
            page shows the content the call writes. Never read even under a root: the
            reviewers file's folder, any reviewer's key, the inbox's file.

    Raises:
        ConfigurationError: impossible settings, or an inbox that cannot be opened.
        ImportError: a ``postgresql://`` URL without the ``postgres`` extra.
    """
    if not isinstance(reviewers, Reviewers):
        raise ConfigurationError(
            "create_app() needs the reviewers as Reviewers: Reviewers.load('reviewers.toml')"
        )
    if not isinstance(approval_ttl, timedelta) or approval_ttl <= timedelta(0):
        raise ConfigurationError("approval_ttl must be a positive timedelta")
    if type(refresh_seconds) is not int or not 1 <= refresh_seconds <= 3600:
        raise ConfigurationError("refresh_seconds must be a whole number of seconds, 1 to 3600")
    roots = [_diff_root(root) for root in diff_roots]
    own_inbox = not isinstance(inbox, ApprovalInbox)
    opened = open_inbox(inbox, schema=schema)
    inbox_file = getattr(opened, "path", None)
    never_read = (
        [f"{inbox_file}{suffix}" for suffix in ("", "-wal", "-shm", "-journal")]
        if isinstance(inbox_file, Path)
        else []
    )
    pages = InboxPages(
        opened,
        reviewers,
        sessions if sessions is not None else SessionStore(),
        page_templates(),
        approval_ttl=approval_ttl,
        origins=[_origin(origin) for origin in origins],
        secure_cookies=secure_cookies,
        refresh_seconds=refresh_seconds,
        diff_roots=roots,
        never_read=never_read,
    )

    routes: list[BaseRoute] = [
        *pages.routes(),
        Mount("/static", app=StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    middleware = [Middleware(SecurityHeaders)]
    if allowed_hosts is not None:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)))

    async def http_error(request: Request, error: Exception) -> Response:
        status = error.status_code if isinstance(error, HTTPException) else 500
        message = {
            404: "there is no page here: open the list of pending requests",
            405: "this page does not take that method: use the inbox's links and forms",
        }.get(status, str(getattr(error, "detail", "")) or "the request could not be served")
        return pages.render(
            request, "error.html", None, status=status, title="Not here", error=message
        )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if own_inbox:
                opened.close()

    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={HTTPException: http_error},
        lifespan=lifespan,
    )
    app.state.inbox_pages = pages
    return app
