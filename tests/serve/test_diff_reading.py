"""What the diff of a file-writing request reads from disk, and what it costs."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette", reason='starlette is not installed: pip install "jevqueue[serve]"')

from jevqueue.approvals import SQLiteApprovalInbox

from .conftest import BASE, CONTEXT, Reviewer, approval_request, csrf_of, file_request

People = tuple[Path, dict[str, Reviewer]]
NOT_READ = "the current file is not read: start jevqueue serve with --diff-root to compare"


def _client(inbox: SQLiteApprovalInbox, reviewers_file: People, name: str, **options: Any) -> Any:
    from jevqueue.serve import Reviewers, create_app
    from starlette.testclient import TestClient

    app = create_app(inbox, Reviewers.load(reviewers_file[0]), **options)
    client = TestClient(app, base_url=BASE, headers={"origin": BASE}, follow_redirects=False)
    form = client.get("/login")
    token = reviewers_file[1][name].token
    answer = client.post(
        "/login", data={"reviewer": name, "token": token, "csrf_token": csrf_of(form.text)}
    )
    assert answer.status_code == 303, answer.text
    return client


def _write(target: Path | str, content: str, workspace: str = "/workspace/project") -> Any:
    return approval_request(
        "write_to_file",
        {"TargetFile": str(target), "CodeContent": content},
        context={**CONTEXT, "workspace": workspace},
        reason="writes a file",
    )


def test_without_a_diff_root_no_file_is_read_not_even_a_reviewers_key(
    inbox: SQLiteApprovalInbox, reviewers_file: People
) -> None:
    alice_key = reviewers_file[1]["alice"].key
    secret = alice_key.read_text(encoding="utf-8").splitlines()[1]
    bob = _client(inbox, reviewers_file, "bob")
    for target in (alice_key, reviewers_file[0], Path("/etc/passwd")):
        filed = file_request(inbox, _write(target, "x-marks-the-content\n"))
        html = bob.get(f"/requests/{filed.request_id}").text
        assert secret not in html
        assert "token_sha256" not in html
        assert "root:" not in html
        assert "the content it writes" in html
        assert NOT_READ in html
        assert "x-marks-the-content" in html


def test_a_diff_root_never_reads_keys_the_reviewers_file_or_the_inbox(
    inbox: SQLiteApprovalInbox, reviewers_file: People, tmp_path: Path
) -> None:
    # the root holds everything: the reviewers' folder, their keys and the inbox
    alice_key = reviewers_file[1]["alice"].key
    secret = alice_key.read_text(encoding="utf-8").splitlines()[1]
    bob = _client(inbox, reviewers_file, "bob", diff_roots=[tmp_path])
    for target in (alice_key, reviewers_file[0], tmp_path / "inbox.sqlite3"):
        filed = file_request(inbox, _write(target, "x\n"))
        html = bob.get(f"/requests/{filed.request_id}").text
        assert secret not in html
        assert "token_sha256" not in html
        assert "never shown" in html
    # a hard link to a key elsewhere under the root is the same file: not read either
    linked = tmp_path / "innocent.txt"
    os.link(alice_key, linked)
    filed = file_request(inbox, _write(linked, "x\n"))
    html = bob.get(f"/requests/{filed.request_id}").text
    assert secret not in html
    assert "never shown" in html


def test_only_targets_under_a_root_are_read_never_the_requests_own_workspace(
    inbox: SQLiteApprovalInbox, reviewers_file: People, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("hello\nworld\n", encoding="utf-8")
    outside = tmp_path / "elsewhere" / "private.txt"
    outside.parent.mkdir()
    outside.write_text("a private line\n", encoding="utf-8")
    bob = _client(inbox, reviewers_file, "bob", diff_roots=[root])
    inside = file_request(inbox, _write(root / "notes.txt", "hello\nthere\n"))
    html = bob.get(f"/requests/{inside.request_id}").text
    assert '<span class="del">-world</span>' in html
    # the agent names the folder of the file as its workspace: still not a root
    escaped = file_request(inbox, _write(outside, "x\n", workspace=str(outside.parent)))
    climbing = file_request(inbox, _write(f"{root}/../elsewhere/private.txt", "x\n"))
    for filed in (escaped, climbing):
        html = bob.get(f"/requests/{filed.request_id}").text
        assert "a private line" not in html
        assert "the current file is not read" in html


def test_a_symbolic_link_on_a_parent_folder_does_not_lead_out_of_the_root(
    inbox: SQLiteApprovalInbox, reviewers_file: People, tmp_path: Path
) -> None:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "private.txt").write_text("a private line\n", encoding="utf-8")
    filed = file_request(inbox, _write(root / "src" / "private.txt", "x\n"))
    # swapped for a link after the request was filed
    (root / "src").rmdir()
    os.symlink(outside, root / "src")
    html = (
        _client(inbox, reviewers_file, "bob", diff_roots=[root])
        .get(f"/requests/{filed.request_id}")
        .text
    )
    assert "a private line" not in html
    assert "symbolic link" in html


def test_a_diff_root_must_be_a_folder(inbox: SQLiteApprovalInbox, reviewers_file: People) -> None:
    from jevqueue.errors import ConfigurationError
    from jevqueue.serve import Reviewers, create_app

    with pytest.raises(ConfigurationError, match="is not a folder"):
        create_app(inbox, Reviewers.load(reviewers_file[0]), diff_roots=["/no/such/folder"])


def test_the_worst_diff_is_cut_before_it_is_compared_and_computed_once(
    inbox: SQLiteApprovalInbox,
    reviewers_file: People,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import jevqueue.serve._inbox_pages as pages

    root = tmp_path / "project"
    root.mkdir()
    target = root / "big.txt"
    # short, mostly shared lines in another order: the costliest input for difflib
    target.write_text("".join(f"{i % 150}\n" for i in range(20000))[: 256 * 1024 - 10])
    new = "".join(f"{(i * 7) % 151}\n" for i in range(20000))[: 256 * 1024 - 10]
    filed = file_request(inbox, _write(target, new))
    calls = []
    real = pages.action_diff

    def counted(*args: Any) -> Any:
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(pages, "action_diff", counted)
    bob = _client(inbox, reviewers_file, "bob", diff_roots=[root])
    started = time.perf_counter()
    html = bob.get(f"/requests/{filed.request_id}").text
    assert time.perf_counter() - started < 10.0
    assert '<span class="del">' in html
    assert "is cut to its first 2000 lines" in html
    for _ in range(3):
        assert bob.get(f"/requests/{filed.request_id}").status_code == 200
    assert len(calls) == 1


def test_the_serve_command_takes_diff_roots(tmp_path: Path, reviewers_file: People) -> None:
    from click.testing import CliRunner
    from jevqueue.cli import main

    answer = CliRunner().invoke(
        main,
        [
            "serve",
            "--reviewers",
            str(reviewers_file[0]),
            "--inbox",
            str(tmp_path / "inbox.sqlite3"),
            "--diff-root",
            str(tmp_path / "missing"),
        ],
    )
    assert answer.exit_code == 2
    assert "--diff-root" in answer.output
