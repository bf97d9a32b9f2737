"""The policy layer's cost per decision, against archmage-ai 2.0.0 measured in the same run.

Three calls go through each library's generic adapter (``intercept_tool_call``), the way
an agent host calls it:

* ``allowed write``   ``write_to_file`` of ``src/feature.py`` (ALLOW)
* ``denied traversal`` ``write_to_file`` of ``../../etc/passwd`` (DENY)
* ``run_command``     ``pytest -q`` in the workspace (explicit approval required, none given)

and, beside them, a realistic ``write_to_file`` of 20 KB of code (outside the targets:
content size is what canonical encoding and the credential scan pay for),

each without a durable audit log (both get a sink that discards events: neither library
allows a side effect unaudited, and jevqueue's ``audit_logger=None`` means its embedded
SQLite log) and with the durable
default (jevqueue: ``SQLiteAuditLog`` in WAL mode; archmage: ``JsonlAuditLogger``, which
fsyncs every line), both in a temporary directory. CPU time per call is
``time.process_time_ns`` around each call; the same loop (its source is shipped to the
other interpreter) runs archmage-ai in a throwaway virtual environment, installed there by
this script with pip. Then: audited decisions per second in one process, the three calls
in turn, with the log verified afterwards.

Usage::

    python bench/policy.py            # full run (about a minute)
    python bench/policy.py --quick    # a short run
    python bench/policy.py --no-archmage
    python bench/policy.py --profile  # where jevqueue's time goes, per case

Targets: <= 25 us median CPU per allowed call without audit, >= 15x faster than
archmage-ai on every case, >= 5,000 durably audited decisions per second.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ARCHMAGE_VERSION = "2.0.0"
DEFAULT_VENV = Path(tempfile.gettempdir()) / "jevqueue-bench-archmage"

CONTEXT = {
    "task_id": "task-42",
    "actor_id": "coding-agent",
    "workspace": "/workspace/project",
    "git_sha": "0123456789abcdef0123456789abcdef01234567",
    "environment": "local",
}
# name -> (tool, arguments, expected outcome)
CASES: dict[str, tuple[str, dict[str, Any], str]] = {
    "allowed write": (
        "write_to_file",
        {"TargetFile": "src/feature.py", "CodeContent": "value = 1\n"},
        "allow",
    ),
    "denied traversal": (
        "write_to_file",
        {"TargetFile": "../../etc/passwd", "CodeContent": "root::0:0::/root:/bin/sh\n"},
        "deny",
    ),
    "run_command": (
        "run_command",
        {"CommandLine": "pytest -q", "Cwd": "/workspace/project"},
        "obligation",
    ),
}
# The targets concern the three calls above. A realistic file write is shown beside them:
# content size is what the canonical encoding and the credential scan pay for.
SOURCE_FILE = "".join(
    f"def handler_{index}(request, retries={index % 5}):\n"
    f'    """Serve request kind {index}."""\n'
    f"    return process(request, kind={index}, retries=retries)\n\n"
    for index in range(200)
)[:20_000]
CASES["allowed write, 20 KB of code"] = (
    "write_to_file",
    {"TargetFile": "src/handlers.py", "CodeContent": SOURCE_FILE},
    "allow",
)
TARGET_CASES = ("allowed write", "denied traversal", "run_command")
EXAMPLE_POLICY = """
[policy]
name = "acme"
side_effects = ["database_write"]

[[rule]]
id = "acme.prod-freeze"
effect = "deny"
reason = "production is changed by the release pipeline, never by an agent"
environments = ["prod", "production"]
side_effects = ["file_write", "file_delete", "shell_command", "database_write"]

[[rule]]
id = "acme.migrations"
effect = "require"
obligations = ["explicit_approval"]
reason = "schema migrations need a human's approval"
paths = ["migrations/**", "*.sql"]

[[rule]]
id = "acme.no-pipe-to-shell"
effect = "deny"
reason = "downloading a script and running it in one step is never allowed"
tools = ["run_command"]
arguments = { CommandLine = '(?i)\\b(curl|wget)\\b[^|]*\\|\\s*(ba|z)?sh\\b' }

[[rule]]
id = "acme.interns-read-only"
effect = "deny"
reason = "intern agents only read"
actors = ["intern-*"]
side_effects = ["file_write", "file_delete", "shell_command", "database_write"]

