"""``jevqueue audit``: verify a hash-chained audit log."""

from __future__ import annotations

import json

import click
from jevqueue.errors import AuditReadError

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
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def verify(path: str, expect_head: str | None, expect_count: int | None, as_json: bool) -> None:
    """Check the hash chain of the SQLite or JSONL audit log at PATH.

    Prints OK with the record count and head hash, or every record that was edited,
    deleted, reordered or cut off, or is malformed (unreadable, or carrying keys outside
    the record's fields or a key twice). Exits 0 when the log verifies, 1 when it does
    not, 2 when it cannot be read.
    """
    from jevqueue.audit import verify_audit_log

    try:
        report = verify_audit_log(path, expected_head=expect_head, expected_count=expect_count)
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
