"""Shared pieces for the tests of `jevqueue serve`: a real inbox, reviewers with real keys,
requests filed from real ApprovalRequests, and a browser-like client that logs in."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from jevqueue.approvals import (
    InboxRequest,
    InboxState,
    Requester,
    SQLiteApprovalInbox,
    generate_key_pair,
)
from jevqueue.policy import (
    Action,
    ApprovalQuorum,
    ApprovalRequest,
    Origin,
    Provenance,
    Source,
    Verdict,
    generic_registry,
)

SERVE_MISSING = 'starlette is not installed: pip install "jevqueue[serve]"'
BASE = "http://testserver"
PATIENT = 60.0  # seconds any wait may take before it is a failure, on a loaded machine
REVIEWER_NAMES = ("alice", "bob", "coding-agent")
CONTEXT = {
    "task_id": "task-42",
    "actor_id": "coding-agent",
    "workspace": "/workspace/project",
    "git_sha": "0123456789abcdef0123456789abcdef01234567",
}
_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
_DIGEST = re.compile(r'name="action_digest" value="([^"]+)"')


def csrf_of(html: str) -> str:
    """The CSRF token a page's forms carry."""
    found = _CSRF.search(html)
    assert found, "the page carries no CSRF token"
    return found.group(1)


def digest_of(html: str) -> str:
    """The action digest the approve form carries."""
    found = _DIGEST.search(html)
    assert found, "the page carries no approve form"
    return found.group(1)


@dataclass
class Reviewer:
    name: str
    token: str
    key: Path
    public_key: Path


@pytest.fixture
def inbox(tmp_path: Path) -> Iterator[SQLiteApprovalInbox]:
    store = SQLiteApprovalInbox(tmp_path / "inbox.sqlite3")
    yield store
    store.close()


@pytest.fixture
def reviewers_file(tmp_path: Path) -> tuple[Path, dict[str, Reviewer]]:
    """A reviewers file for alice, bob and coding-agent (the requests' own actor)."""
    from jevqueue.serve._reviewers import hash_token, new_login_token, render_reviewers_file

    folder = tmp_path / "reviewers"
    found: dict[str, Reviewer] = {}
    for name in REVIEWER_NAMES:
        private, public = generate_key_pair(folder / "keys" / f"{name}.key")
        found[name] = Reviewer(name, new_login_token(), private, public)
    path = folder / "reviewers.toml"
    path.write_text(
        render_reviewers_file(
            (r.name, hash_token(r.token), f"keys/{r.name}.key") for r in found.values()
        ),
        encoding="utf-8",
    )
    return path, found


@pytest.fixture
def people(reviewers_file: tuple[Path, dict[str, Reviewer]]) -> dict[str, Reviewer]:
    return reviewers_file[1]


@pytest.fixture
def app(inbox: SQLiteApprovalInbox, reviewers_file: tuple[Path, dict[str, Reviewer]]) -> Any:
    from jevqueue.serve import Reviewers, create_app

    return create_app(inbox, Reviewers.load(reviewers_file[0]))


@pytest.fixture
def browser(app: Any) -> Callable[..., Any]:
    """A new browser: a TestClient that posts from the server's own origin."""
    from starlette.testclient import TestClient

    clients: list[Any] = []

    def open_browser(origin: str | None = BASE) -> Any:
        headers = {"origin": origin} if origin is not None else {}
        client = TestClient(app, base_url=BASE, headers=headers, follow_redirects=False)
        clients.append(client)
        return client

    yield open_browser
    for client in clients:
        client.close()


@pytest.fixture
def login(browser: Callable[..., Any], people: dict[str, Reviewer]) -> Callable[[str], Any]:
    """A browser logged in as the named reviewer."""

    def log_in(name: str) -> Any:
        client = browser()
        form = client.get("/login")
        assert form.status_code == 200
        answer = client.post(
            "/login",
            data={
                "reviewer": name,
                "token": people[name].token,
                "csrf_token": csrf_of(form.text),
            },
        )
        assert answer.status_code == 303, answer.text
        assert answer.headers["location"] == "/"
        return client

    return log_in


def approval_request(
    tool: str = "run_command",
    arguments: dict[str, Any] | None = None,
    *,
    context: dict[str, Any] | None = None,
    provenance: Provenance | None = None,
    reason: str = "a shell command needs a person",
    required: int = 1,
    group: tuple[str, ...] = (),
) -> ApprovalRequest:
    action = Action.build(
        generic_registry(),
        tool,
        arguments or {"CommandLine": "make deploy", "Cwd": "/workspace/project"},
        context or CONTEXT,
        provenance=provenance,
    )
    quorum = ApprovalQuorum(
        count=required,
        group="ops" if group else None,
        approvers=frozenset(group) if group else None,
    )
    verdict = Verdict.allow_with_obligations(["explicit_approval"], reason, quorum=quorum)
    return ApprovalRequest.of(action, verdict.bound(action.digest, ""), call_id="call-7")


def untrusted_provenance() -> Provenance:
    return Provenance(
        (
            Origin(
                "CommandLine",
                "untrusted",
                (Source("read_inbox", "c1", "", "untrusted"),),
                kind="address",
                found="eve@attacker.example",
            ),
        )
    )


def file_request(
    inbox: SQLiteApprovalInbox,
    asked: ApprovalRequest | None = None,
    *,
    expires_in: timedelta = timedelta(minutes=15),
    framework: str = "langgraph",
    session_id: str = "run-9",
) -> InboxRequest:
    asked = asked or approval_request()
    requester = Requester.of(asked, framework=framework, session_id=session_id)
    return inbox.file(asked, requester=requester, expires_in=expires_in)


def wait_until_expired(inbox: SQLiteApprovalInbox, request_id: str) -> None:
    deadline = time.monotonic() + PATIENT
    while inbox.get(request_id).state is not InboxState.EXPIRED:
        assert time.monotonic() < deadline, "the request never read as expired"
        time.sleep(0.05)


def free_port() -> int:
    """A loopback port nobody listens on (it was free a moment ago)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running_serve(inbox_path: Path, reviewers_path: Path, log_path: Path) -> Iterator[str]:
    """`jevqueue serve` in a process of its own on a free loopback port; yields its URL
    once it accepts connections, and stops it afterwards."""
    port = free_port()
    log = log_path.open("w+", encoding="utf-8")
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from jevqueue.cli import main; main()",
            "serve",
            "--inbox",
            str(inbox_path),
            "--reviewers",
            str(reviewers_path),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline = time.monotonic() + PATIENT
        while True:
            assert process.poll() is None, f"jevqueue serve exited: {log_path.read_text()}"
            assert time.monotonic() < deadline, f"nothing listens: {log_path.read_text()}"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=PATIENT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=PATIENT)
        log.close()
