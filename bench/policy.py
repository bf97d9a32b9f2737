"""The policy layer's cost per decision, beside three ungoverned peers in the same process.

Every call is judged against a real workspace: a temporary directory holding a small
project (source files, tests, a ``.git`` folder), so path resolution looks at a real file
system, as it does in use. Four calls, through each library's own entry point:

* ``allowed write``    ``write_to_file`` of ``src/feature.py`` (allowed)
* ``denied traversal`` ``write_to_file`` of ``../../etc/passwd`` (denied)
* ``run_command``      ``pytest -q`` in the workspace (needs an explicit approval; none given)
* ``20 KB write``      ``write_to_file`` of 20 KB of Python code (outside the targets:
  content size is what canonical encoding and the credential scan pay for)

Contestants (see ``docs/benchmarks.md`` for what each one checks and what it does not):

* jevqueue's ``GenericAdapter.intercept_tool_call``, with no audit, with seed 002's
  ``AuditCollector`` (a plain ``log(event)`` sink), with ``SQLiteAuditLog`` in both
  durability modes;
* archmage-ai 2.0.0's ``GenericAdapter.intercept_tool_call``, with a logger that discards
  events (it refuses side effects without one), with the same ``AuditCollector``, and with
  its durable default ``JsonlAuditLogger`` (one ``fsync`` per record);
* agent-governance-toolkit's ``PolicyEvaluator.evaluate`` (rules over a context dict);
* cedarpy's ``is_authorized`` with a pre-parsed policy set.

All run in this interpreter (the peers come from the ``bench`` extra: ``make bench``
installs them into ``.venv-bench``). Each round measures every contestant on every case,
in an order that rotates from round to round; a figure is the median of the round medians
with the lowest and highest round beside it, and each ratio is taken within a round.

Usage::

    .venv-bench/bin/python bench/policy.py              # 5 rounds (a few minutes)
    .venv-bench/bin/python bench/policy.py --rounds 7
    .venv-bench/bin/python bench/policy.py --quick      # fewer calls per round
    .venv-bench/bin/python bench/policy.py --profile    # where jevqueue's time goes

Targets (CPU, median of the rounds): allowed write <= 12 µs and denied traversal <= 15 µs
with no audit; >= 10x archmage-ai on every case with the collector, and with each
library's durable default.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from interleaved import Sample, load_line, run_rounds, summarise, time_calls

ARCHMAGE_VERSION = "2.0.0"
SOURCE_FILE = "".join(
    f"def handler_{index}(request, retries={index % 5}):\n"
    f'    """Serve request kind {index}."""\n'
    f"    return process(request, kind={index}, retries=retries)\n\n"
    for index in range(200)
)[:20_000]
# name -> (tool, arguments, expected outcome); "{workspace}" is filled in at run time.
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
        {"CommandLine": "pytest -q", "Cwd": "{workspace}"},
        "obligation",
    ),
    "20 KB write": (
        "write_to_file",
        {"TargetFile": "src/handlers.py", "CodeContent": SOURCE_FILE},
        "allow",
    ),
}
TARGET_CASES = ("allowed write", "denied traversal", "run_command")
TARGETS = {"allowed write": 12.0, "denied traversal": 15.0, "speedup": 10.0}
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
# The same three decisions as rules each peer can express. Neither resolves paths: the
# traversal is caught by the spelling "..", and neither can attach an approval
# obligation, so run_command is refused outright.
AGT_RULES = [
    {
        "name": "no-traversal",
        "condition": {"field": "path", "operator": "matches", "value": r"(^|/)\.\.(/|$)"},
        "action": "deny",
        "priority": 100,
        "message": "the path leaves the workspace",
    },
    {
        "name": "shell-needs-approval",
        "condition": {"field": "tool_name", "operator": "eq", "value": "run_command"},
        "action": "deny",
        "priority": 90,
        "message": "shell commands need an approval",
    },
]
CEDAR_POLICIES = """
permit (principal, action == Action::"write_to_file", resource)
when { !(context.path like "*..*") && !(context.path like "/*") };
permit (principal, action == Action::"run_command", resource)
when { context.approved };
"""


class AuditCollector:
    """Seed 002's audit logger: keeps every event in a list."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def log(self, event: Any) -> None:
        self.events.append(event)


