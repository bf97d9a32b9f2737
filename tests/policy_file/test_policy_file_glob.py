"""The glob dialects of policy files, and the line index behind every reported mistake."""

from __future__ import annotations

import pytest
from jevqueue.policy_files import GlobError, TomlLineIndex, compile_name_glob, compile_path_glob


@pytest.mark.parametrize(
    ("glob", "path", "expected"),
    [
        ("*.pem", "server.pem", True),
        ("*.pem", "certs/deep/server.pem", True),
        ("*.pem", "server.pem.bak", False),
        (".env*", "services/api/.env.local", True),
        (".env*", "env.py", False),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/pkg/a.py", False),
        ("src/*.py", "lib/src/a.py", False),
        ("src/**/*.py", "src/a.py", True),
        ("src/**/*.py", "src/x/y/z/a.py", True),
        ("**/fixtures/**", "tests/unit/fixtures/data.json", True),
        ("**", "anything/at/all", True),
        ("vendor", "vendor/lib/x.py", True),
        ("vendor", "src/vendor/x.py", True),
        ("vendor", "vendors/x.py", False),
        ("docs/", "docs/guide.md", True),
        ("a?c.txt", "abc.txt", True),
        ("a?c.txt", "a/c.txt", False),
        ("[!.]*", ".hidden", False),
        ("[!.]*", "visible", True),
        ("data[0-9].csv", "data7.csv", True),
        ("data[0-9].csv", "dataX.csv", False),
        ("[[]x]", "[x]", True),
    ],
)
def test_path_globs(glob: str, path: str, expected: bool) -> None:
    assert bool(compile_path_glob(glob).fullmatch(path)) is expected


@pytest.mark.parametrize(
    ("glob", "path", "expected"),
    [
        ("*.md", "README.md", True),
        ("*.md", "docs/deep/guide.md", True),
        ("*.md", "src/x.md/app.py", False),
        ("*.md", "x.md/src/app/__init__.py", False),
        ("docs", "docs", True),
        ("docs", "docs/guide.md", False),
        ("docs/", "docs/guide.md", False),
        ("docs/**", "docs/guide.md", True),
        ("docs/**", "docs/a/b/c.md", True),
        ("docs/**", "docs", False),
        ("src/*.py", "src/a.py/evil.sh", False),
        ("**/fixtures/*.json", "tests/fixtures/a.json/b.sh", False),
        ("**", "anything/at/all", True),
    ],
)
def test_path_globs_without_directory_cover_match_the_path_itself(
    glob: str, path: str, expected: bool
) -> None:
    assert bool(compile_path_glob(glob, cover_below=False).fullmatch(path)) is expected


@pytest.mark.parametrize(
    ("glob", "path"),
    [("*.md", "src/x.md/app.py"), ("docs", "docs/guide.md"), ("src/*.py", "src/a.py/evil.sh")],
)
def test_path_globs_cover_what_is_below_a_directory_by_default(glob: str, path: str) -> None:
    assert compile_path_glob(glob).fullmatch(path)
    assert compile_path_glob(glob, ignore_case=True).fullmatch(path.upper())


def test_path_globs_fold_case_only_when_asked() -> None:
    assert compile_path_glob("secrets/**", ignore_case=True).fullmatch("SECRETS/key")
    assert not compile_path_glob("secrets/**").fullmatch("SECRETS/key")


@pytest.mark.parametrize(
    "glob",
    [
        "",
        "/abs",
        "~/x",
        "a\\b",
        "a/../b",
        "./a",
        "a//b",
        "a**",
        "**b/c",
        "[abc",
        "[]",
        "[z-a]",
        "a\nb",
        "a\x00",
    ],
)
def test_bad_path_globs_are_refused(glob: str) -> None:
    with pytest.raises(GlobError):
        compile_path_glob(glob)


@pytest.mark.parametrize(
    ("glob", "name", "expected"),
    [
        ("write_*", "write_to_file", True),
        ("write_*", "rewrite_file", False),
        ("ci-?", "ci-7", True),
        ("prod*", "production", True),
        ("prod*", "preprod", False),
        ("*", "", True),
    ],
)
def test_name_globs(glob: str, name: str, expected: bool) -> None:
    assert bool(compile_name_glob(glob).fullmatch(name)) is expected


@pytest.mark.parametrize("glob", ["", "ci-[", "a\tb"])
def test_bad_name_globs_are_refused(glob: str) -> None:
    with pytest.raises(GlobError):
        compile_name_glob(glob)


def test_the_line_index_follows_tables_arrays_and_inline_tables() -> None:
    text = (
        "# comment\n"  # 1
        "[policy]\n"  # 2
        'name = "x"  # trailing comment\n'  # 3
        "\n"  # 4
        "[[rule]]\n"  # 5
        "id = 'a'\n"  # 6
        "paths = [\n"  # 7
        "  'src/**',  # one\n"  # 8
        '  "b",\n'  # 9
        "]\n"  # 10
        "arguments = { CommandLine = 'x', \"Cwd\" = 'y' }\n"  # 11
        'reason = """\n'  # 12
        "[[rule]] inside a string\n"  # 13
        '"""\n'  # 14
        "\n"  # 15
        "[[rule]]\n"  # 16
        "id = 'b'\n"  # 17
        "[rule.arguments]\n"  # 18
        "Foo = '1'\n"  # 19
    )
    lines = TomlLineIndex(text)
    assert lines.line_of(("policy", "name")) == 3
    assert lines.line_of(("rule", 0)) == 5
    assert lines.line_of(("rule", 0, "paths", 1)) == 9
    assert lines.line_of(("rule", 0, "arguments", "Cwd")) == 11
    assert lines.line_of(("rule", 0, "reason")) == 12
    assert lines.line_of(("rule", 1)) == 16
    assert lines.line_of(("rule", 1, "arguments", "Foo")) == 19
    # unknown paths fall back to their closest known ancestor
    assert lines.line_of(("rule", 1, "arguments", "Foo", 3)) == 19
    assert lines.line_of(("rule", 7)) == 5  # the first [[rule]]
    assert lines.line_of(("nothing",)) is None
