"""``jevqueue approvals``: read and decide the requests in the approval inbox.

Everything printed from the inbox is untrusted text that an agent, or whatever the agent
read, chose: tool names, arguments, reasons, reviewer names, where a request came from.
Text output passes through :func:`_printable` on its way to the terminal, so none of it
can move the cursor, clear the screen or reverse the text around it; ``--json`` output
is exact JSON, which escapes every control character itself.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import sqlite3
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click
from click.core import ParameterSource
from jevqueue.db._connection import DATABASE_URL_VARIABLE, redacted
from jevqueue.errors import (
    ConfigurationError,
    DecisionRefusedError,
    InboxCorruptionError,
    InboxError,
    JevError,
    UnknownRequestError,
)

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.approvals import ApprovalInbox, InboxRequest

__all__ = ["approvals"]

REVIEWER_VARIABLE = "JEVQUEUE_REVIEWER"
INBOX_VARIABLE = "JEVQUEUE_INBOX"


@click.group()
def approvals() -> None:
    """Read and decide the requests agents filed in the approval inbox.

    The inbox is, in this order: --store PATH or --store postgresql://...; else
    $JEVQUEUE_INBOX; else the fleet's database, $JEVQUEUE_DATABASE_URL (as `jevqueue db`
    finds it); else approval-inbox.sqlite3 in the state directory, beside the consumed
    approvals. A SQLite inbox that does not exist is an error, never created: agents
    create it when they file. Exit codes: 0 done, 1 the inbox refused the decision
    (expired or already decided, the requester itself, a second decision, another
    digest), 2 bad input (an unknown id, a prefix matching several ids, an unusable key
    file, a request that is not damaged given to purge) or an inbox that cannot be read.

    A damaged request (one that is not what a store writes) is never read as a decision:
    `list` and `watch` name it on stderr and go on; `purge ID` removes it.
    """


_STORE = click.option(
    "--store",
    envvar=INBOX_VARIABLE,
    default=None,
    help="The inbox: a SQLite path or a postgresql:// URL (default: $JEVQUEUE_INBOX, else "
    "$JEVQUEUE_DATABASE_URL, else the state directory's SQLite file).",
)
_SCHEMA = click.option(
    "--schema",
    default="jevqueue",
    show_default=True,
    help="For a postgresql:// store: the schema holding the inbox.",
)
_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
_REVIEWER = click.option(
    "--reviewer",
    envvar=REVIEWER_VARIABLE,
    default=None,
    help="Your reviewer id, the approver id verifiers trust your key as "
    "(default: $JEVQUEUE_REVIEWER, else your login name).",
)


def _printable(text: str) -> str:
    """``text`` with every character a terminal would not print as itself escaped.

    Controls (C0, DEL, C1: ``\\x1b``, ``\\x9b``, a newline inside a value), format
    characters (the bidirectional overrides and isolates such as ``\\u202e``, zero-width
    characters), separators other than the space, and unassigned or private code points
    are shown as their Python escape, so a reviewer sees that they are there and none of
    them acts on the terminal. Everything else, accented letters and CJK included, is left
    as it is.
    """
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escape(char) for char in text)


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _echo(lines: str | Iterable[str], *, err: bool = False) -> None:
    """Print text lines, each made :func:`_printable`: the one way text reaches the terminal."""
    for line in [lines] if isinstance(lines, str) else lines:
        click.echo(_printable(line), err=err)


def _fail(message: str, code: int) -> NoReturn:
    _echo(f"Error: {message}", err=True)
    raise SystemExit(code)


def _open(store: str | None, schema: str) -> ApprovalInbox:
    """The inbox the options and the environment name (see :func:`approvals`).

    Raises:
        ConfigurationError: a SQLite inbox that does not exist, or is not an inbox; a
            store that cannot be opened.
        ImportError: a PostgreSQL store without the ``postgres`` extra.
    """
    from jevqueue.approvals._inbox import configured_inbox, is_fleet_inbox, open_inbox

    if store:
        source = click.get_current_context().get_parameter_source("store")
        named = f"${INBOX_VARIABLE}" if source is ParameterSource.ENVIRONMENT else "--store"
        target: str | Path = store
    else:
        target, named = configured_inbox()
    if isinstance(target, str) and is_fleet_inbox(target):
        return open_inbox(target, schema=schema)
    return open_inbox(_existing_inbox(Path(target), named), schema=schema)


def _existing_inbox(path: Path, named: str) -> Path:
    """``path`` if it holds an approval inbox; opening a SQLite store creates a missing
    file, and an empty inbox made here would read as "no requests" while the agents file
    theirs elsewhere."""
    elsewhere = (
        f"point at the inbox the agents file into with --store PATH or --store "
        f"postgresql://..., or set ${INBOX_VARIABLE} (a fleet: ${DATABASE_URL_VARIABLE})"
    )
    shown = repr(redacted(str(path)))  # a connection string given as a path keeps no password
    if not path.exists():
        raise ConfigurationError(
            f"no approval inbox at {shown} ({named}): nothing was ever filed there, "
            f"and it is not created by reading it; {elsewhere}"
        )
    if not path.is_file():
        raise ConfigurationError(f"the approval inbox {shown} ({named}) is not a file: {elsewhere}")
    try:
        with _read_only(path) as connection:
            found = connection.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'approval_requests'"
            ).fetchone()
    except sqlite3.Error:
        return path  # opening the store reports what is wrong with the file
    if found is None:
        raise ConfigurationError(
            f"{shown} ({named}) is a SQLite file but not an approval inbox (it holds no "
            f"approval requests table): {elsewhere}"
        )
    return path


@contextmanager
def _read_only(path: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        yield connection
    finally:
        connection.close()


@contextmanager
def _inbox(store: str | None, schema: str) -> Iterator[ApprovalInbox]:
    """The inbox, closed afterwards; every jevqueue error becomes a message and an exit code."""
    # A reader who never chose PostgreSQL learns why the fleet's database was asked.
    fleet = "" if store or not os.environ.get(DATABASE_URL_VARIABLE) else _FLEET_HINT
    try:
        inbox = _open(store, schema)
    except (JevError, ImportError) as error:
        _fail(f"{error}{fleet}", 2)
    try:
        yield inbox
    except DecisionRefusedError as error:
        _fail(str(error), 1)
    except InboxError as error:
        _fail(f"{error}{fleet}", 2)
    except (UnknownRequestError, JevError) as error:
        _fail(str(error), 2)
    finally:
        inbox.close()


_FLEET_HINT = (
    f" (this inbox is the fleet's database, ${DATABASE_URL_VARIABLE}; "
    "--store PATH reads a SQLite inbox instead)"
)


def _reviewer_id(reviewer: str | None) -> str:
    if reviewer:
        return reviewer
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        _fail(f"no reviewer id: pass --reviewer NAME or set ${REVIEWER_VARIABLE}", 2)


# --- reading ------------------------------------------------------------------------------


@approvals.command(name="list")
@click.option("--all", "every", is_flag=True, help="Every request, not only pending ones.")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True)
@_JSON
@_STORE
@_SCHEMA
def list_requests(every: bool, limit: int, as_json: bool, store: str | None, schema: str) -> None:
    """List pending requests, newest first: id, tool, who asked, age, expiry.

    A damaged request among them is left out and named on stderr, with how to remove it.
    """
    with _inbox(store, schema) as inbox:
        listing = inbox.listing(None if every else ("pending",), limit=limit)
        where = inbox.where
    found = list(listing.requests)
    for damaged in listing.damaged:
        _echo(_damaged_line(damaged), err=True)
    if as_json:
        click.echo(json.dumps([request.to_dict() for request in found], indent=2))
        return
    if not found:
        _echo(f"{'no requests' if every else 'no pending requests'} in {where}")
        return
    now = datetime.now(timezone.utc)
    rows = [("ID", "TOOL", "ASKED BY", "AGE", "EXPIRES IN" if not every else "STATE")]
    for request in found:
        last = _until(request.expires_at, now) if not every else _state_of(request, now)
        rows.append(
            (
                request.request_id[:12],
                _printable(request.tool),  # escaped before the columns are measured
                _printable(request.requester.describe()),
                _span((now - request.created_at).total_seconds()),
                last,
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    _echo(
        "  ".join(cell.ljust(widths[n]) for n, cell in enumerate(row[:4])) + "  " + row[4]
        for row in rows
    )


@approvals.command()
@click.argument("request_id")
@_JSON
@_STORE
@_SCHEMA
def show(request_id: str, as_json: bool, store: str | None, schema: str) -> None:
    """Show one request in full: the exact arguments, digest, reasons, provenance, decisions.

    REQUEST_ID is the id `list` shows, or at least its first 4 hex digits.
    """
    with _inbox(store, schema) as inbox:
        request = inbox.find(request_id)
    if as_json:
        click.echo(json.dumps(request.to_dict(), indent=2))
        return
    _echo(_describe(request, datetime.now(timezone.utc)))


# --- deciding -----------------------------------------------------------------------------


@approvals.command(name="approve")
@click.argument("request_id")
@click.option(
    "--key",
    "key_file",
    required=True,
    type=click.Path(dir_okay=False, path_type=str),
    help="Your Ed25519 private key file (from `jevqueue approve keygen`).",
)
@_REVIEWER
@click.option("--reason", default="", help="Why you approve (optional).")
@click.option(
    "--ttl",
    type=click.IntRange(min=1),
    default=300,
    show_default=True,
    help="Seconds the signed approval stays valid (the PEP also refuses it 5 min after issue).",
)
@_STORE
@_SCHEMA
def approve_request(
    request_id: str,
    key_file: str,
    reviewer: str | None,
    reason: str,
    ttl: int,
    store: str | None,
    schema: str,
) -> None:
    """Approve a request: sign an approval of exactly its action digest with your key."""
    from jevqueue.cli.approve import signing_authority

    who = _reviewer_id(reviewer)
    with _inbox(store, schema) as inbox:
        request = inbox.find(request_id)
        authority = signing_authority(key_file, who, ttl)
        decided = inbox.approve(
            request.request_id, authority.issue(request.action_digest), reason=reason
        )
    _echo(_decided(decided, who))


@approvals.command(name="deny")
@click.argument("request_id")
@click.option("--reason", required=True, help="Why: the agent and its user read it.")
@_REVIEWER
@_STORE
@_SCHEMA
def deny_request(
    request_id: str, reason: str, reviewer: str | None, store: str | None, schema: str
) -> None:
    """Deny a request with a reason; the agent's call is refused with it."""
    who = _reviewer_id(reviewer)
    with _inbox(store, schema) as inbox:
        request = inbox.find(request_id)
        decided = inbox.deny(request.request_id, who, reason)
    _echo(_decided(decided, who))


