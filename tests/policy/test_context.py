from __future__ import annotations

from typing import Any

import pytest
from jevqueue.errors import InvalidContextError, UsageError
from jevqueue.policy import ExecutionContext

from .conftest import SHA, context_mapping


def test_coerce_builds_a_validated_context() -> None:
    ctx = ExecutionContext.coerce(context_mapping())
    assert ctx == ExecutionContext("task-42", "coding-agent", "/workspace/project", SHA, "local")
    assert ctx.as_dict() == context_mapping()


def test_environment_defaults_to_local() -> None:
    values = context_mapping()
    del values["environment"]
    assert ExecutionContext.coerce(values).environment == "local"


def test_coerce_returns_a_context_unchanged() -> None:
    ctx = ExecutionContext.coerce(context_mapping())
    assert ExecutionContext.coerce(ctx) is ctx


@pytest.mark.parametrize("field", ["task_id", "actor_id", "workspace", "git_sha"])
def test_missing_field_is_named(field: str) -> None:
    values = context_mapping()
    del values[field]
    with pytest.raises(InvalidContextError) as caught:
        ExecutionContext.coerce(values)
    assert caught.value.field == field
    assert field in str(caught.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("task_id", ""),
        ("task_id", "unknown"),
        ("task_id", "UNKNOWN"),
        ("task_id", "None"),
        ("task_id", " task-42"),
        ("task_id", "task\n42"),
        ("task_id", 42),
        ("task_id", None),
        ("actor_id", "unknown"),
        ("actor_id", "null"),
        ("actor_id", "x" * 300),
        ("workspace", "/"),
        ("workspace", "//"),
        ("workspace", "/."),
        ("workspace", "relative/path"),
        ("workspace", "~/project"),
        ("workspace", ""),
        ("workspace", "/work\x00space"),
        ("git_sha", "HEAD"),
        ("git_sha", "head"),
        ("git_sha", "main"),
        ("git_sha", "abc"),
        ("git_sha", "0123456z"),
        ("git_sha", "0" * 65),
        ("git_sha", ""),
        ("environment", ""),
        ("environment", "unknown"),
        ("environment", "prod\ud800"),
    ],
)
def test_ambient_or_malformed_values_are_refused(field: str, value: Any) -> None:
    with pytest.raises(InvalidContextError) as caught:
        ExecutionContext.coerce(context_mapping(**{field: value}))
    assert caught.value.field == field
    assert isinstance(caught.value, UsageError)


def test_direct_construction_validates_too() -> None:
    with pytest.raises(InvalidContextError) as caught:
        ExecutionContext("task", "actor", "/", SHA)
    assert caught.value.field == "workspace"


def test_unknown_key_is_refused() -> None:
    with pytest.raises(InvalidContextError) as caught:
        ExecutionContext.coerce(context_mapping(safe="yes"))
    assert caught.value.field == "safe"


def test_not_a_mapping_is_refused() -> None:
    with pytest.raises(InvalidContextError):
        ExecutionContext.coerce(["task-42"])  # type: ignore[arg-type]


def test_str_subclass_is_refused() -> None:
    class Sneaky(str):
        pass

    with pytest.raises(InvalidContextError) as caught:
        ExecutionContext.coerce(context_mapping(actor_id=Sneaky("coding-agent")))
    assert caught.value.field == "actor_id"


def test_workspace_is_normalised_and_sha_lowercased() -> None:
    ctx = ExecutionContext.coerce(
        context_mapping(workspace="//workspace/./project/", git_sha=SHA.upper())
    )
    assert ctx.workspace == "/workspace/project"
    assert ctx.git_sha == SHA


def test_seven_and_sixty_four_hex_digits_are_accepted() -> None:
    assert ExecutionContext.coerce(context_mapping(git_sha="abcdef0")).git_sha == "abcdef0"
    assert ExecutionContext.coerce(context_mapping(git_sha="a" * 64)).git_sha == "a" * 64


def test_context_is_frozen() -> None:
    ctx = ExecutionContext.coerce(context_mapping())
    with pytest.raises(AttributeError):
        ctx.workspace = "/"  # type: ignore[misc]


def test_cached_contexts_are_still_validated_per_value() -> None:
    good = ExecutionContext.coerce(context_mapping())
    assert ExecutionContext.coerce(context_mapping()) == good
    with pytest.raises(InvalidContextError):
        ExecutionContext.coerce(context_mapping(task_id="unknown"))
