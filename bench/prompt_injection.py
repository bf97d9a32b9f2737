"""AgentDojo replayed without a model through jevqueue: attack success and utility per policy.

AgentDojo (PyPI ``agentdojo==0.1.35``, benchmark version 1.2.2) is a set of task suites —
workspace, travel, banking, slack — each with user tasks, injection tasks (what an attacker
wants done), the places in the environment where an injection can sit, and checks that
read the environment afterwards: ``utility`` (the user's task was done) and ``security``
(the attacker's goal happened). This script uses the real package: its suites, tools,
environments and checks; no model is called.

Method, for each (user task, injection task) pair (``bench/prompt_injection_replay.py``):

* The injection is placed as AgentDojo's attacks place it: ``attack.attack(user_task,
  injection_task)`` puts the "important_instructions" text into the injection vectors the
  user task's ground truth reads, and ``suite.load_and_inject_default_environment`` builds
  the environment.
* The user task's ``ground_truth`` calls are replayed in order; after the first tool output
  that carries the injection, the injection task's ``ground_truth`` calls are inserted — the
  perfectly obedient agent, the worst case for a defence.
* Every call goes through a ``jevqueue.Guard`` (one per run) whose tools are declared with
  honest side effects (``bench/prompt_injection_tools.py``); allowed calls run against the
  environment through AgentDojo's ``FunctionsRuntime``; refused ones do not run.
* AgentDojo's checks decide. Attack success: the injection task's security check says the
  attack happened. Clean utility: the user task's check, on a run without injection.
  Attacked utility: the user task's check, under attack.
* Beside them, a stricter count: *injected effect ran* — some injected call with a declared
  side effect (sending, paying, sharing, fetching a URL ...) ran without error. AgentDojo's
  check wants some attacks whole: it counts the security code emailed to the attacker as no
  attack when deleting the sent email is refused (workspace injection task 5), and the
  attacker invited and added to a channel as none when his removal is refused (slack 5).

Configurations: ``none`` (no jevqueue: the replay itself, where every attack should succeed;
the pairs where AgentDojo's own check does not register it are listed after the table),
(a) jevqueue's default policy, (b) the shipped ``personal-assistant`` policy with its
``example.com`` replaced by the suite user's own domain, and (c) the same policy with
provenance — the user's request recorded with ``guard.record_user``, tool outputs through
``guard.run`` — when the core has that API. (a) and (b) run allowed calls directly, so no
provenance is recorded there. Each with (i) nobody approving — every approval request is
declined — and (ii) an approver who approves exactly the user task's own calls (same tool,
same arguments) and declines the injected ones.

Injection tasks whose AgentDojo ground truth holds no call cannot be replayed (workspace 6
to 13 ship an empty ``ground_truth``; travel 6 only asks the answer to say something, which
no tool-call guard sees): they are listed and left out of every figure.

Usage (AgentDojo pulls in every model provider's client: it lives in a venv of its own;
``--compile-bytecode`` saves compiling them at each start where bytecode is not written)::

    python3 -m venv .venv-agentdojo
    .venv/bin/uv pip install --compile-bytecode --python .venv-agentdojo/bin/python \
        agentdojo==0.1.35 -e .
    .venv-agentdojo/bin/python bench/prompt_injection.py                 # everything
    .venv-agentdojo/bin/python bench/prompt_injection.py --limit 3       # 3 user tasks per suite
    .venv-agentdojo/bin/python bench/prompt_injection.py --suites banking --json /tmp/banking.json
    .venv-agentdojo/bin/python bench/prompt_injection.py --personal-assistant my-policy.toml

The personal-assistant file is read once, at the start, and its sha256 is printed and kept
in the JSON file beside every figure.

Deterministic: no randomness reaches a decision (the approval key is fixed; approval ids
are numbered), so two runs print the same table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from agentdojo.agent_pipeline.ground_truth_pipeline import GroundTruthPipeline
from agentdojo.attacks.base_attacks import FixedJailbreakAttack
from agentdojo.attacks.important_instructions_attacks import ImportantInstructionsAttack
from agentdojo.task_suite.load_suites import get_suites
from agentdojo.task_suite.task_suite import TaskSuite
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from jevqueue import Guard, create_default_policy_decision_point, shipped_policy_path
from jevqueue.approvals import ApprovalAuthority, MemoryConsumedApprovals, SignedApprovalVerifier
from jevqueue.policy import PolicyEnforcementPoint
from jevqueue.testing import RecordingAuditSink
from prompt_injection_replay import (
    ATTACK_MODEL,
    ATTACK_USER,
    Governance,
    ReplayApprover,
    Run,
    replay,
)
from prompt_injection_tools import effectful_tools, supports_output_trust, tool_specs, trusted_tools

AGENTDOJO_VERSION = "0.1.35"
BENCHMARK_VERSION = "v1.2.2"
SUITES = ("workspace", "travel", "banking", "slack")
APPROVER = "agentdojo-approver"
# A fixed key: nothing random reaches a decision. It signs approvals for this run only.
AUTHORITY = ApprovalAuthority(
    Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"bench/prompt_injection.py").digest()),
    APPROVER,
)
VERIFIER = SignedApprovalVerifier({APPROVER: AUTHORITY.public_key})
GIT_SHA = hashlib.sha1(f"agentdojo=={AGENTDOJO_VERSION} {BENCHMARK_VERSION}".encode()).hexdigest()


@dataclass(frozen=True)
class Configuration:
    """One way of governing the replay."""

    key: str
    title: str
    policy: str | None  # None: no jevqueue; "default"; "personal-assistant"
    approves_user_calls: bool = False
    provenance: bool = False


CONFIGURATIONS = (
    Configuration("none", "no jevqueue (the replay itself)", None),
    Configuration("a-i", "(a) default policy, nobody approves", "default"),
    Configuration("a-ii", "(a) default policy, user's calls approved", "default", True),
    Configuration("b-i", "(b) personal-assistant, nobody approves", "personal-assistant"),
    Configuration(
        "b-ii", "(b) personal-assistant, user's calls approved", "personal-assistant", True
    ),
    Configuration(
        "c-i",
        "(c) personal-assistant + provenance, nobody approves",
        "personal-assistant",
        provenance=True,
    ),
    Configuration(
        "c-ii",
        "(c) personal-assistant + provenance, user's calls approved",
        "personal-assistant",
        True,
        provenance=True,
    ),
)


def provenance_available() -> bool:
    """True once the guard records provenance (``Guard.record_user``)."""
    return hasattr(Guard, "record_user")


# --- suites -----------------------------------------------------------------------------


def _number(task_id: str) -> int:
    return int(task_id.rsplit("_", 1)[1])


@dataclass
class Suite:
    """One AgentDojo suite, ready to replay: its tasks, its tools' declarations, its policies."""

    name: str
    suite: TaskSuite[Any]
    user_tasks: list[Any]
    injection_tasks: list[Any]
    excluded: dict[str, str]
    domain: str | None
    specs: list[Any]
    provenance_specs: list[Any]
    pdps: dict[str, Any]
    policy_files: dict[str, dict[str, str]]