[[rule]]
id = "acme.vendored"
effect = "deny"
reason = "vendored code is updated by the dependency bot only"
paths = ["vendor/**", "third_party/**"]
side_effects = ["file_write", "file_delete"]
"""
TARGETS = {"allowed_median_us": 25.0, "speedup": 15.0, "audited_per_second": 5000.0}

# The measuring loop, shared verbatim by both interpreters.
MEASURE_SOURCE = '''
import gc
import time


def measure(call, iterations, warmup):
    """Per-call CPU and wall time in nanoseconds: median, p99, mean.

    The garbage collector stays on, as in real use; a full collection first means no
    earlier garbage is left to be collected on the clock.
    """
    cpu_clock = time.process_time_ns
    wall_clock = time.perf_counter_ns
    for _ in range(warmup):
        call()
    cpu = []
    wall = []
    gc.collect()
    for _ in range(iterations):
        w0 = wall_clock()
        c0 = cpu_clock()
        call()
        c1 = cpu_clock()
        w1 = wall_clock()
        cpu.append(c1 - c0)
        wall.append(w1 - w0)
    cpu.sort()
    wall.sort()

    def pick(values, quantile):
        return values[min(len(values) - 1, int(quantile * len(values)))]

    return {
        "cpu_median_ns": pick(cpu, 0.5),
        "cpu_p99_ns": pick(cpu, 0.99),
        "cpu_mean_ns": sum(cpu) / len(cpu),
        "wall_median_ns": pick(wall, 0.5),
        "wall_p99_ns": pick(wall, 0.99),
        "iterations": iterations,
    }


def best_of(call, iterations, warmup, rounds=3):
    """The round with the lowest CPU median: drift from other processes only adds time."""
    best = None
    for _ in range(rounds):
        stats = measure(call, iterations, warmup)
        if best is None or stats["cpu_median_ns"] < best["cpu_median_ns"]:
            best = stats
    return best


def throughput(calls, count):
    """Decisions per wall-clock second and per CPU second, cycling through ``calls``."""
    wall = time.perf_counter_ns()
    cpu = time.process_time_ns()
    for index in range(count):
        calls[index % len(calls)]()
    cpu = time.process_time_ns() - cpu
    wall = time.perf_counter_ns() - wall
    return {"wall": count / (wall / 1e9), "cpu": count / (cpu / 1e9)}
'''

class _Discarding:
    """An audit sink that drops every record (the chain is still computed)."""

    def append(self, event: Any) -> None:
        pass


ARCHMAGE_SOURCE = """
import json, os, sys, tempfile
from archmage import JsonlAuditLogger, PolicyEnforcementPoint, create_default_policy_decision_point
from archmage.adapters import GenericAdapter

params = json.loads(sys.argv[1])
context = params["context"]


class DiscardingLogger:
    def log(self, event):
        pass


def adapter(logger):
    return GenericAdapter(
        PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=logger)
    )


def caller(gate, tool, arguments):
    def call():
        try:
            return gate.intercept_tool_call(tool, arguments, context)
        except Exception as error:
            return error
    return call


def outcome(result):
    if result is True:
        return "allow"
    name = type(result).__name__
    if name == "UnfulfilledObligationError":
        return "obligation"
    if name == "PolicyViolationError":
        return "deny"
    return repr(result)[:120]


results = {}
with tempfile.TemporaryDirectory() as directory:
    for audit in ("none", "durable"):
        if audit == "none":
            logger = DiscardingLogger()
        else:
            logger = JsonlAuditLogger(os.path.join(directory, "audit.jsonl"))
        gate = adapter(logger)
        for name, (tool, arguments, _) in params["cases"].items():
            call = caller(gate, tool, arguments)
            stats = best_of(call, params["iterations"], params["warmup"])
            stats["outcome"] = outcome(call())
            results[f"{name}|{audit}"] = stats
    gate = adapter(JsonlAuditLogger(os.path.join(directory, "throughput.jsonl")))
    calls = [caller(gate, *params["cases"][name][:2]) for name in params["targets"]]
    results["throughput"] = throughput(calls, params["throughput"])
