from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import jevqueue.policy._action as action_module
import pytest
import rfc8785
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from jevqueue import create_default_policy_decision_point
from jevqueue.errors import (
    ArgumentsTooDeepError,
    InvalidContextError,
    InvalidToolArgumentsError,
    NonFiniteNumberError,
    UnregisteredToolError,
    UnsupportedTypeError,
)
from jevqueue.policy import (
    Action,
    ExecutionContext,
    ToolRegistry,
    ToolSpec,
    UnresolvablePathError,
    antigravity_registry,
    generic_registry,
    resolve_path,
)

from .conftest import WORKSPACE, context_mapping

GENERIC = generic_registry()
ANTIGRAVITY = antigravity_registry()


def build(tool: str, arguments: dict[str, Any], **context: Any) -> Action:
    return Action.build(ANTIGRAVITY, tool, arguments, context_mapping(**context))


def test_build_resolves_targets_and_takes_facts_from_the_registry() -> None:
    action = build("write_to_file", {"TargetFile": "src/feature.py", "CodeContent": "v = 1\n"})
    assert action.tool == "write_to_file"
    assert action.targets == (f"{WORKSPACE}/src/feature.py",)
    assert action.target_fields == ("TargetFile",)
    assert action.side_effects == frozenset({"file_write"})
    assert action.context.task_id == "task-42"
    assert action.digest.startswith("sha256:") and len(action.digest) == 71
    assert action.relative_targets == (("src", "feature.py"),)


def test_digest_is_sha256_of_rfc8785_document() -> None:
    for tool, arguments in [
        ("write_to_file", {"TargetFile": "src/é\U0001f600.py", "CodeContent": 'a"b\n'}),
        ("run_command", {"CommandLine": "ls -la", "Cwd": "."}),
        ("view_file", {"AbsolutePath": f"{WORKSPACE}/a\\b", "StartLine": 1}),
        ("multi_replace_file_content", {"TargetFile": "x", "ReplacementChunks": [{"A": 0.5}]}),
    ]:
        action = build(tool, arguments)
        document = action.digest_document()
        assert set(document) >= {"tool", "arguments", "targets", "side_effects", "context"}
        expected = "sha256:" + hashlib.sha256(rfc8785.dumps(document)).hexdigest()
        assert action.digest == expected


@pytest.mark.parametrize("field", ["task_id", "actor_id", "workspace", "git_sha", "environment"])
def test_every_context_field_is_in_the_digest(field: str) -> None:
    arguments = {"TargetFile": "src/feature.py", "CodeContent": "x"}
    other = {
        "task_id": "task-43",
        "actor_id": "other-agent",
        "workspace": "/workspace/other",
        "git_sha": "1123456789abcdef0123456789abcdef01234567",
        "environment": "ci",
    }[field]
    assert (
        build("write_to_file", arguments).digest
        != build("write_to_file", arguments, **{field: other}).digest
    )


def test_agent_metadata_cannot_soften_the_side_effects() -> None:
    action = build(
        "run_command",
        {"CommandLine": "rm -rf /", "Cwd": ".", "SafeToAutoRun": True, "side_effects": []},
    )
    assert action.side_effects == frozenset({"shell_command"})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("src/a.py", f"{WORKSPACE}/src/a.py"),
        ("./src//a.py", f"{WORKSPACE}/src/a.py"),
        (f"{WORKSPACE}/src/a.py", f"{WORKSPACE}/src/a.py"),
        ("src/../../project/a.py", f"{WORKSPACE}/a.py"),
        ("../../etc/passwd", "/etc/passwd"),
        ("/etc/passwd", "/etc/passwd"),
        (f"//{WORKSPACE}/a", f"{WORKSPACE}/a"),
        ("..", "/workspace"),
        ("src\\..\\..\\x", f"{WORKSPACE}/src\\..\\..\\x"),
        ("%2e%2e/x", f"{WORKSPACE}/%2e%2e/x"),
    ],
)
def test_lexical_resolution_when_workspace_is_absent(value: str, expected: str) -> None:
    assert not os.path.exists(WORKSPACE)
    assert build("write_to_file", {"TargetFile": value}).targets == (expected,)


