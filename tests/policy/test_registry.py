from __future__ import annotations

import pytest
from jevqueue.errors import ConfigurationError, UnregisteredToolError, UsageError
from jevqueue.policy import (
    FILE_READ,
    FILE_WRITE,
    SHELL_COMMAND,
    ToolRegistry,
    ToolSpec,
    antigravity_registry,
    generic_registry,
)


def test_generic_registry_holds_exactly_the_two_tools() -> None:
    registry = generic_registry()
    assert sorted(registry) == ["run_command", "write_to_file"]
    write = registry.get("write_to_file")
    assert write.side_effects == frozenset({FILE_WRITE})
    assert write.path_fields == ("TargetFile",)
    assert write.required_path_fields == ("TargetFile",)
    assert write.content_fields == ("CodeContent",)
    run = registry.get("run_command")
    assert run.side_effects == frozenset({SHELL_COMMAND})
    assert run.cwd_field == "Cwd"
    assert run.content_fields == ("CommandLine",)


def test_antigravity_registry_adds_its_tools_with_real_argument_names() -> None:
    registry = antigravity_registry()
    assert sorted(registry) == [
        "multi_replace_file_content",
        "run_command",
        "view_file",
        "write_to_file",
    ]
    assert registry.get("view_file").path_fields == ("AbsolutePath",)
    assert registry.get("view_file").side_effects == frozenset({FILE_READ})
    multi = registry.get("multi_replace_file_content")
    assert multi.path_fields == ("TargetFile",)
    assert multi.content_fields == ("ReplacementChunks/*/ReplacementContent",)


def test_registries_are_independent_copies() -> None:
    first = generic_registry()
    first.register(ToolSpec("mine", side_effects={"network"}))  # type: ignore[arg-type]
    assert "mine" in first
    assert "mine" not in generic_registry()


@pytest.mark.parametrize(
    "name",
    [
        "Write_to_file",
        "WRITE_TO_FILE",
        "write_to_file ",
        " write_to_file",
        "write_to_file\n",
        "write_to_f\u0456le",  # Cyrillic i
        "\uff57\uff52\uff49\uff54\uff45_to_file",  # fullwidth
        "write\u200bto_file",
        "write_to_file\x00",
        "",
    ],
)
def test_lookalike_names_are_not_registered(name: str) -> None:
    registry = generic_registry()
    assert name not in registry
    with pytest.raises(UnregisteredToolError) as caught:
        registry.get(name)
    assert isinstance(caught.value, UsageError)


def test_lookalike_error_names_the_registered_tool() -> None:
    with pytest.raises(UnregisteredToolError, match="looks like 'write_to_file'"):
        generic_registry().get("Write_To_File")


def test_non_string_tool_name_is_refused() -> None:
    with pytest.raises(UnregisteredToolError):
        generic_registry().get(None)  # type: ignore[arg-type]
    assert 1 not in generic_registry()


def test_user_tools_register_with_their_facts() -> None:
    spec = ToolSpec(
        "deploy",
        side_effects=frozenset({"network", SHELL_COMMAND}),
        path_fields=("manifest",),
        required_path_fields=("manifest", "workdir"),
        cwd_field="workdir",
        content_fields=("notes", "steps/*/script"),
        schema={
            "type": "object",
            "properties": {
                "replicas": {"type": "integer"},
                "manifest": {"type": "string"},
                "workdir": {"type": "string"},
                "notes": {"type": "string"},
                "steps": {"type": "array"},
            },
        },
    )
    registry = ToolRegistry().register(spec)
    assert registry.get("deploy") is spec
    assert len(registry) == 1
    assert registry.specs() == (spec,)


def test_duplicate_registration_needs_replace() -> None:
    registry = generic_registry()
    spec = ToolSpec("write_to_file", side_effects=frozenset({FILE_WRITE}))
    with pytest.raises(ConfigurationError):
        registry.register(spec)
    registry.register(spec, replace=True)
    assert registry.get("write_to_file") is spec


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": "Write To File", "side_effects": frozenset()},
        {"name": "wríte", "side_effects": frozenset()},
        {"name": "", "side_effects": frozenset()},
        {"name": "t", "side_effects": "file_write"},
        {"name": "t", "side_effects": frozenset({"file write"})},
        {"name": "t", "side_effects": frozenset(), "required_path_fields": ("p",)},
        {"name": "t", "side_effects": frozenset(), "path_fields": ("p", "p")},
        {"name": "t", "side_effects": frozenset(), "path_fields": ("c",), "cwd_field": "c"},
        {"name": "t", "side_effects": frozenset(), "schema": {"type": "no-such-type"}},
        {"name": "t", "side_effects": frozenset(), "path_fields": "TargetFile"},
    ],
)
def test_malformed_specs_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        ToolSpec(**kwargs)  # type: ignore[arg-type]


def test_register_takes_only_specs() -> None:
    with pytest.raises(ConfigurationError):
        ToolRegistry().register({"name": "x"})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "schema",
    [
        {"$schema": ["not", "a", "string"]},
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "a{4294967296}"}}},
    ],
    ids=["schema-keyword-not-a-string", "pattern-repetition-too-large"],
)
def test_a_schema_jsonschema_cannot_read_is_a_configuration_error(schema: object) -> None:
    with pytest.raises(ConfigurationError, match="the schema is not a JSON Schema jsonschema can"):
        ToolSpec("t", side_effects=(), schema=schema)  # type: ignore[arg-type]
