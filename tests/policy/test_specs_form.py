"""One tool-description form: ``specs=`` of every plugin, built by ``registry_from_specs``."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from jevqueue import ConfigurationError, ToolRegistry, ToolSpec, generic_registry
from jevqueue.policy import registry_from_specs

READ = ToolSpec("read_file", side_effects={"file_read"}, path_fields=("path",))
SHELL = ToolSpec("shell", side_effects={"shell_command"}, cwd_field="cwd")


def test_specs_become_a_registry_in_order() -> None:
    registry = registry_from_specs([READ, SHELL])
    assert list(registry) == ["read_file", "shell"]
    assert registry.get("read_file") is READ


def test_a_registry_is_accepted_as_specs() -> None:
    assert list(registry_from_specs(generic_registry())) == ["write_to_file", "run_command"]


@pytest.mark.parametrize(
    ("specs", "words"),
    [
        ("read_file", "list of ToolSpec"),
        ({"read_file": READ}, "list of ToolSpec"),
        (READ, "list of ToolSpec"),
        ([READ, "shell"], "must be a ToolSpec"),
        ([READ, READ], "declared twice"),
    ],
)
def test_anything_but_specs_is_refused(specs: Any, words: str) -> None:
    with pytest.raises(ConfigurationError, match=words):
        registry_from_specs(specs, owner="policy_tool_node")


def test_the_old_registry_spelling_warns_at_the_callers_line() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        registry = registry_from_specs([SHELL], registry=ToolRegistry([READ]), owner="ToolGuard")
    assert list(registry) == ["read_file", "shell"]
    (warning,) = caught
    assert issubclass(warning.category, DeprecationWarning)
    assert "ToolGuard: registry= is deprecated" in str(warning.message)
    assert Path(warning.filename).name == Path(__file__).name


def test_the_old_registry_spelling_must_still_be_a_registry() -> None:
    with pytest.warns(DeprecationWarning), pytest.raises(ConfigurationError, match="ToolRegistry"):
        registry_from_specs(registry={"read_file": READ}, owner="ToolGuard")  # type: ignore[arg-type]