def test_tilde_expands_to_home() -> None:
    action = build("view_file", {"AbsolutePath": "~/.ssh/id_rsa"})
    assert action.targets == (os.path.realpath(os.path.expanduser("~/.ssh/id_rsa")),) or (
        action.targets == (os.path.normpath(os.path.expanduser("~/.ssh/id_rsa")),)
    )
    assert action.relative_targets == (None,)


def test_symlinks_are_resolved_when_workspace_exists(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    outside = tmp_path / "outside"
    (workspace / "src").mkdir(parents=True)
    outside.mkdir()
    (workspace / "escape").symlink_to(outside)
    (workspace / "inner").symlink_to(workspace / "src")
    ctx = context_mapping(workspace=str(workspace))
    escaped = Action.build(GENERIC, "write_to_file", {"TargetFile": "escape/x.py"}, ctx)
    assert escaped.targets == (str(outside.resolve() / "x.py"),)
    assert escaped.relative_targets == (None,)
    inner = Action.build(GENERIC, "write_to_file", {"TargetFile": "inner/x.py"}, ctx)
    assert inner.relative_targets == (("src", "x.py"),)


_SEGMENTS = [
    *("a", "b", "c", "f", "g", ".hidden", "new"),
    *("in", "out", "file", "dangling", "up", "loop"),
    *("", ".", ".."),
]


@pytest.fixture(scope="module")
def link_tree(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A resolved workspace with directories, files and every kind of link."""
    base = tmp_path_factory.mktemp("tree")
    root, outside = base / "ws", base / "outside"
    (root / "a" / "c").mkdir(parents=True)
    (root / "b").mkdir()
    (root / ".hidden").mkdir()
    outside.mkdir()
    (root / "f").write_text("")
    (root / "a" / "g").write_text("")
    (root / "in").symlink_to(root / "a")
    (root / "out").symlink_to(outside)
    (root / "file").symlink_to(root / "f")
    (root / "dangling").symlink_to(root / "missing")
    (root / "a" / "up").symlink_to("../b")
    (root / "loop").symlink_to(root / "loop")
    return os.path.realpath(root)


def _realpath_or_refused(path: str) -> str:
    """What resolution must give: realpath, or "refused" where a component cannot be
    looked up for a reason other than not existing (a file used as a directory, a loop)."""
    try:
        return os.path.realpath(path, strict=True)
    except FileNotFoundError:
        resolved = os.path.realpath(path)
    except OSError:
        return "refused"
    # The answer itself must resolve: one through a file (ENOTDIR) names nothing the OS
    # could open, so it is refused, as test_relative_targets_... requires too.
    try:
        os.path.realpath(resolved, strict=True)
    except FileNotFoundError:
        pass
    except OSError:
        return "refused"
    # realpath keeps a link it could not follow (a loop) as written: that is refused too.
    prefix = ""
    for part in filter(None, resolved.split("/")):
        prefix = f"{prefix}/{part}"
        try:
            if os.path.islink(prefix) or not os.path.lexists(prefix):
                return "refused" if os.path.islink(prefix) else resolved
        except OSError:
            return "refused"
    return resolved


def _resolved_or_refused(value: str, workspace: str) -> str:
    try:
        return resolve_path(value, workspace, on_disk=True)
    except UnresolvablePathError:
        return "refused"


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(_SEGMENTS), min_size=1, max_size=4))
def test_relative_targets_resolve_exactly_as_realpath(link_tree: str, segments: list[str]) -> None:
    relative = "/".join(segments)
    assume(relative and relative[0] != "/")  # relative (an empty one is refused earlier)
    joined = f"{link_tree}/{relative}"
    expected = os.path.realpath(joined)

    def fails(path: str) -> bool:
        try:
            os.path.realpath(path, strict=True)
        except FileNotFoundError:
            return False  # does not exist (yet): nothing below it exists either
        except OSError:
            return True
        return False

    # realpath gives up silently on a loop or a file used as a directory; then its answer
    # fails strictly, or is no fixed point (a link left unresolved): refused, never guessed.
    if fails(joined) or fails(expected) or os.path.realpath(expected) != expected:
        with pytest.raises(UnresolvablePathError):
            resolve_path(relative, link_tree, on_disk=True)
        return
    assert resolve_path(relative, link_tree, on_disk=True) == expected


def test_symlinked_workspace_compares_real_paths(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    action = Action.build(
        GENERIC,
        "write_to_file",
        {"TargetFile": f"{link}/a.py"},
        context_mapping(workspace=str(link)),
    )
    assert action.workspace_root == str(real.resolve())
    assert action.relative_targets == (("a.py",),)


def test_a_retargeted_workspace_link_is_resolved_again(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    link = tmp_path / "current"
    link.symlink_to(first)
    ctx = context_mapping(workspace=str(link))
    before = Action.build(GENERIC, "write_to_file", {"TargetFile": "a.py"}, ctx)
    assert before.workspace_root == str(first.resolve())
    link.unlink()
    link.symlink_to(second)
    after = Action.build(GENERIC, "write_to_file", {"TargetFile": "a.py"}, ctx)
    assert after.workspace_root == str(second.resolve())
    assert after.targets == (str(second.resolve() / "a.py"),)
    assert after.relative_targets == (("a.py",),)
    # The first directory is no longer the workspace: a path into it is outside.
    stale = Action.build(GENERIC, "write_to_file", {"TargetFile": f"{first}/a.py"}, ctx)
    assert stale.relative_targets == (None,)


def test_a_workspace_replaced_by_another_directory_is_resolved_again(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    ctx = context_mapping(workspace=str(workspace))
    Action.build(GENERIC, "write_to_file", {"TargetFile": "a.py"}, ctx)
    workspace.rename(tmp_path / "old")
    (tmp_path / "old").rename(tmp_path / "elsewhere")
    workspace.symlink_to(tmp_path / "elsewhere")
    action = Action.build(GENERIC, "write_to_file", {"TargetFile": "a.py"}, ctx)
    assert action.workspace_root == str((tmp_path / "elsewhere").resolve())
    assert action.relative_targets == (("a.py",),)


def test_a_moved_parent_of_the_resolved_workspace_can_only_refuse(tmp_path: Path) -> None:
    # The workspace is still the same directory, but the path it was resolved to now runs
    # through a link. A relative target still names a file of the workspace; a target
    # resolved in full lands outside the resolved path and is refused, never admitted.
    parent = tmp_path / "data"
    (parent / "ws").mkdir(parents=True)
    ctx = context_mapping(workspace=str(parent / "ws"))
    first = Action.build(GENERIC, "write_to_file", {"TargetFile": "a.py"}, ctx)
    assert first.relative_targets == (("a.py",),)
    parent.rename(tmp_path / "moved")
    parent.symlink_to(tmp_path / "moved")
    relative = Action.build(GENERIC, "write_to_file", {"TargetFile": "a.py"}, ctx)
    assert relative.targets == (f"{first.workspace_root}/a.py",)
    assert relative.relative_targets == (("a.py",),)
    moved = str((tmp_path / "moved" / "ws").resolve())
    absolute = Action.build(GENERIC, "write_to_file", {"TargetFile": f"{moved}/a.py"}, ctx)
    assert absolute.relative_targets == (None,)


def test_a_workspace_that_disappears_is_compared_lexically(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    ctx = context_mapping(workspace=str(workspace))
    assert Action.build(GENERIC, "write_to_file", {"TargetFile": "a.py"}, ctx).workspace_root
    workspace.rmdir()
    action = Action.build(GENERIC, "write_to_file", {"TargetFile": "a.py"}, ctx)
    assert action.workspace_root == str(workspace)
    assert action.targets == (f"{workspace}/a.py",)


def test_sibling_prefix_is_outside() -> None:
    action = build("write_to_file", {"TargetFile": "/workspace/project-evil/a.py"})
    assert action.relative_targets == (None,)
    action = build("write_to_file", {"TargetFile": WORKSPACE})
    assert action.relative_targets == (None,)


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("write_to_file", {"CodeContent": "x"}, "missing"),
        ("write_to_file", {"TargetFile": None}, "missing"),
        ("write_to_file", {"TargetFile": 3}, "must be a string"),
        ("write_to_file", {"TargetFile": ["a.py"]}, "must be a string"),
        ("write_to_file", {"TargetFile": ""}, "empty"),
        ("write_to_file", {"TargetFile": "a\x00.py"}, "NUL"),
        ("run_command", {"CommandLine": "ls"}, "missing"),
        ("run_command", {"CommandLine": "ls", "Cwd": {"path": "."}}, "must be a string"),
        ("view_file", {"TargetFile": "a"}, "AbsolutePath"),
    ],
)
def test_bad_path_fields_are_refused(tool: str, arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidToolArgumentsError, match=message):
        build(tool, arguments)


def test_input_errors_are_typed() -> None:
    with pytest.raises(UnregisteredToolError):
        build("delete_everything", {})
    with pytest.raises(InvalidContextError):
        build("write_to_file", {"TargetFile": "a"}, git_sha="HEAD")
    with pytest.raises(UnsupportedTypeError):
        Action.build(GENERIC, "write_to_file", [("TargetFile", "a")], context_mapping())  # type: ignore[arg-type]
    with pytest.raises(NonFiniteNumberError):
        build("write_to_file", {"TargetFile": "a", "CodeContent": float("inf")})
    deep: Any = "x"
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(ArgumentsTooDeepError):
        build("write_to_file", {"TargetFile": "a", "CodeContent": deep})


def test_schema_is_checked_without_echoing_values() -> None:
    registry = ToolRegistry().register(
        ToolSpec(
            "scale",
            side_effects=frozenset({"network"}),
            schema={
                "type": "object",
                "properties": {"replicas": {"type": "integer", "maximum": 10}},
                "required": ["replicas"],
                "additionalProperties": False,
            },
        )
    )
    ctx = context_mapping()
    Action.build(registry, "scale", {"replicas": 3}, ctx)
    for bad in ({"replicas": "s3cr3t-value"}, {"replicas": 11}, {}, {"replicas": 1, "x": 1}):
        with pytest.raises(InvalidToolArgumentsError) as caught:
            Action.build(registry, "scale", bad, ctx)
        assert "s3cr3t" not in str(caught.value)


def test_context_object_is_accepted() -> None:
    ctx = ExecutionContext.coerce(context_mapping())
    action = Action.build(GENERIC, "write_to_file", {"TargetFile": "a"}, ctx)
    assert action.context is ctx


keys = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=6)
scalars = st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | keys
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=10,
)
extra_arguments = st.dictionaries(keys.filter(lambda k: k != "TargetFile"), values, max_size=5)


@settings(max_examples=150, deadline=None)
@given(extra_arguments, st.randoms(use_true_random=False))
def test_key_order_does_not_change_the_digest(extra: dict[str, Any], rnd: Any) -> None:
    arguments = {"TargetFile": "src/a.py", **extra}
    items = list(arguments.items())
    rnd.shuffle(items)
    shuffled = dict(items)
    assert build("write_to_file", arguments).digest == build("write_to_file", shuffled).digest


@settings(max_examples=150, deadline=None)
@given(extra_arguments, keys, values)
def test_any_value_change_changes_the_digest(extra: dict[str, Any], key: str, value: Any) -> None:
    arguments = {"TargetFile": "src/a.py", **extra}
    changed = dict(arguments)
    changed[key] = value
    before = build("write_to_file", arguments).digest
    after = build("write_to_file", changed).digest
    if rfc8785.dumps(arguments) == rfc8785.dumps(changed):
        assert before == after
    else:
        assert before != after


@settings(max_examples=100, deadline=None)
@given(
    st.text(
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
        min_size=1,
        max_size=20,
    )
)
def test_any_target_change_changes_the_digest(path: str) -> None:
    one = build("write_to_file", {"TargetFile": "src/a.py"})
    other = build("write_to_file", {"TargetFile": path})
    assert (one.digest == other.digest) == (one.targets == other.targets and path == "src/a.py")


def test_rules_get_a_private_copy_of_the_arguments() -> None:
    flat = {"TargetFile": "src/a.py", "CodeContent": "x"}
    action = build("write_to_file", flat)
    action.arguments["TargetFile"] = "/etc/passwd"  # type: ignore[index]
    assert flat["TargetFile"] == "src/a.py"
    nested = {"TargetFile": "a.py", "ReplacementChunks": [{"ReplacementContent": "y"}]}
    action = build("multi_replace_file_content", nested)
    assert action.arguments == nested
    action.arguments["ReplacementChunks"][0]["ReplacementContent"] = "z"
    assert nested["ReplacementChunks"][0]["ReplacementContent"] == "y"


_CLIMB_SEGMENTS = [
    *("ws", "deep", "mid", "sib", "f", "new", ".hidden"),
    *("lnk", "out", "dangling", "up"),
    *("", ".", ".."),
]


@pytest.fixture(scope="module")
def climb_tree(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A resolved workspace three levels down, with directories, files and links around it."""
    base = tmp_path_factory.mktemp("climb")
    mid = base / "mid"
    root = mid / "deep" / "ws"
    (root / "sib").mkdir(parents=True)
    (mid / "sib" / ".hidden").mkdir(parents=True)
    (base / "outside").mkdir()
    (mid / "f").write_text("")
    (mid / "deep" / "f").write_text("")
    (mid / "lnk").symlink_to(mid / "sib")
    (mid / "deep" / "out").symlink_to(base / "outside")
    (mid / "deep" / "dangling").symlink_to(base / "missing")
    (mid / "sib" / "up").symlink_to("../deep")
    return os.path.realpath(root)


@settings(max_examples=600, deadline=None)
@given(
    st.integers(min_value=1, max_value=40),
    st.lists(st.sampled_from(_CLIMB_SEGMENTS), min_size=0, max_size=4),
)
def test_leading_dot_dot_resolves_exactly_as_realpath(
    climb_tree: str, up: int, segments: list[str]
) -> None:
    # Up to forty ".." climb past the filesystem root, where realpath stops too.
    relative = "/".join(["..", *([".."] * (up - 1)), *segments])
    expected = _realpath_or_refused(f"{climb_tree}/{relative}")
    assert _resolved_or_refused(relative, climb_tree) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=1, max_value=4),
    st.lists(st.sampled_from(_CLIMB_SEGMENTS), min_size=1, max_size=4),
)
def test_a_climbing_target_gets_the_digest_and_verdict_of_the_full_walk(
    climb_tree: str, up: int, segments: list[str]
) -> None:
    relative = "/".join([*([".."] * up), *segments])
    ctx = context_mapping(workspace=climb_tree)
    pdp = create_default_policy_decision_point()

    def judge() -> object:
        try:
            action = Action.build(GENERIC, "write_to_file", {"TargetFile": relative}, ctx)
        except InvalidToolArgumentsError as refused:  # unresolvable: refused either way
            return type(refused)
        verdict = pdp.evaluate(action)
        return action.digest, action.targets, verdict.kind, verdict.rule_ids

    fast = judge()
    with pytest.MonkeyPatch.context() as patch:  # the resolution before: realpath in full
        patch.setattr(action_module, "_resolve_above", lambda root, relative: None)
        walked = judge()
    assert fast == walked


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(_SEGMENTS), min_size=0, max_size=4))
# A missing directory, "..", then a path through a file: realpath names ws/f/a, which
# names nothing the OS could open (ENOTDIR): refused, like the same path written relative.
@example(["c", "..", "f", "a"])
def test_absolute_targets_inside_the_workspace_resolve_exactly_as_realpath(
    link_tree: str, segments: list[str]
) -> None:
    absolute = "/".join([link_tree, *segments])
    assert _resolved_or_refused(absolute, link_tree) == _realpath_or_refused(absolute)


def test_an_absolute_target_that_only_starts_like_the_workspace_is_resolved_in_full(
    tmp_path: Path,
) -> None:
    root = os.path.realpath(tmp_path / "ws")
    os.mkdir(root)
    os.mkdir(f"{root}-sibling")
    os.symlink(f"{root}-sibling", f"{root}2")
    assert resolve_path(f"{root}2/x", root, on_disk=True) == f"{root}-sibling/x"
    assert resolve_path(f"{root}-sibling/x", root, on_disk=True) == f"{root}-sibling/x"
