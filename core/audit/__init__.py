"""The tamper-evident audit log: one hash-chained record per policy decision.

Every decision the PEP makes becomes an :class:`AuditRecord` — shaped like a policy
engine's decision log (decision id, timestamp, action digest, result, reasons, policy
revision, context ids) plus ``prev_hash`` and ``record_hash`` — written *before* the call
may run. A write that fails raises :class:`~jevqueue.errors.AuditWriteError`, and the PEP
denies the call.

* :class:`SQLiteAuditLog` — the default: WAL, one row per decision, the chain kept in the
  database so several processes can append and a reopened file resumes it.
* :class:`JsonlAuditLog` — one JSON line per decision, with an ``fsync`` policy.
* :class:`AuditChain` — puts any sink with ``append(event)`` or ``log(event)`` behind a
  hash chain (the PEP wraps whatever ``audit_logger`` it is given in one).
* :class:`PostgresAuditLog` — one chain for a fleet of workers on many hosts, in
  PostgreSQL (the ``postgres`` extra), with the same records and hashes as SQLite.
* :func:`default_audit_log_path` — where a PEP given no ``audit_logger`` records its
  decisions (an SQLite log in the state directory): no decision goes unaudited.
* :func:`verify_audit_log` (and ``jevqueue audit verify PATH|URL``) — says which record was
  edited, deleted, reordered or cut off.
* :func:`export_audit_log` (and ``jevqueue audit export``) — a verifiable JSONL copy.

Names load on first use, so ``import jevqueue.audit`` opens neither SQLite nor psycopg.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jevqueue._lazy import lazy_getattr

if TYPE_CHECKING:  # pragma: no cover
    from jevqueue.audit._chain import AuditChain
    from jevqueue.audit._default_log import default_audit_log_path
    from jevqueue.audit._export import export_audit_log
    from jevqueue.audit._jsonl_log import JsonlAuditLog
    from jevqueue.audit._postgres_log import PostgresAuditLog
    from jevqueue.audit._record import GENESIS_HASH, AuditRecord, decision_event
    from jevqueue.audit._sink import AuditSink, ChainedAuditLog
    from jevqueue.audit._sqlite_log import SQLiteAuditLog
    from jevqueue.audit._verify import AuditProblem, VerificationReport, verify_audit_log

_EXPORTS: dict[str, str] = {
    "AuditChain": "jevqueue.audit._chain",
    "AuditProblem": "jevqueue.audit._verify",
    "AuditRecord": "jevqueue.audit._record",
    "AuditSink": "jevqueue.audit._sink",
    "ChainedAuditLog": "jevqueue.audit._sink",
    "GENESIS_HASH": "jevqueue.audit._record",
    "JsonlAuditLog": "jevqueue.audit._jsonl_log",
    "PostgresAuditLog": "jevqueue.audit._postgres_log",
    "SQLiteAuditLog": "jevqueue.audit._sqlite_log",
    "VerificationReport": "jevqueue.audit._verify",
    "decision_event": "jevqueue.audit._record",
    "export_audit_log": "jevqueue.audit._export",
    "default_audit_log_path": "jevqueue.audit._default_log",
    "verify_audit_log": "jevqueue.audit._verify",
}

__all__ = [
    "GENESIS_HASH",
    "AuditChain",
    "AuditProblem",
    "AuditRecord",
    "AuditSink",
    "ChainedAuditLog",
    "JsonlAuditLog",
    "PostgresAuditLog",
    "SQLiteAuditLog",
    "VerificationReport",
    "decision_event",
    "default_audit_log_path",
    "export_audit_log",
    "verify_audit_log",
]


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return __all__
