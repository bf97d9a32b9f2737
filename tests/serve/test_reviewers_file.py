"""The reviewers file: what it holds, how a wrong one is refused, `jevqueue reviewers`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason='starlette is not installed: pip install "jevqueue[serve]"')

from click.testing import CliRunner
from jevqueue.approvals import generate_key_pair
from jevqueue.cli import main
from jevqueue.errors import ConfigurationError
from jevqueue.serve import Reviewers
from jevqueue.serve._reviewers import hash_token

HASH = "0" * 64


@pytest.fixture
def key(tmp_path: Path) -> Path:
    private, _ = generate_key_pair(tmp_path / "keys" / "alice.key")
    return private


def _load(tmp_path: Path, text: str) -> Reviewers:
    path = tmp_path / "reviewers.toml"
    path.write_text(text, encoding="utf-8")
    return Reviewers.load(path)


def test_a_reviewers_file_names_ids_token_hashes_and_keys_relative_to_it(
    tmp_path: Path, key: Path
) -> None:
    found = _load(
        tmp_path,
        f'[[reviewer]]\nid = "alice@example.com"\ntoken_sha256 = "{hash_token("t0k")}"\n'
        'key = "keys/alice.key"\n',
    )
    reviewer = found["alice@example.com"]
    assert reviewer.key_path == tmp_path / "keys" / "alice.key"
    assert found.authenticate("alice@example.com", "t0k") is reviewer
    assert found.authenticate("alice@example.com", "t0k ") is None
    assert found.authenticate("bob", "t0k") is None
    assert "t0k" not in repr(reviewer) and "PRIVATE" not in repr(reviewer)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[[reviewer]\n", "not valid TOML"),
        ("", "no reviewer"),
        ("[reviewer]\nid = 'a'\n", "[[reviewer]] table"),
        ("[server]\nport = 1\n", "does not know"),
        (
            f'[[reviewer]]\nid = "alice"\ntoken_sha256 = "{HASH}"\nkey = "k"\nrole = "x"\n',
            "unknown fields",
        ),
        (
            f'[[reviewer]]\nid = "al ice"\ntoken_sha256 = "{HASH}"\nkey = "keys/alice.key"\n',
            "not an approver id",
        ),
        ('[[reviewer]]\nid = "alice"\ntoken_sha256 = "abc"\nkey = "keys/alice.key"\n', "64"),
        (f'[[reviewer]]\nid = "alice"\ntoken_sha256 = "{HASH}"\n', "key must be the path"),
        (
            f'[[reviewer]]\nid = "alice"\ntoken_sha256 = "{HASH}"\nkey = "keys/none.key"\n',
            "does not exist",
        ),
        (
            f'[[reviewer]]\nid = "alice"\ntoken_sha256 = "{HASH}"\nkey = "keys/alice.key.pub"\n',
            "public key",
        ),
        (
            f'[[reviewer]]\nid = "alice"\ntoken_sha256 = "{HASH}"\nkey = "keys/alice.key"\n' * 2,
            "listed twice",
        ),
    ],
)
def test_a_wrong_reviewers_file_is_refused_with_what_to_fix(
    tmp_path: Path, key: Path, text: str, says: str
) -> None:
    with pytest.raises(ConfigurationError, match=r"reviewer") as caught:
        _load(tmp_path, text)
    assert says in str(caught.value)


def test_a_missing_reviewers_file_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="jevqueue reviewers add"):
        Reviewers.load(tmp_path / "nowhere.toml")


def test_reviewers_add_prints_the_token_once_and_stores_its_hash(tmp_path: Path, key: Path) -> None:
    file = tmp_path / "reviewers.toml"
    runner = CliRunner()
    added = runner.invoke(
        main, ["reviewers", "add", "alice", "--key", str(key), "--file", str(file)]
    )
    assert added.exit_code == 0, added.output
    token = added.stdout.strip().splitlines()[-1]
    assert token.startswith("jevq_") and len(token) > 40
    text = file.read_text(encoding="utf-8")
    assert token not in text
    assert hash_token(token) in text
    assert 'key = "keys/alice.key"' in text  # under the file's folder: relative to it
    assert file.stat().st_mode & 0o077 == 0
    assert Reviewers.load(file).authenticate("alice", token) is not None

    again = runner.invoke(
        main, ["reviewers", "add", "alice", "--key", str(key), "--file", str(file)]
    )
    assert again.exit_code == 2
    assert "--replace" in again.output

    bob_key, _ = generate_key_pair(tmp_path / "elsewhere" / "bob.key")
    runner.invoke(main, ["reviewers", "add", "bob", "--key", str(bob_key), "--file", str(file)])
    replaced = runner.invoke(
        main, ["reviewers", "add", "alice", "--key", str(key), "--file", str(file), "--replace"]
    )
    assert replaced.exit_code == 0, replaced.output
    new_token = replaced.stdout.strip().splitlines()[-1]
    loaded = Reviewers.load(file)
    assert loaded.authenticate("alice", token) is None  # the old token stops working
    assert loaded.authenticate("alice", new_token) is not None
    assert sorted(loaded) == ["alice", "bob"]

    listed = runner.invoke(main, ["reviewers", "list", "--file", str(file)])
    assert listed.exit_code == 0
    assert "alice" in listed.output and "bob" in listed.output


def test_reviewers_add_refuses_a_key_that_is_not_a_private_key(tmp_path: Path, key: Path) -> None:
    file = tmp_path / "reviewers.toml"
    answer = CliRunner().invoke(
        main, ["reviewers", "add", "alice", "--key", f"{key}.pub", "--file", str(file)]
    )
    assert answer.exit_code == 2
    assert "public key" in answer.output
    assert not file.exists()


def test_importing_the_server_without_the_extra_names_it() -> None:
    code = (
        "import sys\n"
        "sys.modules['starlette'] = None\n"
        "try:\n"
        "    import jevqueue.serve\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert 'pip install "jevqueue[serve]"' in out.stdout, out.stderr


def test_the_rest_of_jevqueue_does_not_import_starlette() -> None:
    code = (
        "import sys, jevqueue, jevqueue.approvals, jevqueue.cli, jevqueue.cli.serve\n"
        "from jevqueue.approvals import SQLiteApprovalInbox\n"
        "print(sorted(m for m in ('starlette', 'jinja2', 'uvicorn') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stderr