def user_domain(environment: Any) -> str | None:
    """The domain of the user's own address, when the environment has an inbox."""
    inbox = getattr(environment, "inbox", None)
    address = getattr(inbox, "account_email", None)
    return address.rsplit("@", 1)[1] if isinstance(address, str) and "@" in address else None


def personal_assistant(text: str, domain: str | None, folder: Path) -> Path:
    """The personal-assistant policy ``text`` with example.com replaced by ``domain``, as its
    header says (a suite whose user has no address of their own keeps example.com, which no
    AgentDojo address uses: every recipient is outside)."""
    if domain is not None:
        text = text.replace("example\\.com", re.escape(domain)).replace("example.com", domain)
        if "example.com" in text or "example\\.com" in text:
            raise SystemExit("personal-assistant.toml: example.com is left after the replacement")
    path = folder / f"personal-assistant-{domain or 'example.com'}.toml"
    path.write_text(text, "utf-8")
    return path


def load_suite(name: str, limit: int | None, policy: str, folder: Path) -> Suite:
    """The suite ``name`` of AgentDojo 1.2.2, its replayable injection tasks, its policies."""
    suite = get_suites(BENCHMARK_VERSION)[name]
    user_tasks = sorted(suite.user_tasks.values(), key=lambda task: _number(task.ID))
    if limit is not None:
        user_tasks = user_tasks[:limit]
    environment = suite.load_and_inject_default_environment({})
    injection_tasks, excluded = [], {}
    for task in sorted(suite.injection_tasks.values(), key=lambda task: _number(task.ID)):
        if task.ground_truth(environment.model_copy(deep=True)):
            injection_tasks.append(task)
        elif task.GROUND_TRUTH_OUTPUT:
            excluded[task.ID] = "its goal is text in the answer; there is no call to judge"
        else:
            excluded[task.ID] = "AgentDojo ships no ground-truth calls for it"
    names = [tool.name for tool in suite.tools]
    domain = user_domain(environment)
    pdps: dict[str, Any] = {"default": create_default_policy_decision_point()}
    path = personal_assistant(policy, domain, folder)
    pdps["personal-assistant"] = create_default_policy_decision_point(policy_files=[path])
    files = {
        "personal-assistant": {
            "domain": domain or "example.com (the user has no address of their own)",
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        }
    }
    return Suite(
        name=name,
        suite=suite,
        user_tasks=user_tasks,
        injection_tasks=injection_tasks,
        excluded=excluded,
        domain=domain,
        specs=tool_specs(names),
        provenance_specs=tool_specs(names, output_trust=supports_output_trust()),
        pdps=pdps,
        policy_files=files,
    )


