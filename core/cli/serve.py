"""``jevqueue serve``: the approval inbox as web pages for reviewers."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import NoReturn

import click
from jevqueue.errors import JevError

__all__ = ["REVIEWERS_VARIABLE", "default_reviewers_path", "is_loopback_address", "serve"]

REVIEWERS_VARIABLE = "JEVQUEUE_REVIEWERS"
_INSTALL = 'pip install "jevqueue[serve]"'


def default_reviewers_path() -> Path:
    """``$JEVQUEUE_REVIEWERS``, else ``reviewers.toml`` beside the default inbox."""
    from jevqueue.approvals import default_inbox_path

    named = os.environ.get(REVIEWERS_VARIABLE)
    return Path(named) if named else default_inbox_path().parent / "reviewers.toml"


def is_loopback_address(host: str) -> bool:
    """Whether binding ``host`` serves this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def _fail(message: str) -> NoReturn:
    click.echo(f"Error: {message}", err=True)
    raise SystemExit(2)


@click.command()
@click.option(
    "--inbox",
    "--store",
    "inbox",
    envvar="JEVQUEUE_INBOX",
    default=None,
    help="The inbox: a SQLite path or a postgresql:// URL (default: $JEVQUEUE_INBOX, else "
    "$JEVQUEUE_DATABASE_URL, else the state directory's).",
)
@click.option(
    "--schema",
    default="jevqueue",
    show_default=True,
    help="For a postgresql:// inbox: the schema holding it.",
)
@click.option(
    "--reviewers",
    "reviewers_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The reviewers file (default: $JEVQUEUE_REVIEWERS, else reviewers.toml beside the "
    "default inbox). Make one with `jevqueue reviewers add`.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to bind.")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=8700, show_default=True, help="The port."
)
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Bind an address other machines reach. Put a TLS proxy in front: login tokens and "
    "the pages cross the network.",
)
@click.option(
    "--origin",
    "origins",
    multiple=True,
    help="An origin reviewers' browsers use when it is not the address bound, such as the "
    "TLS proxy's https://inbox.example.com (repeatable).",
)
@click.option(
    "--approval-ttl",
    type=click.IntRange(min=1, max=3600),
    default=300,
    show_default=True,
    help="Seconds each signed approval stays valid.",
)
@click.option(
    "--diff-root",
    "diff_roots",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A folder whose files a request that writes one may be compared with (repeatable). "
    "Without one no file is read: the page shows the content the call writes. Never read: "
    "the reviewers file's folder, the reviewers' keys, the inbox.",
)
def serve(
    inbox: str | None,
    schema: str,
    reviewers_file: Path | None,
    host: str,
    port: int,
    allow_remote: bool,
    origins: tuple[str, ...],
    approval_ttl: int,
    diff_roots: tuple[Path, ...],
) -> None:
    """Serve the approval inbox as web pages: reviewers log in, read, approve and deny.

    Each approval is signed with the logged-in reviewer's own key from the reviewers file.
    The reviewers file is read again when it changes. Binds 127.0.0.1 by default;
    another address needs --allow-remote and a TLS proxy in front. Exit code 2: bad
    settings, an unusable reviewers file or inbox, a missing extra.
    """
    from datetime import timedelta

    loopback = is_loopback_address(host)
    if not loopback and not allow_remote:
        _fail(
            f"--host {host} is reachable from other machines: bind 127.0.0.1 (the default), "
            "or pass --allow-remote and put a TLS proxy in front (login tokens and the "
            "requests would otherwise cross the network in clear text)"
        )
    try:
        import uvicorn
        from jevqueue.serve import Reviewers, create_app
    except ImportError as error:
        _fail(f"jevqueue serve needs its extra ({error}): {_INSTALL}")
    path = reviewers_file if reviewers_file is not None else default_reviewers_path()
    try:
        reviewers = Reviewers.load(path)
        hosts = None
        if loopback:
            hosts = ["127.0.0.1", "localhost", "::1", "[::1]", host.strip().strip("[]")]
        app = create_app(
            inbox,
            reviewers,
            schema=schema,
            origins=origins,
            allowed_hosts=hosts,
            approval_ttl=timedelta(seconds=approval_ttl),
            diff_roots=diff_roots,
        )
    except (JevError, ImportError) as error:
        _fail(str(error))
    where = app.state.inbox_pages.inbox.where  # a URL without its password
    shown_host = f"[{host}]" if ":" in host else host
    click.echo(
        f"jevqueue serve: the approval inbox ({where}) for {len(reviewers)} reviewer(s) "
        f"at http://{shown_host}:{port}/",
        err=True,
    )
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="info",
        server_header=False,
        proxy_headers=True,
        forwarded_allow_ips="127.0.0.1",
    )