@approvals.command()
@click.option(
    "--interval",
    type=click.FloatRange(min=0.05, max=60),
    default=1.0,
    show_default=True,
    help="Seconds between looks at the inbox.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@_STORE
@_SCHEMA
def watch(interval: float, as_json: bool, store: str | None, schema: str) -> None:
    """Print each new pending request as it arrives, until interrupted (Ctrl-C)."""
    seen: set[str] = set()
    with _inbox(store, schema) as inbox:
        try:
            while True:
                listing = inbox.listing(limit=500)
                for damaged in listing.damaged:
                    if damaged.request_id not in seen:
                        seen.add(damaged.request_id)
                        _echo(_damaged_line(damaged), err=True)
                fresh = [r for r in listing.requests if r.request_id not in seen]
                for request in reversed(fresh):  # oldest first, as they arrived
                    seen.add(request.request_id)
                    _print_line(request, as_json)
                time.sleep(interval)
        except KeyboardInterrupt:
            return


# --- keeping the inbox small -------------------------------------------------------------


@approvals.command()
@click.argument("request_id")
@_STORE
@_SCHEMA
def purge(request_id: str, store: str | None, schema: str) -> None:
    """Remove a damaged request and its decisions (nothing else can be done with one).

    REQUEST_ID is the id `list` names as damaged, or at least its first 4 hex digits. A
    request that reads correctly is refused: deny it, or let it expire and `prune` it.
    """
    with _inbox(store, schema) as inbox:
        try:
            found = inbox.find(request_id)
        except InboxCorruptionError as damaged:
            if not _REQUEST_ID.fullmatch(damaged.request_id):
                raise  # a damaged id cannot be named; its message says what removes it
            inbox.purge(damaged.request_id)
            removed, where = damaged.request_id, inbox.where
        else:
            _fail(
                f"approval request {found.request_id} is not damaged (it is "
                f"{found.state.value}), so it was not removed: deny it, or let it expire; "
                "`jevqueue approvals prune` removes settled requests once they are old",
                2,
            )
    _echo(f"removed the damaged request {removed} and its decisions from {where}")


_REQUEST_ID = re.compile(r"[0-9a-f]{32}")
_AGE = re.compile(r"\s*(\d{1,6})\s*([dh])\s*", re.IGNORECASE)


def _age(context: click.Context, parameter: click.Parameter, value: str) -> timedelta:
    matched = _AGE.fullmatch(value)
    if matched is None:
        raise click.BadParameter(
            f"{value!r} is not an age: give a whole number of days or hours, such as 30d "
            "or 12h (at least 1h)"
        )
    count, unit = int(matched.group(1)), matched.group(2).lower()
    return timedelta(days=count) if unit == "d" else timedelta(hours=count)


@approvals.command()
@click.option(
    "--older-than",
    "older_than",
    required=True,
    callback=_age,
    metavar="AGE",
    help="Remove settled requests filed longer ago than this: days or hours, e.g. 30d, 12h "
    "(at least 1h).",
)
@_STORE
@_SCHEMA
def prune(older_than: timedelta, store: str | None, schema: str) -> None:
    """Delete requests that are no longer pending (approved, denied, cancelled or expired)
    and were filed longer ago than --older-than, with their decisions.

    A request holds the exact arguments of the call it asked about, which may be secret:
    run this on a schedule. A pending request is never deleted, however old.
    """
    with _inbox(store, schema) as inbox:
        removed = inbox.prune(older_than)
        where = inbox.where
    _echo(
        f"removed {removed} request{'' if removed == 1 else 's'} filed more than "
        f"{_age_text(older_than)} ago and no longer pending from {where}"
    )


def _age_text(age: timedelta) -> str:
    hours = int(age.total_seconds()) // 3600
    return f"{hours // 24}d" if hours % 24 == 0 else f"{hours}h"


def _damaged_line(damaged: InboxCorruptionError) -> str:
    return f"Warning: {damaged} (it is left out of this list)"


def _print_line(request: InboxRequest, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(request.to_dict(), separators=(",", ":")))
    else:
        now = datetime.now(timezone.utc)
        _echo(
            f"{request.request_id}  {request.tool}  asked by {request.requester.describe()}  "
            f"expires in {_until(request.expires_at, now)}  {request.action_digest}"
        )
    sys.stdout.flush()  # a reader on a pipe sees each request as it arrives


# --- text -----------------------------------------------------------------------------------


def _span(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


def _until(moment: datetime, now: datetime) -> str:
    left = (moment - now).total_seconds()
    return _span(left) if left > 0 else "expired"


def _state_of(request: InboxRequest, now: datetime) -> str:
    if request.state.value == "pending":
        return f"pending, expires in {_until(request.expires_at, now)}"
    return request.state.value


def _decided(request: InboxRequest, reviewer: str) -> str:
    approvals = len(request.approvals)
    if request.state.value == "pending":
        return (
            f"{reviewer} approved {request.request_id}: {approvals} of {request.required} "
            "approvals; it waits for more"
        )
    return f"{reviewer} decided {request.request_id}: it is {request.state.value}"


def _describe(request: InboxRequest, now: datetime) -> list[str]:
    """The lines of `show`; a value spanning lines (the arguments, the context) is split
    here, so any line break left inside a value is escaped when printed."""
    document = request.request
    asker = request.requester
    lines = [
        f"request   {request.request_id}",
        f"state     {_state_of(request, now)}",
        f"tool      {request.tool}",
        f"digest    {request.action_digest}",
        f"asked by  {asker.describe()}",
        f"filed     {request.created_at.isoformat(timespec='seconds')} "
        f"({_span((now - request.created_at).total_seconds())} ago)",
        f"expires   {request.expires_at.isoformat(timespec='seconds')}",
        f"needs     {request.required} approval(s) from distinct reviewers",
        "reasons:",
        *[f"  - {reason}" for reason in document.get("reasons") or ["(none given)"]],
        "arguments (exactly as judged):",
        *_indented(document.get("arguments")),
        "context:",
        *_indented(document.get("context")),
        *_covered(document.get("digest_document") or {}),
    ]
    provenance = document.get("provenance")
    if provenance:
        lines.append("where the values came from:")
        lines.extend(f"  - {origin.get('says', origin)}" for origin in provenance)
    if asker.call_id or asker.host or asker.process_id is not None:
        lines.append(
            f"call {asker.call_id or '-'} on {asker.host or '-'}, process {asker.process_id}"
        )
    lines.append("decisions:" if request.decisions else "decisions: none yet")
    for decision in request.decisions:
        verb = "approved" if decision.approve else "denied"
        reason = f": {decision.reason}" if decision.reason else ""
        lines.append(
            f"  - {decision.reviewer} {verb} at "
            f"{decision.decided_at.isoformat(timespec='seconds')}{reason}"
        )
    return lines


def _covered(covered: Any) -> list[str]:
    """What the digest covers besides the tool, arguments and context (the stored request
    is read only when the digest recomputed from it matches)."""
    targets = [str(target) for target in covered.get("targets") or []]
    lines = [
        "what the digest covers besides:",
        f"  side effects  {', '.join(map(str, covered.get('side_effects') or [])) or '(none)'}",
    ]
    if "cwd" in covered:
        lines.append(f"  cwd           {covered['cwd'] if covered['cwd'] is not None else '-'}")
    if "origin" in covered:
        lines.append(f"  origin        {json.dumps(covered['origin'], sort_keys=True)}")
    lines.append(f"  targets       {targets[0] if targets else '(none)'}")
    lines.extend(f"                {target}" for target in targets[1:])
    return lines


def _indented(value: Any) -> list[str]:
    text = json.dumps(value, indent=2, sort_keys=True)
    return [f"  {line}" for line in text.splitlines()]