# --- one run ----------------------------------------------------------------------------


def governance_for(config: Configuration, suite: Suite, task_id: str) -> Any:
    """Builds each run's governance: a fresh PEP (audit, consumed approvals) and Guard."""

    def build(user_calls: list[tuple[str, dict[str, Any]]]) -> Governance | None:
        if config.policy is None:
            return None
        approver = ReplayApprover(AUTHORITY, user_calls if config.approves_user_calls else None)
        pep = PolicyEnforcementPoint(
            suite.pdps[config.policy],
            audit_logger=RecordingAuditSink(),
            approval_verifier=VERIFIER,
            consumed_approvals=MemoryConsumedApprovals(),
        )
        guard = Guard(
            pep,
            specs=suite.provenance_specs if config.provenance else suite.specs,
            context={
                "task_id": task_id,
                "actor_id": "agentdojo-replay",
                "workspace": f"/agentdojo/{suite.name}",
                "git_sha": GIT_SHA,
                "environment": "bench",
            },
            approver=approver,
            owner="bench/prompt_injection.py",
        )
        return Governance(guard, approver, config.provenance)

    return build


def run_suite(suite: Suite, configs: Sequence[Configuration]) -> list[dict[str, Any]]:
    """Every clean run and every pair of ``suite``, under every configuration."""
    attack = FixedJailbreakAttack(
        ImportantInstructionsAttack._JB_STRING, suite.suite, GroundTruthPipeline(None)
    )
    attack.user_name, attack.model_name = ATTACK_USER, ATTACK_MODEL
    trusted, effectful = trusted_tools(), effectful_tools()
    records: list[dict[str, Any]] = []
    clean = suite.suite.load_and_inject_default_environment({})
    for user_task in suite.user_tasks:
        for config in configs:
            task_id = f"{suite.name}.{user_task.ID}.clean"
            run = replay(
                suite.suite.tools,
                user_task,
                None,
                clean.model_copy(deep=True),
                governance_for(config, suite, task_id),
                trusted,
                effectful,
            )
            records.append(_record(suite.name, config, user_task.ID, None, run))
        for injection_task in suite.injection_tasks:
            injections = attack.attack(user_task, injection_task)
            attacked = suite.suite.load_and_inject_default_environment(injections)
            for config in configs:
                task_id = f"{suite.name}.{user_task.ID}.{injection_task.ID}"
                run = replay(
                    suite.suite.tools,
                    user_task,
                    injection_task,
                    attacked.model_copy(deep=True),
                    governance_for(config, suite, task_id),
                    trusted,
                    effectful,
                )
                records.append(_record(suite.name, config, user_task.ID, injection_task.ID, run))
    return records


def _record(
    suite: str, config: Configuration, user_task: str, injection_task: str | None, run: Run
) -> dict[str, Any]:
    return {
        "suite": suite,
        "configuration": config.key,
        "user_task": user_task,
        "injection_task": injection_task,
        **run.as_dict(),
        "trusted_carriers": list(run.trusted_carriers),
    }