class DiscardingLogger:
    """The "no audit" sink of both libraries: neither allows a side effect unaudited."""

    def log(self, event: Any) -> None:
        pass


def make_workspace(root: Path) -> Path:
    """A small project two levels below ``root``, and an ``etc/passwd`` beside it.

    ``../../etc/passwd`` from the workspace then names a file that exists, as it does on
    a real machine.
    """
    workspace = root / "home" / "project"
    for relative, text in {
        "src/feature.py": "value = 0\n",
        "src/handlers.py": SOURCE_FILE,
        "src/__init__.py": "",
        "tests/test_feature.py": "def test_value():\n    assert True\n",
        "README.md": "# project\n",
        "pyproject.toml": '[project]\nname = "project"\n',
        ".git/HEAD": "ref: refs/heads/main\n",
        ".git/config": "[core]\n",
    }.items():
        path = workspace / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (root / "etc").mkdir()
    (root / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/sh\n", encoding="utf-8")
    return workspace


def context_for(workspace: Path) -> dict[str, str]:
    return {
        "task_id": "task-42",
        "actor_id": "coding-agent",
        "workspace": str(workspace),
        "git_sha": "0123456789abcdef0123456789abcdef01234567",
        "environment": "local",
    }


def cases_for(workspace: Path) -> dict[str, tuple[str, dict[str, Any], str]]:
    return {
        name: (
            tool,
            {key: value.replace("{workspace}", str(workspace)) for key, value in args.items()},
            expected,
        )
        for name, (tool, args, expected) in CASES.items()
    }


def adapter_caller(gate: Any, context: dict[str, str]) -> Callable[[str, dict[str, Any]], Any]:
    def bind(tool: str, arguments: dict[str, Any]) -> Callable[[], Any]:
        def call() -> Any:
            try:
                return gate.intercept_tool_call(tool, arguments, context)
            except Exception as error:
                return error

        return call

    return bind


def adapter_outcome(result: object) -> str:
    """The outcome of an ``intercept_tool_call``, for either library (by error name)."""
    if result is True:
        return "allow"
    name = type(result).__name__
    if name == "UnfulfilledObligationError":
        return "obligation"
    if name in ("PolicyDeniedError", "PolicyViolationError"):
        return "deny"
    return repr(result)[:120]


def decision_outcome(result: object) -> str:
    """The outcome of a peer's decision object (``allowed`` attribute)."""
    allowed = getattr(result, "allowed", None)
    if allowed is True:
        return "allow"
    if allowed is False:
        return "deny"
    return repr(result)[:120]


class Contestants:
    """Every contestant, built once: name -> (case -> zero-argument call), and its kind."""

    def __init__(self, directory: Path, workspace: Path, *, peers: bool) -> None:
        from jevqueue import PolicyEnforcementPoint, create_default_policy_decision_point
        from jevqueue.adapters import GenericAdapter
        from jevqueue.audit import SQLiteAuditLog

        self.context = context_for(workspace)
        self.cases = cases_for(workspace)
        self.collectors: list[AuditCollector] = []
        self.calls: dict[str, dict[str, Callable[[], Any]]] = {}
        self.outcome: dict[str, Callable[[object], str]] = {}
        # Contestants that fsync per call get fewer calls per round.
        self.slow: set[str] = set()
        self.logs: list[Any] = []

        def jevqueue(audit_logger: Any) -> Callable[[str, dict[str, Any]], Any]:
            pep = PolicyEnforcementPoint(
                create_default_policy_decision_point(), audit_logger=audit_logger
            )
            return adapter_caller(GenericAdapter(pep), self.context)

        collector = AuditCollector()
        self.collectors.append(collector)
        process_log = SQLiteAuditLog(directory / "process.sqlite3", durability="process")
        machine_log = SQLiteAuditLog(directory / "machine.sqlite3", durability="machine")
        default_log = SQLiteAuditLog(directory / "default.sqlite3")
        self.default_durability = default_log.durability
        self.logs += [process_log, machine_log, default_log]
        self.add("jevqueue", jevqueue(DiscardingLogger()))
        self.add("jevqueue + collector", jevqueue(collector))
        self.add("jevqueue + SQLite process-durable", jevqueue(process_log))
        self.add("jevqueue + SQLite machine-durable", jevqueue(machine_log), slow=True)
        if not peers:
            return

        try:
            import archmage
            import cedarpy
            from agent_os.policies.evaluator import PolicyEvaluator
            from agent_os.policies.schema import PolicyDocument
            from archmage.adapters import GenericAdapter as ArchmageAdapter
        except ImportError as error:
            raise SystemExit(
                f"the peers are not installed ({error}): run `make bench`, which builds "
                '.venv-bench with `pip install -e ".[all,bench]"`, or pass --no-peers'
            ) from error

        if archmage.__version__ != ARCHMAGE_VERSION:
            raise SystemExit(
                f"archmage-ai {archmage.__version__} is installed; this benchmark compares "
                f"with {ARCHMAGE_VERSION}: run `make bench` (it builds .venv-bench)"
            )

        def archmage_gate(logger: Any) -> Callable[[str, dict[str, Any]], Any]:
            pep = archmage.PolicyEnforcementPoint(
                archmage.create_default_policy_decision_point(), audit_logger=logger
            )
            return adapter_caller(ArchmageAdapter(pep), self.context)

        archmage_collector = AuditCollector()
        self.collectors.append(archmage_collector)
        self.add("archmage-ai", archmage_gate(DiscardingLogger()))
        self.add("archmage-ai + collector", archmage_gate(archmage_collector))
        self.add(
            "archmage-ai + JSONL fsync",
            archmage_gate(archmage.JsonlAuditLogger(directory / "archmage.jsonl")),
            slow=True,
        )

        evaluator = PolicyEvaluator(
            policies=[PolicyDocument.model_validate({"name": "bench", "rules": AGT_RULES})]
        )
        actor = self.context["actor_id"]

        def agt(tool: str, arguments: dict[str, Any]) -> Callable[[], Any]:
            def call() -> Any:
                return evaluator.evaluate(
                    {
                        "tool_name": tool,
                        "agent_id": actor,
                        "path": arguments.get("TargetFile", ""),
                        "arguments": arguments,
                    }
                )

            return call

        self.add("agent-governance-toolkit", agt, outcome=decision_outcome)

        policies = cedarpy.PolicySet.from_str(CEDAR_POLICIES)
        entities = cedarpy.Entities.from_json_str("[]")

        def cedar(tool: str, arguments: dict[str, Any]) -> Callable[[], Any]:
            def call() -> Any:
                return cedarpy.is_authorized(
                    {
                        "principal": {"type": "Agent", "id": actor},
                        "action": {"type": "Action", "id": tool},
                        "resource": {"type": "Tool", "id": tool},
                        "context": {
                            "path": arguments.get("TargetFile", ""),
                            "approved": False,
                        },
                    },
                    policies,
                    entities,
                )

            return call

        self.add("cedarpy", cedar, outcome=decision_outcome)

    def add(
        self,
        name: str,
        bind: Callable[[str, dict[str, Any]], Callable[[], Any]],
        *,
        slow: bool = False,
        outcome: Callable[[object], str] = adapter_outcome,
    ) -> None:
        self.calls[name] = {case: bind(tool, args) for case, (tool, args, _) in self.cases.items()}
        self.outcome[name] = outcome
        if slow:
            self.slow.add(name)

    def close(self) -> None:
        for log in self.logs:
            log.close()


def run(args: argparse.Namespace) -> dict[str, Any]:
    iterations, slow_iterations, warmup = (400, 60, 50) if args.quick else (2000, 300, 200)
    results: dict[str, Any] = {"load_before": load_line()}
    with tempfile.TemporaryDirectory(prefix="jevqueue-bench-") as temp:
        root = Path(temp)
        workspace = make_workspace(root)
        logs = root / "logs"
        logs.mkdir()
        contestants = Contestants(logs, workspace, peers=not args.no_peers)
        results["default_durability"] = contestants.default_durability
        names = list(contestants.calls)
        samples: dict[str, dict[str, list[Sample]]] = {}
        for case in CASES:

            def measure(name: str, case: str = case) -> Sample:
                for collector in contestants.collectors:
                    collector.events.clear()
                count = slow_iterations if name in contestants.slow else iterations
                # peers are 20-50x slower: fewer calls give them the same precision
                if name.startswith(("archmage", "agent-")):
                    count = max(slow_iterations, count // 5)
                return time_calls(
                    contestants.calls[name][case],
                    count,
                    warmup,
                    contestants.outcome[name],
                )

            samples[case] = run_rounds(names, measure, args.rounds, progress=case)
        results["samples"] = samples
        contestants.close()
        results["policy_file"] = policy_file_rounds(root, workspace, args, iterations, warmup)
    results["load_after"] = load_line()
    return results


def policy_file_rounds(
    root: Path, workspace: Path, args: argparse.Namespace, iterations: int, warmup: int
) -> dict[str, list[Sample]]:
    """What the five rules of the docs/policy.md example add to an allowed write."""
    from jevqueue import PolicyEnforcementPoint, create_default_policy_decision_point
    from jevqueue.adapters import GenericAdapter

    policy_file = root / "acme.toml"
    policy_file.write_text(EXAMPLE_POLICY, encoding="utf-8")
    tool, arguments, _ = cases_for(workspace)["allowed write"]
    context = context_for(workspace)
    calls = {
        label: adapter_caller(
            GenericAdapter(
                PolicyEnforcementPoint(
                    create_default_policy_decision_point(policy_files=files),
                    audit_logger=DiscardingLogger(),
                )
            ),
            context,
        )(tool, arguments)
        for label, files in (("defaults", []), ("defaults + acme.toml", [policy_file]))
    }
    return run_rounds(
        list(calls),
        lambda label: time_calls(calls[label], iterations, warmup, adapter_outcome),
        args.rounds,
        progress="policy file",
    )


def us(nanoseconds: float) -> str:
    return f"{nanoseconds / 1000:.1f}"


def figure(samples: list[Sample], field: str = "cpu_median") -> str:
    summary = summarise([getattr(sample, field) for sample in samples])
    return f"{us(summary.median)} [{us(summary.low)}-{us(summary.high)}]"


def ratio(mine: list[Sample], theirs: list[Sample], field: str = "cpu_median") -> Any:
    return summarise(
        [
            getattr(other, field) / getattr(own, field)
            for own, other in zip(mine, theirs, strict=True)
        ]
    )


# (our contestant, their contestant) for each comparison the report states.
PAIRS = {
    "no audit": ("jevqueue", "archmage-ai"),
    "collector": ("jevqueue + collector", "archmage-ai + collector"),
    "machine-durable (both fsync)": (
        "jevqueue + SQLite machine-durable",
        "archmage-ai + JSONL fsync",
    ),
    "process-durable vs fsync": ("jevqueue + SQLite process-durable", "archmage-ai + JSONL fsync"),
}


def report(results: dict[str, Any], command: str) -> bool:
    """Print the results as Markdown; return True when every target is met."""
    samples: dict[str, dict[str, list[Sample]]] = results["samples"]
    met = True
    rounds = len(next(iter(samples.values()))["jevqueue"])
    print(f"\nCommand: `{command}` ({rounds} rounds)  ")
    print(f"Before: {results['load_before']}  ")
    print(f"After: {results['load_after']}\n")
    names = list(next(iter(samples.values())))
    print("CPU per call, µs: median of the round medians [lowest-highest round]; outcome.\n")
    print("| contestant | " + " | ".join(CASES) + " |")
    print("|---|" + "---:|" * len(CASES))
    for name in names:
        cells = []
        for case, (_, _, expected) in CASES.items():
            runs = samples[case][name]
            outcomes = {sample.outcome for sample in runs}
            if name.startswith("jevqueue") and outcomes != {expected}:
                met = False
            cells.append(f"{figure(runs)} ({'/'.join(sorted(outcomes))})")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\nWall time per call, µs (median of the round medians [lowest-highest]):\n")
    print("| contestant | " + " | ".join(CASES) + " |")
    print("|---|" + "---:|" * len(CASES))
    for name in names:
        cells = [figure(samples[case][name], "wall_median") for case in CASES]
        print(f"| {name} | " + " | ".join(cells) + " |")
    have_peers = "archmage-ai" in names
    checks: list[tuple[str, bool]] = []
    for case in ("allowed write", "denied traversal"):
        cpu = summarise([s.cpu_median for s in samples[case]["jevqueue"]])
        limit = TARGETS[case]
        checks.append(
            (
                f"{case}, no audit, <= {limit:.0f} µs CPU: {us(cpu.median)} µs "
                f"(rounds {us(cpu.low)}-{us(cpu.high)})",
                cpu.median / 1000 <= limit,
            )
        )
    if have_peers:
        print("\nCPU ratios, archmage-ai over jevqueue, per round: median [lowest-highest].\n")
        print("| comparison | " + " | ".join(CASES) + " |")
        print("|---|" + "---:|" * len(CASES))
        default = f"jevqueue + SQLite {results['default_durability']}-durable"
        pairs = dict(PAIRS)
        pairs["durable defaults"] = (default, "archmage-ai + JSONL fsync")
        for label, (ours, theirs) in pairs.items():
            cells = []
            for case in CASES:
                r = ratio(samples[case][ours], samples[case][theirs])
                cells.append(f"{r.median:.1f}x [{r.low:.1f}-{r.high:.1f}]")
            print(f"| {label} | " + " | ".join(cells) + " |")
        print("\nWall-clock ratios, same pairs:\n")
        print("| comparison | " + " | ".join(CASES) + " |")
        print("|---|" + "---:|" * len(CASES))
        for label, (ours, theirs) in pairs.items():
            cells = []
            for case in CASES:
                r = ratio(samples[case][ours], samples[case][theirs], "wall_median")
                cells.append(f"{r.median:.1f}x [{r.low:.1f}-{r.high:.1f}]")
            print(f"| {label} | " + " | ".join(cells) + " |")
        for label in ("collector", "durable defaults"):
            ours, theirs = pairs[label]
            worst = min(
                (ratio(samples[case][ours], samples[case][theirs]).median, case)
                for case in TARGET_CASES
            )
            checks.append(
                (
                    f">= 10x archmage-ai, {label}, every target case (CPU): worst "
                    f"{worst[0]:.1f}x ({worst[1]})",
                    worst[0] >= TARGETS["speedup"],
                )
            )
    file_rounds = results["policy_file"]
    added = summarise(
        [
            with_file.cpu_median - base.cpu_median
            for base, with_file in zip(
                file_rounds["defaults"], file_rounds["defaults + acme.toml"], strict=True
            )
        ]
    )
    print(
        f"\nA policy file with the five rules of the docs/policy.md example adds "
        f"{us(added.median)} µs [{us(added.low)}-{us(added.high)}] of CPU to an allowed write "
        f"({figure(file_rounds['defaults'])} -> {figure(file_rounds['defaults + acme.toml'])} "
        "µs, no audit).\n"
    )
    for text, ok in checks:
        met = met and ok
        print(f"- {'met' if ok else 'MISSED'}: {text}")
    return met


def profile_jevqueue(count: int) -> None:
    import cProfile
    import pstats

    from jevqueue import PolicyEnforcementPoint, create_default_policy_decision_point
    from jevqueue.adapters import GenericAdapter

    with tempfile.TemporaryDirectory(prefix="jevqueue-bench-") as temp:
        workspace = make_workspace(Path(temp))
        context = context_for(workspace)
        gate = GenericAdapter(
            PolicyEnforcementPoint(
                create_default_policy_decision_point(), audit_logger=DiscardingLogger()
            )
        )
        for name, (tool, arguments, _) in cases_for(workspace).items():

            def loop() -> None:
                for _ in range(count):
                    # outcomes are checked by the main run
                    with contextlib.suppress(Exception):
                        gate.intercept_tool_call(tool, arguments, context)  # noqa: B023

            profiler = cProfile.Profile()
            profiler.runcall(loop)
            print(f"\n## profile: {name} ({count} calls, no audit)\n")
            pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (>= 5)")
    parser.add_argument("--quick", action="store_true", help="fewer calls per round")
    parser.add_argument("--no-peers", action="store_true", help="jevqueue alone")
    parser.add_argument("--profile", action="store_true", help="profile jevqueue and stop")
    args = parser.parse_args()
    if args.profile:
        profile_jevqueue(5000)
        return
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    results = run(args)
    command = "python bench/policy.py " + " ".join(sys.argv[1:])
    if not report(results, command.strip()):
        raise SystemExit(1)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
