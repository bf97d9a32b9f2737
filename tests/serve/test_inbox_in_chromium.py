"""Reviewers decide in a real browser: Debian's Chromium, driven by Playwright, against
`jevqueue serve` in a process of its own, while a real LangGraph agent waits on the inbox.

The agent runs in a thread with `InboxApprover` as its approver and a scripted chat model
that calls `run_command` once; the reviewers log in to the served pages, read the request
and click. Chromium is launched with the flags that keep it off the network, and is given
no address but 127.0.0.1.

Set JEVQUEUE_SCREENSHOTS to a folder to keep screenshots of the pending list and a request
page (docs/images holds the ones in the docs).
"""

from __future__ import annotations

import http.server
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason='starlette is not installed: pip install "jevqueue[serve]"')
pytest.importorskip("uvicorn", reason='uvicorn is not installed: pip install "jevqueue[serve]"')
pytest.importorskip(
    "langgraph", reason='the LangGraph extra is not installed: pip install "jevqueue[langgraph]"'
)
pytest.importorskip("playwright", reason='playwright is not installed: pip install "jevqueue[dev]"')

from jevqueue import Governor, PolicyEnforcementPoint
from jevqueue.approvals import (
    InboxApprover,
    InboxState,
    MemoryConsumedApprovals,
    SignedApprovalVerifier,
    SQLiteApprovalInbox,
    load_public_key,
)
from jevqueue.governor import Thresholds
from jevqueue.plugins.langgraph import create_governed_agent, tool_spec
from jevqueue.plugins.langgraph.testing import ScriptedChatModel, scripted_tool_call
from jevqueue.policy import create_default_policy_decision_point
from jevqueue.testing.recording_audit import RecordingAuditSink
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from playwright.sync_api import Browser, Page, sync_playwright

from .conftest import PATIENT, Reviewer, running_serve

pytestmark = pytest.mark.network_allowed  # the served inbox and Chromium, on 127.0.0.1 only

GIT_SHA = "0123456789abcdef0123456789abcdef01234567"
REQUESTER = "coding-agent"  # the agent's actor, and a reviewer too: it may not approve itself
# Everything that would reach beyond this machine is switched off, and every host name but
# 127.0.0.1 resolves to nothing.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--metrics-recording-only",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
]
TWO_OF_OPS = """
[approvers]
ops = ["alice", "bob", "coding-agent"]

[[rule]]
id = "acme.deploys"
effect = "require"
obligations = ["explicit_approval"]
reason = "a deploy needs two people from ops"
tools = ["run_command"]
approvers = "ops"
approvals = 2
"""


def _chromium() -> str:
    found = os.environ.get("JEVQUEUE_CHROMIUM") or shutil.which("chromium") or ""
    if not found:
        if os.environ.get("CI"):
            pytest.fail(
                "no Chromium: make test installs Debian's chromium (or set JEVQUEUE_CHROMIUM)"
            )
        pytest.skip("no Chromium: install chromium or set JEVQUEUE_CHROMIUM")
    return found


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=_chromium(), headless=True, args=CHROMIUM_FLAGS
        )
        try:
            yield browser
        finally:
            browser.close()


# --- the agent ------------------------------------------------------------------------------


