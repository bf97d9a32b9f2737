"""``jevqueue reviewers``: who may log in to ``jevqueue serve``, and with which key."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import click
from jevqueue.errors import JevError

__all__ = ["reviewers"]


def _fail(message: str) -> NoReturn:
    click.echo(f"Error: {message}", err=True)
    raise SystemExit(2)


_FILE = click.option(
    "--file",
    "reviewers_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The reviewers file (default: $JEVQUEUE_REVIEWERS, else reviewers.toml beside the "
    "default inbox).",
)


def _path(reviewers_file: Path | None) -> Path:
    from jevqueue.cli.serve import default_reviewers_path

    return reviewers_file if reviewers_file is not None else default_reviewers_path()


@click.group()
def reviewers() -> None:
    """Manage the reviewers file of `jevqueue serve`: ids, login tokens, signing keys.

    The file stores, for each reviewer, the approver id the agents' verifier trusts their
    key as, the SHA-256 of their login token (the token itself is printed once), and the
    path of their Ed25519 private key (relative paths are relative to the file).
    """


@reviewers.command()
@click.argument("reviewer_id")
@click.option(
    "--key",
    "key_file",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The reviewer's Ed25519 private key (from `jevqueue approve keygen`).",
)
@_FILE
@click.option(
    "--replace", is_flag=True, help="Give an existing reviewer a new token (and this key)."
)
def add(reviewer_id: str, key_file: Path, reviewers_file: Path | None, replace: bool) -> None:
    """Add REVIEWER_ID with a new login token, printed once; only its hash is stored."""
    try:
        from jevqueue.serve._reviewers import (
            Reviewers,
            hash_token,
            new_login_token,
            render_reviewers_file,
            write_reviewers_file,
        )
    except ImportError as error:
        _fail(str(error))
    from jevqueue.approvals import load_private_key
    from jevqueue.approvals._record import IDENTIFIER_PATTERN

    if not IDENTIFIER_PATTERN.fullmatch(reviewer_id):
        _fail(
            f"{reviewer_id!r} is not a reviewer id: 1-128 letters, digits and '._:@+-', the "
            "approver id the agents' verifier trusts the key as"
        )
    path = _path(reviewers_file)
    try:
        load_private_key(key_file)
        entries = (
            [(r.reviewer_id, r.token_sha256, r.key_file) for r in Reviewers.load(path).values()]
            if path.exists()
            else []
        )
    except JevError as error:
        _fail(str(error))
    if any(entry[0] == reviewer_id for entry in entries) and not replace:
        _fail(
            f"reviewer {reviewer_id} is already in {path}: pass --replace to give them a new "
            "token (the old one stops working), or choose another id"
        )
    token = new_login_token()
    entry = (reviewer_id, hash_token(token), _key_as_written(key_file, path))
    kept = [e for e in entries if e[0] != reviewer_id]
    try:
        write_reviewers_file(path, render_reviewers_file([*kept, entry]))
    except JevError as error:
        _fail(str(error))
    click.echo(f"reviewer {reviewer_id} is in {path}, signing with {key_file}", err=True)
    click.echo(
        "login token (shown once, only its SHA-256 is stored; hand it over privately):", err=True
    )
    click.echo(token)


def _key_as_written(key_file: Path, reviewers_path: Path) -> str:
    """The key's path relative to the reviewers file's folder when it lies under it."""
    key = Path(os.path.abspath(key_file))
    folder = Path(os.path.abspath(reviewers_path)).parent
    try:
        return key.relative_to(folder).as_posix()
    except ValueError:
        return str(key)


@reviewers.command()
@click.argument("reviewer_id")
@_FILE
def remove(reviewer_id: str, reviewers_file: Path | None) -> None:
    """Remove REVIEWER_ID: their login token stops working and a running server ends
    their sessions within a second or so."""
    try:
        from jevqueue.serve._reviewers import (
            entries_of_file,
            render_reviewers_file,
            write_reviewers_file,
        )
    except ImportError as error:
        _fail(str(error))
    path = _path(reviewers_file)
    try:
        entries = entries_of_file(path)
    except JevError as error:
        _fail(str(error))
    kept = [entry for entry in entries if entry[0] != reviewer_id]
    if len(kept) == len(entries):
        known = ", ".join(entry[0] for entry in entries) or "nobody"
        _fail(
            f"reviewer {reviewer_id} is not in {path} (it lists {known}): check the id and "
            "the --file"
        )
    try:
        write_reviewers_file(path, render_reviewers_file(kept))
    except JevError as error:
        _fail(str(error))
    click.echo(f"reviewer {reviewer_id} is removed from {path}; their login token stops working")
    if not kept:
        click.echo(
            "the file lists no reviewer now: jevqueue serve refuses every login until you add "
            "one with `jevqueue reviewers add NAME --key KEY`",
            err=True,
        )


@reviewers.command(name="list")
@_FILE
def list_reviewers(reviewers_file: Path | None) -> None:
    """List the reviewers and the key each signs with (checks every key file)."""
    try:
        from jevqueue.serve._reviewers import Reviewers
    except ImportError as error:
        _fail(str(error))
    path = _path(reviewers_file)
    try:
        found = Reviewers.load(path)
    except JevError as error:
        _fail(str(error))
    for reviewer in found.values():
        click.echo(f"{reviewer.reviewer_id}  {reviewer.key_path}")