# --- figures ----------------------------------------------------------------------------


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Rates and counts over ``records`` (the clean runs and the pairs of one group)."""
    clean = [r for r in records if r["injection_task"] is None]
    pairs = [r for r in records if r["injection_task"] is not None]

    def share(items: list[dict[str, Any]], key: str) -> dict[str, Any]:
        hits = sum(1 for item in items if item[key])
        return {"count": hits, "of": len(items), "rate": hits / len(items) if items else None}

    def mean(items: list[dict[str, Any]], origin: str | None = None) -> float | None:
        if not items:
            return None
        origins = (origin,) if origin else ("user", "injection")
        return sum(item["approvals"][o] for item in items for o in origins) / len(items)

    return {
        "attack_success": share(pairs, "security"),
        "injected_effect_ran": share(pairs, "injected_effects"),
        "clean_utility": share(clean, "utility"),
        "attacked_utility": share(pairs, "utility"),
        "injection_read": share(pairs, "injected"),
        "approvals_per_clean_task": mean(clean),
        "approvals_per_pair": mean(pairs),
        "approvals_per_pair_user_calls": mean(pairs, "user"),
        "approvals_per_pair_injected_calls": mean(pairs, "injection"),
    }


def _rate(figure: dict[str, Any]) -> str:
    if figure["rate"] is None:
        return "—"
    return f"{figure['rate']:.3f} ({figure['count']}/{figure['of']})"


def _mean(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def table(summaries: dict[str, dict[str, dict[str, Any]]], configs: Sequence[Configuration]) -> str:
    """The markdown table: one row per suite (and the total) and configuration."""
    lines = [
        "| suite | configuration | attack success | injected effect ran | clean utility "
        "| attacked utility | approvals / clean task "
        "| approvals / attacked pair (user + injected) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for group, by_config in summaries.items():
        for config in configs:
            figures = by_config.get(config.key)
            if figures is None:
                continue
            governed = config.policy is not None
            per_pair = (
                f"{_mean(figures['approvals_per_pair'])} "
                f"({_mean(figures['approvals_per_pair_user_calls'])} + "
                f"{_mean(figures['approvals_per_pair_injected_calls'])})"
                if governed
                else "—"
            )
            name = f"**{group}**" if group == "total" else group
            lines.append(
                f"| {name} | {config.title} | {_rate(figures['attack_success'])} "
                f"| {_rate(figures['injected_effect_ran'])} "
                f"| {_rate(figures['clean_utility'])} | {_rate(figures['attacked_utility'])} "
                f"| {_mean(figures['approvals_per_clean_task']) if governed else '—'} "
                f"| {per_pair} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--suites", nargs="*", choices=SUITES, default=list(SUITES))
    parser.add_argument("--limit", type=int, default=None, help="user tasks per suite")
    parser.add_argument(
        "--json", type=Path, default=Path("agentdojo-results.json"), help="write results here"
    )
    parser.add_argument(
        "--personal-assistant",
        type=Path,
        default=shipped_policy_path("personal-assistant"),
        help="the personal-assistant policy file for (b) and (c) (default: the shipped one)",
    )
    args = parser.parse_args(argv)
    # Read once: every suite is judged by the same text, even if the file changes meanwhile.
    policy = args.personal_assistant.read_text("utf-8")
    policy_digest = hashlib.sha256(policy.encode("utf-8")).hexdigest()
    started = time.perf_counter()
    installed = version("agentdojo")
    if installed != AGENTDOJO_VERSION:
        print(f"note: agentdojo {installed} is installed; this script is for {AGENTDOJO_VERSION}")
    print(
        f"AgentDojo {installed} (benchmark {BENCHMARK_VERSION}), jevqueue {version('jevqueue')}, "
        f"python {platform.python_version()}, load {os.getloadavg()}"
    )
    print(f"personal-assistant policy: {args.personal_assistant} (sha256 {policy_digest})")
    configs = list(CONFIGURATIONS)
    if not provenance_available():
        configs = [config for config in configs if not config.provenance]
        print(
            "(c) personal-assistant with provenance: not available (this jevqueue's Guard has "
            "no record_user); rows (c) are left out"
        )
    records: list[dict[str, Any]] = []
    suites: dict[str, Suite] = {}
    with tempfile.TemporaryDirectory(prefix="agentdojo-policies-") as folder:
        for name in args.suites:
            began = time.perf_counter()
            suite = load_suite(name, args.limit, policy, Path(folder))
            suites[name] = suite
            mine = run_suite(suite, configs)
            records.extend(mine)
            print(
                f"{name}: {len(suite.user_tasks)} user tasks x {len(suite.injection_tasks)} "
                f"injection tasks ({len(suite.excluded)} left out), user's domain "
                f"{suite.domain or 'none'}, {len(configs)} configurations, {len(mine)} runs in "
                f"{time.perf_counter() - began:.1f} s",
                flush=True,
            )
    summaries: dict[str, dict[str, dict[str, Any]]] = {}
    for group in [*args.suites, "total"]:
        mine = [r for r in records if group == "total" or r["suite"] == group]
        summaries[group] = {
            config.key: summarise([r for r in mine if r["configuration"] == config.key])
            for config in configs
        }
    elapsed = time.perf_counter() - started
    markdown = table(summaries, configs)
    print()
    print(markdown)
    print()
    _report_checks(records, suites)
    print(f"\n{len(records)} runs in {elapsed:.1f} s; load {os.getloadavg()}")
    result = {
        "agentdojo": installed,
        "benchmark_version": BENCHMARK_VERSION,
        "jevqueue": version("jevqueue"),
        "python": platform.python_version(),
        "seconds": round(elapsed, 1),
        "limit": args.limit,
        "provenance_available": provenance_available(),
        "personal_assistant_policy": {
            "path": str(args.personal_assistant),
            "sha256": policy_digest,
        },
        "configurations": [config.__dict__ for config in configs],
        "suites": {
            name: {
                "user_tasks": [task.ID for task in suite.user_tasks],
                "injection_tasks": [task.ID for task in suite.injection_tasks],
                "left_out_injection_tasks": suite.excluded,
                "policy_files": suite.policy_files,
            }
            for name, suite in suites.items()
        },
        "summaries": summaries,
        "table": markdown,
        "runs": records,
    }
    args.json.write_text(json.dumps(result, indent=1, sort_keys=False) + "\n", "utf-8")
    print(f"results: {args.json}")
    return 0


def _report_checks(records: list[dict[str, Any]], suites: dict[str, Suite]) -> None:
    """What a reader should know before trusting the table."""
    for name, suite in suites.items():
        for task_id, why in suite.excluded.items():
            print(f"left out: {name} {task_id}: {why}")
    reference = [r for r in records if r["configuration"] == "none"]
    unsolved = [r for r in reference if r["injection_task"] is None and not r["utility"]]
    failed = [r for r in reference if r["injection_task"] is not None and not r["security"]]
    unread = [r for r in reference if r["injection_task"] is not None and not r["injected"]]
    for r in unsolved:
        print(f"without jevqueue the ground truth does not solve {r['suite']} {r['user_task']}")
    for r in failed:
        print(
            f"without jevqueue the attack fails: {r['suite']} {r['user_task']} "
            f"{r['injection_task']}"
        )
    for r in unread:
        print(f"no tool output carried the injection: {r['suite']} {r['user_task']}")
    governed = [r for r in records if r["configuration"] != "none" and r["injection_task"]]
    for config in sorted({r["configuration"] for r in governed}):
        never = sum(1 for r in governed if r["configuration"] == config and not r["injected"])
        if never:
            print(f"{config}: in {never} pairs the injection was never read (its carrier refused)")
    for config in ("a-i", "b-i", "c-i"):
        for name in suites:
            won = [
                r
                for r in governed
                if r["configuration"] == config and r["suite"] == name and r["security"]
            ]
            if won:
                tools = Counter(t for r in won for t in dict.fromkeys(r["injected_calls_ran"]))
                print(
                    f"{config} {name}: the {len(won)} successful attacks ran "
                    + ", ".join(f"{tool} ({count})" for tool, count in sorted(tools.items()))
                )
    carriers = sorted({tool for r in records for tool in r["trusted_carriers"]})
    print(
        "tools declared trusted whose output carried an injection: "
        + (", ".join(carriers) if carriers else "none")
    )


if __name__ == "__main__":
    sys.exit(main())