class _FixedBallot:
    def __init__(self, scores: Mapping[str, float]) -> None:
        self.scores = dict(scores)

    def score(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> Mapping[str, float]:
        return dict(self.scores)


@dataclass
class Agent:
    """A governed LangGraph agent, running in a thread until its one call is settled."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    audit: RecordingAuditSink = field(default_factory=RecordingAuditSink)
    thread: threading.Thread | None = None

    def finished(self) -> dict[str, Any]:
        assert self.thread is not None
        self.thread.join(timeout=PATIENT)
        assert not self.thread.is_alive(), "the agent never finished"
        (result,) = self.results
        return result

    def tool_reply(self) -> ToolMessage:
        (message,) = [m for m in self.finished()["messages"] if isinstance(m, ToolMessage)]
        return message


def start_agent(
    workspace: Path,
    inbox_path: Path,
    trusted: Mapping[str, Path],
    *,
    policy_text: str = "",
    expires_in: timedelta = timedelta(minutes=4),
) -> Agent:
    agent = Agent()

    def run_command(command: str, cwd: str) -> str:
        """Run a shell command in a directory of the workspace and return its output."""
        agent.runs.append({"command": command, "cwd": cwd})
        return f"ran {command}"

    tool = StructuredTool.from_function(run_command)
    policy_files = []
    if policy_text:
        policy_file = workspace.parent / f"policy-{uuid.uuid4().hex[:8]}.toml"
        policy_file.write_text(policy_text, encoding="utf-8")
        policy_files.append(policy_file)
    pep = PolicyEnforcementPoint(
        create_default_policy_decision_point(policy_files=policy_files),
        audit_logger=agent.audit,
        approval_verifier=SignedApprovalVerifier(
            {name: load_public_key(path) for name, path in trusted.items()}
        ),
        consumed_approvals=MemoryConsumedApprovals(),
    )
    model = ScriptedChatModel(
        steps=[scripted_tool_call("run_command", {"command": "make deploy", "cwd": "."}), "Done."]
    )
    app = create_governed_agent(
        model,
        [tool],
        pep=pep,
        specs=[
            tool_spec(
                tool, side_effects={"shell_command"}, cwd_field="cwd", required_path_fields=["cwd"]
            )
        ],
        context={
            "task_id": "release-7",
            "actor_id": REQUESTER,
            "workspace": str(workspace),
            "git_sha": GIT_SHA,
        },
        approver=InboxApprover(
            inbox_path,
            expires_in=expires_in,
            poll_interval=0.1,
            framework="langgraph",
            session_id="thread-1",
        ),
        governor=Governor(
            _FixedBallot({"run_command": 0.95}),
            thresholds=Thresholds(confident=0.6, margin=0.2, floor=0.2),
        ),
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": uuid.uuid4().hex}}
    agent.thread = threading.Thread(
        target=lambda: agent.results.append(
            app.invoke({"messages": [HumanMessage("deploy the release")]}, config)
        ),
        daemon=True,
    )
    agent.thread.start()
    return agent


# --- the served inbox -----------------------------------------------------------------------


@dataclass
class Served:
    base: str
    inbox_path: Path
    workspace: Path
    people: dict[str, Reviewer]

    def keys(self, *names: str) -> dict[str, Path]:
        return {name: self.people[name].public_key for name in names}

    def pending_one(self) -> str:
        """The id of the one pending request, once the agent filed it."""
        deadline = time.monotonic() + PATIENT
        with SQLiteApprovalInbox(self.inbox_path) as inbox:
            while time.monotonic() < deadline:
                found = inbox.requests()
                if found:
                    (request,) = found
                    return request.request_id
                time.sleep(0.05)
        raise AssertionError("the agent never filed its request")

    def state(self, request_id: str) -> InboxState:
        with SQLiteApprovalInbox(self.inbox_path) as inbox:
            return inbox.get(request_id).state

    def decisions(self, request_id: str) -> list[tuple[str, bool]]:
        with SQLiteApprovalInbox(self.inbox_path) as inbox:
            return [(d.reviewer, d.approve) for d in inbox.get(request_id).decisions]


@pytest.fixture
def served(tmp_path: Path, reviewers_file: tuple[Path, dict[str, Reviewer]]) -> Iterator[Served]:
    """`jevqueue serve` in a process of its own, on a free loopback port."""
    workspace = tmp_path / "project"
    workspace.mkdir()
    inbox_path = tmp_path / "inbox.sqlite3"
    SQLiteApprovalInbox(inbox_path).close()
    with running_serve(inbox_path, reviewers_file[0], tmp_path / "serve.log") as base:
        yield Served(base, inbox_path, workspace, reviewers_file[1])


@pytest.fixture
def new_page(chromium: Browser) -> Iterator[Callable[[], Page]]:
    """A page in a browser context of its own (its own cookies), closed afterwards."""
    contexts: list[Any] = []

    def open_page() -> Page:
        context = chromium.new_context()
        context.set_default_timeout(PATIENT * 1000)
        contexts.append(context)
        return context.new_page()

    yield open_page
    for context in contexts:
        context.close()


def log_in(page: Page, served: Served, name: str) -> None:
    page.goto(f"{served.base}/login")
    page.fill("#reviewer", name)
    page.fill("#token", served.people[name].token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{served.base}/")
    assert page.locator("form.logout").count() == 1


def log_out(page: Page) -> None:
    page.click("form.logout button")
    page.wait_for_url("**/login")


def open_request(page: Page, served: Served, request_id: str) -> None:
    page.goto(f"{served.base}/")
    page.click(f'a[href="/requests/{request_id}"]')
    page.wait_for_url(f"{served.base}/requests/{request_id}")


def approve(page: Page) -> None:
    page.click("button.approve")
    page.wait_for_load_state()


def _screenshot(page: Page, name: str) -> None:
    folder = os.environ.get("JEVQUEUE_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / name), full_page=True)


# --- the tests ------------------------------------------------------------------------------


def test_a_reviewer_approves_in_the_browser_and_the_langgraph_run_runs_the_tool_once(
    served: Served, new_page: Callable[[], Page]
) -> None:
    agent = start_agent(served.workspace, served.inbox_path, served.keys("alice", "bob"))
    request_id = served.pending_one()
    page = new_page()
    log_in(page, served, "alice")
    row = page.locator("table.requests tbody tr")
    assert row.count() == 1
    assert "run_command" in row.inner_text() and REQUESTER in row.inner_text()
    assert "langgraph" in row.inner_text()
    page.set_viewport_size({"width": 1100, "height": 520})
    _screenshot(page, "inbox-pending.png")
    open_request(page, served, request_id)
    body = page.inner_text("body")
    assert "make deploy" in body and "release-7" in body
    assert agent.runs == []  # nothing runs while the reviewer reads
    approve(page)
    assert "approved" in page.inner_text("h1").lower()
    assert agent.tool_reply().status == "success"
    assert agent.runs == [{"command": "make deploy", "cwd": str(served.workspace.resolve())}]
    assert served.state(request_id) is InboxState.APPROVED
    assert any(
        "fulfilled by approval" in reason and "from alice" in reason
        for event in agent.audit.events
        for reason in event["reasons"]
    )


def test_two_of_ops_must_approve_and_the_requester_is_not_one_of_them(
    served: Served, new_page: Callable[[], Page]
) -> None:
    agent = start_agent(
        served.workspace,
        served.inbox_path,
        served.keys("alice", "bob", REQUESTER),
        policy_text=TWO_OF_OPS,
    )
    request_id = served.pending_one()

    own = new_page()
    log_in(own, served, REQUESTER)
    open_request(own, served, request_id)
    assert "you cannot approve it" in own.inner_text("body")
    if own.locator("button.approve").count():  # the form may be shown; its post is refused
        approve(own)
        assert "cannot approve" in own.inner_text("body")
    assert served.decisions(request_id) == []

    first = new_page()
    log_in(first, served, "alice")
    open_request(first, served, request_id)
    assert "2" in first.inner_text("body") and "ops" in first.inner_text("body")
    approve(first)
    assert served.state(request_id) is InboxState.PENDING  # one of two
    assert served.decisions(request_id) == [("alice", True)]
    time.sleep(0.5)  # the agent keeps waiting with one approval of two
    assert agent.runs == [] and agent.thread is not None and agent.thread.is_alive()

    second = new_page()
    log_in(second, served, "bob")
    open_request(second, served, request_id)
    second.set_viewport_size({"width": 1100, "height": 900})
    _screenshot(second, "inbox-request.png")
    approve(second)
    assert "approved" in second.inner_text("h1").lower()
    assert agent.tool_reply().status == "success"
    assert len(agent.runs) == 1
    assert served.decisions(request_id) == [("alice", True), ("bob", True)]


def test_an_expired_request_reads_as_expired_and_the_agent_is_told_so(
    served: Served, new_page: Callable[[], Page]
) -> None:
    agent = start_agent(
        served.workspace,
        served.inbox_path,
        served.keys("alice"),
        expires_in=timedelta(seconds=2),
    )
    request_id = served.pending_one()
    reply = agent.tool_reply()  # the agent gives up when the request expires
    assert reply.status == "error" and "nobody decided" in reply.content
    assert "denied the call" not in reply.content  # expired is not a denial
    assert agent.runs == []
    assert served.state(request_id) is InboxState.EXPIRED
    assert any("jevqueue.approval.expired" in event["rule_ids"] for event in agent.audit.events)

    page = new_page()
    log_in(page, served, "alice")
    page.goto(f"{served.base}/requests/{request_id}")
    assert "expired" in page.inner_text("h1").lower()
    assert "nobody decided" in page.inner_text("body").lower()
    assert page.locator("button.approve").count() == 0
    page.goto(f"{served.base}/history")
    assert request_id[:12] in page.inner_text("body")


class _AttackerPage(http.server.BaseHTTPRequestHandler):
    """Another site on this machine, whose page posts an approval form at the inbox."""

    target = ""

    def do_GET(self) -> None:
        page = (
            "<!doctype html><form id=f method=post action='" + self.target + "'>"
            "<input name=action_digest value=x><input name=reason value=yes></form>"
            "<script>document.getElementById('f').submit()</script>"
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, *args: Any) -> None:
        pass


def test_forged_and_replayed_posts_decide_nothing(
    served: Served, new_page: Callable[[], Page]
) -> None:
    agent = start_agent(served.workspace, served.inbox_path, served.keys("alice", "bob"))
    request_id = served.pending_one()
    page = new_page()
    log_in(page, served, "alice")

    # a forged post: another site the logged-in reviewer visits submits the approve form
    _AttackerPage.target = f"{served.base}/requests/{request_id}/approve"
    attacker = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AttackerPage)
    threading.Thread(target=attacker.serve_forever, daemon=True).start()
    try:
        with page.expect_response(_AttackerPage.target) as forged:
            page.goto(f"http://127.0.0.1:{attacker.server_port}/")
        assert forged.value.status == 403
    finally:
        attacker.shutdown()
        attacker.server_close()
    assert served.decisions(request_id) == []

    # a replayed post: the form alice approved with, posted again, then after logging out
    open_request(page, served, request_id)
    form = {
        "csrf_token": page.get_attribute(
            "form[action$='/approve'] input[name=csrf_token]", "value"
        ),
        "action_digest": page.get_attribute(
            "form[action$='/approve'] input[name=action_digest]", "value"
        ),
        "reason": "",
    }
    approve(page)
    assert agent.tool_reply().status == "success"
    url = f"{served.base}/requests/{request_id}/approve"
    again = page.request.post(url, form=form, headers={"origin": served.base}, max_redirects=0)
    assert again.status in (403, 409)
    log_out(page)
    after = page.request.post(url, form=form, headers={"origin": served.base}, max_redirects=0)
    assert after.status == 403
    assert served.decisions(request_id) == [("alice", True)]
    assert len(agent.runs) == 1