print(json.dumps(results))
"""


def ensure_archmage(venv: Path) -> Path:
    """Return the interpreter of a virtual environment holding archmage-ai (installing it)."""
    python = venv / "bin" / "python"
    probe = "import importlib.metadata as m; print(m.version('archmage-ai'))"
    if python.exists():
        found = subprocess.run([python, "-c", probe], capture_output=True, text=True)
        if found.returncode == 0 and found.stdout.strip() == ARCHMAGE_VERSION:
            return python
    print(f"installing archmage-ai=={ARCHMAGE_VERSION} into {venv} ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", f"archmage-ai=={ARCHMAGE_VERSION}"],
        check=True,
    )
    return python


def run_archmage(python: Path, iterations: int, warmup: int, count: int) -> dict[str, Any]:
    params = {
        "context": CONTEXT,
        "cases": CASES,
        "targets": TARGET_CASES,
        "iterations": iterations,
        "warmup": warmup,
        "throughput": count,
    }
    script = MEASURE_SOURCE + ARCHMAGE_SOURCE
    done = subprocess.run(
        [python, "-c", script, json.dumps(params)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"the archmage-ai side failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def jevqueue_side(iterations: int, warmup: int, count: int, directory: Path) -> dict[str, Any]:
    from jevqueue import PolicyEnforcementPoint, create_default_policy_decision_point
    from jevqueue.adapters import GenericAdapter
    from jevqueue.audit import SQLiteAuditLog, verify_audit_log
    from jevqueue.errors import PolicyDeniedError, UnfulfilledObligationError

    namespace: dict[str, Any] = {}
    exec(MEASURE_SOURCE, namespace)
    measure: Callable[..., dict[str, Any]] = namespace["measure"]
    best_of: Callable[..., dict[str, Any]] = namespace["best_of"]
    throughput: Callable[..., dict[str, float]] = namespace["throughput"]

    def caller(gate: Any, tool: str, arguments: dict[str, Any]) -> Callable[[], Any]:
        def call() -> Any:
            try:
                return gate.intercept_tool_call(tool, arguments, CONTEXT)
            except Exception as error:
                return error

        return call

    def outcome(result: Any) -> str:
        if result is True:
            return "allow"
        if isinstance(result, UnfulfilledObligationError):
            return "obligation"
        if isinstance(result, PolicyDeniedError):
            return "deny"
        return repr(result)[:120]

    results: dict[str, Any] = {}
    for audit in ("none", "durable"):
        logger = _Discarding() if audit == "none" else SQLiteAuditLog(directory / "audit.sqlite3")
        gate = GenericAdapter(
            PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=logger)
        )
        for name, (tool, arguments, _) in CASES.items():
            call = caller(gate, tool, arguments)
            stats = best_of(call, iterations, warmup)
            stats["outcome"] = outcome(call())
            results[f"{name}|{audit}"] = stats
    log_path = directory / "throughput.sqlite3"
    log = SQLiteAuditLog(log_path)
    gate = GenericAdapter(
        PolicyEnforcementPoint(create_default_policy_decision_point(), audit_logger=log)
    )
    calls = [caller(gate, *CASES[name][:2]) for name in TARGET_CASES]
    results["throughput"] = throughput(calls, count)
    log.close()
    report = verify_audit_log(log_path)
    results["throughput_verified"] = report.ok and report.count == count

    # What a policy file adds: the five rules of the worked example in docs/policy.md.
    policy_file = directory / "acme.toml"
    policy_file.write_text(EXAMPLE_POLICY, encoding="utf-8")
    tool, arguments, _ = CASES["allowed write"]
    gates = {
        label: caller(
            GenericAdapter(
                PolicyEnforcementPoint(create_default_policy_decision_point(policy_files=files))
            ),
            tool,
            arguments,
        )
        for label, files in (("defaults", []), ("defaults + acme.toml", [policy_file]))
    }
    for label in gates:  # interleaved rounds, best median of each, so drift cancels out
        results[f"policy file|{label}"] = {"cpu_median_ns": float("inf")}
    for _ in range(3):
        for label, call in gates.items():
            stats = measure(call, iterations, warmup)
            best = results[f"policy file|{label}"]
            if stats["cpu_median_ns"] < best["cpu_median_ns"]:
                results[f"policy file|{label}"] = stats
    return results


def profile_jevqueue(count: int) -> None:
    import cProfile
    import pstats

    from jevqueue import PolicyEnforcementPoint, create_default_policy_decision_point
    from jevqueue.adapters import GenericAdapter

    gate = GenericAdapter(PolicyEnforcementPoint(create_default_policy_decision_point()))
    for name, (tool, arguments, _) in CASES.items():

        def loop() -> None:
            for _ in range(count):
                # outcomes are checked by the main run
                with contextlib.suppress(Exception):
                    gate.intercept_tool_call(tool, arguments, CONTEXT)  # noqa: B023

        profiler = cProfile.Profile()
        profiler.runcall(loop)
        print(f"\n## profile: {name} ({count} calls, no audit)\n")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


def us(nanoseconds: float) -> str:
    return f"{nanoseconds / 1000:.1f}"


def report(ours: dict[str, Any], theirs: dict[str, Any] | None, command: str) -> bool:
    """Print the results as Markdown; return True when every target is met."""
    met = True
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"\nCommand: `{command}`  ")
    print(
        f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load}, "
        f"{time.strftime('%Y-%m-%d')}\n"
    )
    header = "| case | audit | jevqueue CPU median / p99 (µs) | wall median (µs) |"
    rule = "|---|---|---:|---:|"
    if theirs is not None:
        header += (
            f" archmage-ai {ARCHMAGE_VERSION} CPU median / p99 (µs) | wall median (µs) |"
            " CPU speed-up | wall speed-up |"
        )
        rule += "---:|---:|---:|---:|"
    print(header)
    print(rule)
    durable = "SQLite WAL" if theirs is None else "SQLite WAL / JSONL+fsync"
    for audit, label in (("none", "none"), ("durable", durable)):
        for name, (_, _, expected) in CASES.items():
            mine = ours[f"{name}|{audit}"]
            if mine["outcome"] != expected:
                met = False
            row = (
                f"| {name} ({mine['outcome']}) | {label} | "
                f"{us(mine['cpu_median_ns'])} / {us(mine['cpu_p99_ns'])} | "
                f"{us(mine['wall_median_ns'])} |"
            )
            if theirs is not None:
                other = theirs[f"{name}|{audit}"]
                ratio = other["cpu_median_ns"] / mine["cpu_median_ns"]
                wall_ratio = other["wall_median_ns"] / mine["wall_median_ns"]
                row += (
                    f" {us(other['cpu_median_ns'])} / {us(other['cpu_p99_ns'])}"
                    f" ({other['outcome']}) | {us(other['wall_median_ns'])} |"
                    f" {ratio:.1f}x | {wall_ratio:.1f}x |"
                )
            print(row)
    print()
    base = ours["policy file|defaults"]["cpu_median_ns"]
    with_file = ours["policy file|defaults + acme.toml"]["cpu_median_ns"]
    print(
        f"A policy file with the five rules of the docs/policy.md example adds "
        f"{us(with_file - base)} µs of CPU to an allowed write ({us(base)} -> {us(with_file)} "
        "µs median, no audit)."
    )
    print()
    allowed = ours["allowed write|none"]["cpu_median_ns"] / 1000
    rate = ours["throughput"]
    line = (
        "Audited decisions per second, one process, the three calls in turn (SQLite, WAL): "
        f"**{rate['wall']:,.0f}** per wall-clock second ({rate['cpu']:,.0f} per CPU second)"
    )
    if theirs is not None:
        other_rate = theirs["throughput"]
        line += (
            f"; archmage-ai (JSONL + fsync): {other_rate['wall']:,.0f} per wall-clock second "
            f"({other_rate['cpu']:,.0f} per CPU second)"
        )
    print(line + f". Log verified afterwards: {ours['throughput_verified']}.")
    print()
    checks = [
        (f"median CPU per allowed call without audit <= 25 µs: {allowed:.1f} µs", allowed <= 25),
        (
            f">= 5,000 audited decisions/s: {rate['wall']:,.0f}",
            rate["wall"] >= TARGETS["audited_per_second"],
        ),
    ]
    if theirs is not None:
        worst = min(
            theirs[key]["cpu_median_ns"] / ours[key]["cpu_median_ns"]
            for key in theirs
            if "|" in key and key.split("|")[0] in TARGET_CASES
        )
        checks.append(
            (f">= 15x faster than archmage-ai on every case (CPU): worst {worst:.1f}x", worst >= 15)
        )
    for text, ok in checks:
        met = met and ok
        print(f"- {'met' if ok else 'MISSED'}: {text}")
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run")
    parser.add_argument("--no-archmage", action="store_true", help="skip the baseline")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="archmage-ai venv")
    parser.add_argument("--profile", action="store_true", help="profile jevqueue and stop")
    args = parser.parse_args()
    iterations, warmup, count = (1000, 200, 3000) if args.quick else (10000, 1000, 30000)
    if args.profile:
        profile_jevqueue(iterations)
        return
    theirs = None
    if not args.no_archmage:
        python = ensure_archmage(args.venv)
        # archmage-ai is ~50x slower: fewer iterations give the same precision
        theirs = run_archmage(python, max(200, iterations // 10), warmup // 4, count // 10)
    with tempfile.TemporaryDirectory() as directory:
        ours = jevqueue_side(iterations, warmup, count, Path(directory))
    command = "python bench/policy.py" + (" --quick" if args.quick else "")
    if not report(ours, theirs, command):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
