"""The promises the layout makes: a framework-free core, honest plugins, a pinned surface."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FRAMEWORKS = {
    "langgraph",
    "langchain",
    "langchain_core",
    "langchain_openai",
    "crewai",
    "autogen",
    "autogen_agentchat",
    "autogen_core",
    "llama_index",
    "mcp",
    "pydantic_ai",
    "run_agent",
    "hermes",
    "openai",
    "httpx",
}


def _imported_roots(source: str) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize(
    "module", sorted(ROOT.joinpath("core").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_core_never_imports_a_framework(module: Path) -> None:
    found = _imported_roots(module.read_text(encoding="utf-8")) & FRAMEWORKS
    assert not found, f"{module.relative_to(ROOT)} imports {sorted(found)}; move it to plugins/"


def _plugin_packages() -> list[Path]:
    return sorted(p.parent for p in ROOT.joinpath("plugins").glob("*/__init__.py"))


@pytest.mark.parametrize("package", _plugin_packages(), ids=lambda p: p.name)
def test_each_plugin_says_what_its_framework_cannot_force(package: Path) -> None:
    docstring = ast.get_docstring(ast.parse(package.joinpath("__init__.py").read_text("utf-8")))
    assert docstring, f"plugins/{package.name}/__init__.py has no module docstring"
    assert "cannot" in docstring.lower(), (
        f"plugins/{package.name}: the module docstring must say plainly where the framework "
        "cannot truly force a tool"
    )


def test_public_names_resolve_and_are_pinned() -> None:
    import jevqueue

    for name in jevqueue.__all__:
        assert getattr(jevqueue, name) is not None, name
    assert jevqueue.Path.TOOL.value == "tool"  # the contract's name, outside __all__
    assert set(jevqueue.__all__) >= {
        "Governor",
        "Guard",
        "Judgement",
        "ApprovalRequest",
        "Approver",
        "ApprovalDeclinedError",
        "declare_side_effect",
        "shipped_policy_path",
        "Ballot",
        "LexicalBallot",
        "Thresholds",
        "Host",
        "JevError",
        "PolicyEnforcementPoint",
        "create_default_policy_decision_point",
        "ApprovalRecord",
        "UnfulfilledObligationError",
        "ExecutionContext",
        "ApprovalAuthority",
        "SignedApprovalVerifier",
        "SQLiteAuditLog",
    }


def test_path_values_are_exactly_the_nine_paths() -> None:
    from jevqueue import Path as RoutePath

    assert sorted(p.value for p in RoutePath) == sorted(
        [
            "tool",
            "static_tool",
            "prose",
            "clarify",
            "risk_stop",
            "delegate",
            "error_delegate",
            "error_raise",
            "interrupted",
        ]
    )


def test_every_core_module_imports() -> None:
    import jevqueue

    for info in pkgutil.walk_packages(jevqueue.__path__, "jevqueue."):
        if info.name.startswith("jevqueue.plugins"):
            continue
        importlib.import_module(info.name)


def test_importing_jevqueue_is_cheap() -> None:
    code = (
        "import sys, jevqueue; from jevqueue import Governor, Path; "
        "heavy = {'sqlite3', 'cryptography', 'httpx', 'langgraph', 'crewai'}; "
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"`import jevqueue` pulled in {out.stdout.strip()}"


def test_judging_a_call_without_a_schema_never_imports_jsonschema() -> None:
    # jsonschema takes about a tenth of a second to import: only a schema needs it.
    code = (
        "import sys, tempfile\n"
        "from jevqueue import PolicyEnforcementPoint, create_default_policy_decision_point\n"
        "from jevqueue.adapters import GenericAdapter\n"
        "gate = GenericAdapter(PolicyEnforcementPoint(create_default_policy_decision_point()))\n"
        "context = {'task_id': 't', 'actor_id': 'a', 'git_sha': '0' * 40,\n"
        "           'environment': 'local', 'workspace': tempfile.gettempdir()}\n"
        "assert gate.intercept_tool_call('write_to_file', {'TargetFile': 'x.py',\n"
        "                                'CodeContent': 'x = 1'}, context) is True\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'jsonschema'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"judging a call imported {out.stdout.strip()}"


def test_all_lists_exactly_the_lazy_exports() -> None:
    import jevqueue

    assert len(set(jevqueue.__all__)) == len(jevqueue.__all__)
    # Path resolves but stays out of __all__, so a star import keeps pathlib.Path.
    assert set(jevqueue.__all__) == {*jevqueue._EXPORTS, "__version__"} - {"Path"}
    assert not set(jevqueue._EXPORTS) & set(jevqueue._COMPATIBLE)


def test_a_star_import_keeps_pathlib_path() -> None:
    namespace: dict[str, object] = {}
    exec("from pathlib import Path\nfrom jevqueue import *", namespace)
    import pathlib

    assert namespace["Path"] is pathlib.Path


def test_names_the_top_level_once_exported_still_resolve() -> None:
    import jevqueue

    for name in jevqueue._COMPATIBLE:
        assert getattr(jevqueue, name) is not None, name


@pytest.mark.parametrize("package", ["governor", "policy", "policy_files", "approvals", "audit"])
def test_each_package_exports_what_its_all_lists(package: str) -> None:
    module = importlib.import_module(f"jevqueue.{package}")
    assert len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None, f"jevqueue.{package}.{name}"


def test_the_top_level_names_the_two_halves_and_nothing_else() -> None:
    # The architecture is visible in the tree: a newcomer finds each half in one folder.
    top = sorted(p.name for p in ROOT.joinpath("core").iterdir() if p.name != "__pycache__")
    assert top == [
        "__init__.py",
        "_lazy.py",
        "adapters",
        "approvals",
        "audit",
        "cli",
        "db",
        "demo",
        "errors.py",
        "governor",
        "host.py",
        "policy",
        "policy_files",
        "py.typed",
        "serve",
        "testing",
    ]


def test_the_architecture_map_matches_the_tree() -> None:
    text = ROOT.joinpath("docs", "architecture.md").read_text(encoding="utf-8")
    tree = text.split("```", 2)[1]
    for package in ("governor", "policy"):
        on_disk = {p.name for p in ROOT.joinpath("core", package).glob("_*.py")} - {"__init__.py"}
        section = tree.split(f"├── {package}/", 1)[1]
        section = section.split("\n├── ", 1)[0]
        listed = set(re.findall(r"(_[a-z_]+\.py)", section))
        assert listed == on_disk, f"docs/architecture.md lists core/{package}/ as {sorted(listed)}"
    for folder in ROOT.joinpath("core").iterdir():
        if folder.is_dir() and folder.name != "__pycache__":
            assert f"── {folder.name}/" in tree, (
                f"docs/architecture.md does not show core/{folder.name}/"
            )
    for plugin in _plugin_packages():
        assert f"── {plugin.name}/" in tree, (
            f"docs/architecture.md does not show plugins/{plugin.name}/"
        )
