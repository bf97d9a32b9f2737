"""``jevqueue audit``: verify a hash-chained audit log."""

from __future__ import annotations

import json

import click
from jevqueue.errors import AuditReadError, JevError

__all__ = ["audit"]


@click.group()
def audit() -> None:
    """Inspect and verify audit logs."""


@audit.command()
@click.argument("path", type=click.Path(dir_okay=False, path_type=str))
@click.option(
    "--expect-head",
    default=None,
    help="A head hash printed by an earlier verify: the log must still contain it.",
)
@click.option(
    "--expect-count",
    type=click.IntRange(min=0),
    default=None,
    help="The log must hold at least this many records.",
)
@click.option(
    "--key",
    "key_file",
    default=None,
    type=click.Path(dir_okay=False, path_type=str),
    help="The public key (.pub) of the log's signing key: the newest signed checkpoint "
    "must name the last record.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def verify(
    path: str,
    expect_head: str | None,
    expect_count: int | None,
    key_file: str | None,
    as_json: bool,
) -> None:
    """Check the hash chain of the SQLite or JSONL audit log at PATH.

    Prints OK with the record count and head hash, or every record that was edited,
    deleted, reordered or cut off, or is malformed (unreadable, or carrying keys outside
    the record's fields or a key twice), or whose end no anchor vouches for (a missing,
    empty or stale head anchor); with --key, records no signed checkpoint covers. Exits 0
    when the log verifies, 1 when it does not, 2 when it cannot be read.
    """
    from jevqueue.audit import verify_audit_log

    public_key = None
    if key_file is not None:
        from jevqueue.approvals import load_public_key

        try:
            public_key = load_public_key(key_file)
        except JevError as error:
            click.echo(f"Error: {error}", err=True)
            raise SystemExit(2) from error
    try:
        report = verify_audit_log(
            path, expected_head=expect_head, expected_count=expect_count, public_key=public_key
        )
    except AuditReadError as error:
        click.echo(f"Error: {error}", err=True)
        raise SystemExit(2) from error
    if as_json:
        click.echo(
            json.dumps(
                {
                    "ok": report.ok,
                    "path": report.path,
                    "format": report.format,
                    "count": report.count,
                    "head_hash": report.head_hash,
                    "problems": [
                        {
                            "kind": problem.kind,
                            "index": problem.index,
                            "decision_id": problem.decision_id,
                            "message": problem.message,
                        }
                        for problem in report.problems
                    ],
                    "notes": list(report.notes),
                },
                indent=2,
            )
        )
    else:
        click.echo(report.summary())
        for note in report.notes:
            click.echo(f"note: {note}")
    if not report.ok:
        raise SystemExit(1)
