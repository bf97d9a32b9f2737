"""Copying an audit log of any kind into a verifiable JSONL file."""

from __future__ import annotations

import os
from pathlib import Path

from jevqueue.audit._jsonl_log import head_path, record_line
from jevqueue.audit._verify import VerificationReport, _report, load_audit_log
from jevqueue.errors import AuditIntegrityError, AuditReadError

__all__ = ["export_audit_log"]


def export_audit_log(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    schema: str = "jevqueue",
) -> VerificationReport:
    """Write the records of ``source`` to the JSONL file ``destination``, with its head anchor.

    ``source`` is anything :func:`~jevqueue.audit.verify_audit_log` reads (an SQLite or
    JSONL file, or a ``postgresql://`` URL). It is read once, in one snapshot, and checked
    first: a log with any problem is not exported, because a copy of a broken chain could
    not be told from a clean one. The copy holds the same records, byte for byte the lines
    a :class:`~jevqueue.audit.JsonlAuditLog` writes, and ``<destination>.head`` names its
    last record, so ``jevqueue audit verify DESTINATION`` checks it like the original.

    Returns:
        The verification report of the copy.

    Raises:
        AuditReadError: ``source`` cannot be read, or ``destination`` exists already or
            cannot be written.
        AuditIntegrityError: ``source`` does not verify; nothing was written.
    """
    loaded = load_audit_log(source, schema=schema)
    report = _report(*loaded, None, None)
    report.raise_for_problems()
    records = loaded[2]
    target = Path(destination)
    try:
        with target.open("xb") as handle:
            for record in records:
                assert record is not None  # a verified log has no unreadable record
                handle.write(record_line(record))
            handle.flush()
            os.fsync(handle.fileno())
        head_path(target).write_text(report.head_hash + "\n" if records else "", "ascii")
    except FileExistsError as error:
        raise AuditReadError(f"{str(target)!r} exists already: export into a new file") from error
    except OSError as error:
        raise AuditReadError(
            f"cannot write the export {str(target)!r} ({type(error).__name__}: {error})"
        ) from error
    from jevqueue.audit._verify import verify_audit_log

    copy = verify_audit_log(target, expected_head=report.head_hash, expected_count=report.count)
    if not copy.ok:  # pragma: no cover - the copy was written from verified records
        raise AuditIntegrityError(copy.summary())
    return copy
