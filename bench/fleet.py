"""A fleet on one database: 1, 4 and 16 worker processes judging and auditing calls.

Each worker is its own process with its own enforcement point (the default PDP), judging
``write_to_file`` calls (ALLOW) through the generic adapter as fast as it can for a fixed
time, every decision audited durably before it returns:

* ``postgresql``: one :class:`PostgresAuditLog` per worker, all on one PostgreSQL server
  (started here on a throwaway data directory, ``fsync = on``, ``synchronous_commit = on``);
* ``sqlite``: one :class:`SQLiteAuditLog` per worker, all on one file (WAL,
  ``durability="process"``) — the single-host peer, run interleaved with
  PostgreSQL in the same rounds; ``sqlite-full`` (``--backends``) is the same with
  ``durability="machine"`` (the default), an ``fsync`` per record like PostgreSQL's flush.

Per round and worker count: audited decisions per second (all workers), the p50 and p99
latency of one audited decision, and afterwards the record count (every acknowledged
decision is stored, nothing more is lost) and ``verify_audit_log`` (one intact chain).
Then a concurrent-replay round: N approvals are issued, and each is offered by several
workers at once (``--contenders``, chosen at random; each worker in its own shuffled
order) to its PEP with a :class:`PostgresConsumedApprovals`
(or :class:`SQLiteConsumedApprovals`) store, and each approval must let exactly one call
run.

Usage::

    python bench/fleet.py                      # 5 rounds of 1, 4, 16 workers, 4 s each
    python bench/fleet.py --quick              # 2 rounds, 2 s, 300 approvals
    python bench/fleet.py --workers 16 --rounds 3 --threads 4

Target: >= 2,000 durably audited decisions per second with 16 workers (PostgreSQL).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

CONTEXT = {
    "task_id": "task-42",
    "actor_id": "coding-agent",
    "workspace": "/workspace/project",
    "git_sha": "0123456789abcdef0123456789abcdef01234567",
    "environment": "local",
}


def _pep(backend: str, target: str, schema: str, *, consumed: bool = False, key: Any = None):
    from jevqueue.adapters import GenericAdapter
    from jevqueue.policy import PolicyEnforcementPoint, create_default_policy_decision_point

    if backend == "postgresql":
        from jevqueue.approvals import PostgresConsumedApprovals
        from jevqueue.audit import PostgresAuditLog

        log: Any = PostgresAuditLog(target, schema=schema)
        store: Any = PostgresConsumedApprovals(target, schema=schema) if consumed else None
    else:
        from jevqueue.approvals import SQLiteConsumedApprovals
        from jevqueue.audit import SQLiteAuditLog

        durability = "machine" if backend == "sqlite-full" else "process"
        log = SQLiteAuditLog(Path(target) / "audit.sqlite3", durability=durability)
        store = SQLiteConsumedApprovals(Path(target) / "consumed.sqlite3") if consumed else None
    verifier = None
    if key is not None:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
        from jevqueue.approvals import SignedApprovalVerifier

        verifier = SignedApprovalVerifier({"alice": Ed25519PublicKey.from_public_bytes(key)})
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(),
        audit_logger=log,
        approval_verifier=verifier,
        consumed_approvals=store,
    )
    return GenericAdapter(pep), log, store


def _judge(job: dict[str, Any], ready: Any, start: Any, results: Any) -> None:
    """One worker: judge allowed writes for ``seconds``; report latencies (ns)."""
    import threading

    adapter, log, _ = _pep(job["backend"], job["target"], job["schema"])
    ready.wait()
    deadline = [0.0]
    latencies: list[int] = []
    failures = [0]
    lock = threading.Lock()

    def loop(thread: int) -> None:
        mine: list[int] = []
        n = 0
        clock = time.perf_counter_ns
        while time.monotonic() < deadline[0]:
            n += 1
            arguments = {
                "TargetFile": f"/workspace/project/src/w{job['worker']}_{thread}_{n}.py",
                "CodeContent": "value = 1\n",
            }
            began = clock()
            try:
                allowed = adapter.intercept_tool_call("write_to_file", arguments, CONTEXT)
            except Exception:
                allowed = False
            took = clock() - began
            if allowed:
                mine.append(took)
            else:
                with lock:
                    failures[0] += 1
        with lock:
            latencies.extend(mine)

    start.wait()
    deadline[0] = time.monotonic() + job["seconds"]
    threads = [threading.Thread(target=loop, args=(t,)) for t in range(job["threads"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    log.close()
    results.put({"latencies": latencies, "failures": failures[0]})


def _replay(job: dict[str, Any], ready: Any, start: Any, results: Any) -> None:
    """One worker: offer every approval once, in its own order; report which ones ran."""
    from jevqueue.approvals import ApprovalRecord

    adapter, log, store = _pep(
        job["backend"], job["target"], job["schema"], consumed=True, key=job["key"]
    )
    records = [ApprovalRecord.from_dict(data) for data in job["records"]]
    order = [index for index, offered in enumerate(job["offers"]) if job["worker"] in offered]
    random.Random(job["worker"]).shuffle(order)
    command = {"CommandLine": "make deploy", "Cwd": "/workspace/project"}
    ran: list[int] = []
    ready.wait()
    start.wait()
    from jevqueue.errors import UnfulfilledObligationError

    for index in order:
        context = {**CONTEXT, "task_id": f"task-{index}"}
        try:
            if adapter.intercept_tool_call(
                "run_command", command, context, approval_records=[records[index]]
            ):
                ran.append(index)
        except UnfulfilledObligationError:
            pass
    log.close()
    store.close()
    results.put({"ran": ran})


def _run(target_fn: Any, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(len(jobs) + 1)
    start = context.Barrier(len(jobs) + 1)
    results = context.Queue()
    processes = [
        context.Process(target=target_fn, args=(job, ready, start, results)) for job in jobs
    ]
    for process in processes:
        process.start()
    ready.wait(timeout=120)
    start.wait(timeout=120)
    out = [results.get(timeout=600) for _ in jobs]
    for process in processes:
        process.join(timeout=60)
        if process.exitcode != 0:
            raise RuntimeError(f"a worker failed with exit code {process.exitcode}")
    return out


def _fresh_target(backend: str, url: str | None) -> tuple[str, str]:
    if backend == "postgresql":
        from jevqueue.db import migrate

        schema = "bench_" + uuid.uuid4().hex[:12]
        migrate(url, schema=schema)
        assert url is not None
        return url, schema
    return tempfile.mkdtemp(prefix="jevqueue-fleet-"), "jevqueue"


def _count_and_verify(backend: str, target: str, schema: str) -> tuple[int, bool, str]:
    from jevqueue.audit import verify_audit_log

    where = target if backend == "postgresql" else str(Path(target) / "audit.sqlite3")
    report = verify_audit_log(where, schema=schema)
    return report.count, report.ok, report.summary()


def judge_round(backend: str, url: str | None, workers: int, seconds: float, threads: int):
    target, schema = _fresh_target(backend, url)
    jobs = [
        {
            "backend": backend,
            "target": target,
            "schema": schema,
            "worker": n,
            "seconds": seconds,
            "threads": threads,
        }
        for n in range(workers)
    ]
    out = _run(_judge, jobs)
    latencies = sorted(value for result in out for value in result["latencies"])
    failures = sum(result["failures"] for result in out)
    count, ok, summary = _count_and_verify(backend, target, schema)
    acknowledged = len(latencies)
    return {
        "backend": backend,
        "workers": workers,
        "threads": threads,
        "rate": acknowledged / seconds,
        "p50_ms": latencies[len(latencies) // 2] / 1e6 if latencies else float("nan"),
        "p99_ms": latencies[int(len(latencies) * 0.99)] / 1e6 if latencies else float("nan"),
        "acknowledged": acknowledged,
        "stored": count,
        "failures": failures,
        "verified": ok,
        "summary": summary,
    }


def replay_round(backend: str, url: str | None, workers: int, approvals: int, contenders: int):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
    from jevqueue.approvals import ApprovalAuthority
    from jevqueue.policy import Action, generic_registry

    key = Ed25519PrivateKey.generate()
    authority = ApprovalAuthority(key, "alice")
    command = {"CommandLine": "make deploy", "Cwd": "/workspace/project"}
    records = []
    for index in range(approvals):
        action = Action.build(
            generic_registry(), "run_command", command, {**CONTEXT, "task_id": f"task-{index}"}
        )
        records.append(authority.issue(action.digest).to_dict())
    target, schema = _fresh_target(backend, url)
    public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    chooser = random.Random(approvals)
    offers = [chooser.sample(range(workers), min(contenders, workers)) for _ in records]
    jobs = [
        {
            "backend": backend,
            "target": target,
            "schema": schema,
            "worker": n,
            "key": public,
            "records": records,
            "offers": offers,
        }
        for n in range(workers)
    ]
    began = time.perf_counter()
    out = _run(_replay, jobs)
    took = time.perf_counter() - began
    wins = [0] * approvals
    for result in out:
        for index in result["ran"]:
            wins[index] += 1
    count, ok, _ = _count_and_verify(backend, target, schema)
    return {
        "backend": backend,
        "workers": workers,
        "approvals": approvals,
        "exactly_one": sum(1 for w in wins if w == 1),
        "none": sum(1 for w in wins if w == 0),
        "more": sum(1 for w in wins if w > 1),
        "offers": sum(len(offered) for offered in offers),
        "contenders": min(contenders, workers),
        "stored": count,
        "verified": ok,
        "seconds": took,
    }


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def _spread_ms(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 4, 16])
    parser.add_argument("--threads", type=int, default=1, help="agent threads per worker")
    parser.add_argument("--approvals", type=int, default=1000)
    parser.add_argument(
        "--contenders", type=int, default=4, help="workers offering each approval at once"
    )
    parser.add_argument("--backends", nargs="*", default=["postgresql", "sqlite"])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path, default=None, help="write every figure here")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.seconds, args.approvals = 2, 2.0, 300

    from jevqueue.testing.postgres_server import TemporaryPostgres

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load {os.getloadavg()}")
    server = TemporaryPostgres()
    server.start()
    version = server._run("postgres", "--version").strip()
    print(f"{version}: fsync=on, synchronous_commit=on, data in {server.data_dir}")
    rows: list[dict[str, Any]] = []
    try:
        for round_number in range(1, args.rounds + 1):
            for workers in args.workers:
                for backend in args.backends:  # interleaved: the peer in the same round
                    row = judge_round(backend, server.url, workers, args.seconds, args.threads)
                    row["round"] = round_number
                    row["load"] = os.getloadavg()[0]
                    rows.append(row)
                    print(
                        f"round {round_number} {backend:10s} {workers:2d} workers: "
                        f"{row['rate']:8,.0f}/s p50 {row['p50_ms']:.2f} ms p99 "
                        f"{row['p99_ms']:.2f} ms; stored {row['stored']} of "
                        f"{row['acknowledged']} acknowledged, {row['failures']} denied, "
                        f"verified {row['verified']} (load {row['load']:.2f})",
                        flush=True,
                    )
                    if not row["verified"] or row["stored"] < row["acknowledged"]:
                        raise SystemExit(f"FAILED: {row['summary']}")
        replays = []
        for backend in args.backends:
            replay = replay_round(
                backend, server.url, max(args.workers), args.approvals, args.contenders
            )
            replays.append(replay)
            print(
                f"replay {backend:10s} {replay['workers']} workers, {replay['approvals']} "
                f"approvals each offered by {replay['contenders']} at once "
                f"({replay['offers']} offers): exactly one winner for "
                f"{replay['exactly_one']}, none for {replay['none']}, several for "
                f"{replay['more']}; {replay['stored']} records, "
                f"verified {replay['verified']} ({replay['seconds']:.1f} s)",
                flush=True,
            )
    finally:
        server.close()

    print("\nbackend     workers  decisions/s median (min-max)  p50 ms           p99 ms")
    for backend in args.backends:
        for workers in args.workers:
            mine = [r for r in rows if r["backend"] == backend and r["workers"] == workers]
            print(
                f"{backend:10s}  {workers:7d}  {_spread([r['rate'] for r in mine]):28s}  "
                f"{_spread_ms([r['p50_ms'] for r in mine]):15s}  "
                f"{_spread_ms([r['p99_ms'] for r in mine])}"
            )
    print(f"load after: {os.getloadavg()}")
    if args.json is not None:
        args.json.write_text(json.dumps({"rounds": rows, "replays": replays}, indent=2))


if __name__ == "__main__":
    main()
