"""`jevqueue serve` on the command line, and over real HTTP in a process of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason='starlette is not installed: pip install "jevqueue[serve]"')
pytest.importorskip("uvicorn", reason='uvicorn is not installed: pip install "jevqueue[serve]"')

import httpx
from click.testing import CliRunner
from jevqueue.approvals import InboxState, SQLiteApprovalInbox
from jevqueue.cli import main
from jevqueue.cli.serve import is_loopback_address

from .conftest import PATIENT, Reviewer, csrf_of, digest_of, file_request, running_serve


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "inbox.example.com"])
def test_binding_beyond_loopback_needs_allow_remote(
    host: str, reviewers_file: tuple[Path, dict[str, Reviewer]], tmp_path: Path
) -> None:
    answer = CliRunner().invoke(
        main,
        [
            "serve",
            "--host",
            host,
            "--reviewers",
            str(reviewers_file[0]),
            "--inbox",
            str(tmp_path / "inbox.sqlite3"),
        ],
    )
    assert answer.exit_code == 2
    assert "--allow-remote" in answer.output
    assert "TLS" in answer.output


def test_loopback_addresses() -> None:
    assert all(map(is_loopback_address, ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"]))
    assert not any(map(is_loopback_address, ["0.0.0.0", "::", "10.0.0.1", "example.com"]))


def test_a_wrong_reviewers_file_stops_the_start(tmp_path: Path) -> None:
    bad = tmp_path / "reviewers.toml"
    bad.write_text("[[reviewer]]\nid = 'alice'\n", encoding="utf-8")
    for path in (bad, tmp_path / "missing.toml"):
        answer = CliRunner().invoke(
            main,
            ["serve", "--reviewers", str(path), "--inbox", str(tmp_path / "inbox.sqlite3")],
        )
        assert answer.exit_code == 2
        assert str(path) in answer.output
        assert "Traceback" not in answer.output


@pytest.fixture
def server(
    tmp_path: Path, reviewers_file: tuple[Path, dict[str, Reviewer]]
) -> Iterator[tuple[str, Path]]:
    """`jevqueue serve` in a process of its own on a free loopback port."""
    inbox_path = tmp_path / "served.sqlite3"
    SQLiteApprovalInbox(inbox_path).close()
    with running_serve(inbox_path, reviewers_file[0], tmp_path / "serve.log") as base:
        yield base, inbox_path


@pytest.mark.network_allowed
def test_the_served_inbox_logs_a_reviewer_in_over_real_http(
    server: tuple[str, Path], people: dict[str, Reviewer]
) -> None:
    base, inbox_path = server
    with SQLiteApprovalInbox(inbox_path) as inbox:
        filed = file_request(inbox)
    with httpx.Client(base_url=base, headers={"origin": base}, timeout=PATIENT) as client:
        assert client.get("/").status_code == 303
        form = client.get("/login")
        assert form.status_code == 200
        assert form.headers["x-frame-options"] == "DENY"
        assert "server" not in form.headers
        logged_in = client.post(
            "/login",
            data={
                "reviewer": "alice",
                "token": people["alice"].token,
                "csrf_token": csrf_of(form.text),
            },
        )
        assert logged_in.status_code == 303
        listing = client.get("/")
        assert listing.status_code == 200
        assert filed.request_id in listing.text
        page = client.get(f"/requests/{filed.request_id}")
        approved = client.post(
            f"/requests/{filed.request_id}/approve",
            data={"csrf_token": csrf_of(page.text), "action_digest": digest_of(page.text)},
        )
        assert approved.status_code == 303
        # another Host than the one bound is refused (DNS rebinding)
        assert client.get("/login", headers={"host": "rebound.example"}).status_code == 400
    with SQLiteApprovalInbox(inbox_path) as inbox:
        assert inbox.get(filed.request_id).state is InboxState.APPROVED
