"""``jevqueue serve``: the approval inbox as web pages for reviewers.

One ASGI app (Starlette, Jinja2 templates, served by uvicorn) behind the ``serve`` extra::

    from jevqueue.serve import Reviewers, create_app

    app = create_app("inbox.sqlite3", Reviewers.load("reviewers.toml"))

Reviewers log in with their id and a login token (only its SHA-256 is stored, in the
reviewers file beside the path of each reviewer's Ed25519 key); every form carries a
per-session CSRF token and must come from the server's own origin; an approval is signed
with the logged-in reviewer's key only and recorded through the inbox, which keeps its
rules (expiry, no self-approval, one decision per reviewer, exactly the request's digest).
See docs/serve.md.

Importing this package without the extra raises ``ImportError`` naming
``pip install "jevqueue[serve]"``; the rest of jevqueue never imports it.
"""

from __future__ import annotations

import importlib.util

_MISSING = [
    name
    for name, module in (
        ("starlette", "starlette"),
        ("jinja2", "jinja2"),
        ("python-multipart", "python_multipart"),
    )
    if importlib.util.find_spec(module) is None
    and not (module == "python_multipart" and importlib.util.find_spec("multipart") is not None)
]
if _MISSING:
    raise ImportError(
        f"jevqueue serve needs {', '.join(_MISSING)}, which is not installed: "
        'pip install "jevqueue[serve]"'
    )

from jevqueue.serve._app import create_app  # noqa: E402
from jevqueue.serve._reviewers import Reviewer, Reviewers  # noqa: E402
from jevqueue.serve._sessions import SessionStore  # noqa: E402

__all__ = ["Reviewer", "Reviewers", "SessionStore", "create_app"]
