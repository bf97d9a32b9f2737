"""Every import the README, the docs and the notebooks show resolves, from one place per name."""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path

import jevqueue
import pytest

ROOT = Path(__file__).resolve().parent.parent
_FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def _snippets() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for doc in [ROOT / "README.md", *sorted(ROOT.joinpath("docs").rglob("*.md"))]:
        for index, block in enumerate(_FENCE.findall(doc.read_text(encoding="utf-8"))):
            found.append((f"{doc.relative_to(ROOT)}#{index + 1}", block))
    for notebook in sorted(ROOT.joinpath("examples").glob("*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        for index, cell in enumerate(cells):
            if cell["cell_type"] == "code":
                source = "".join(cell["source"])
                # IPython magics and shell escapes are not Python.
                source = "\n".join(
                    "" if line.lstrip().startswith(("%", "!")) else line
                    for line in source.splitlines()
                )
                found.append((f"{notebook.relative_to(ROOT)}[{index}]", source))
    for script in sorted(ROOT.joinpath("examples").glob("*.py")):
        found.append((str(script.relative_to(ROOT)), script.read_text(encoding="utf-8")))
    return found


def _imports() -> list[tuple[str, str, tuple[str, ...]]]:
    """(where, module, names) for every ``jevqueue`` import in the snippets."""
    out: list[tuple[str, str, tuple[str, ...]]] = []
    for where, source in _snippets():
        try:
            tree = ast.parse(source)
        except SyntaxError as error:
            raise AssertionError(f"{where}: the snippet is not valid Python ({error})") from None
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jevqueue"):
                out.append((where, str(node.module), tuple(alias.name for alias in node.names)))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("jevqueue"):
                        out.append((where, alias.name, ()))
    return out


IMPORTS = _imports()


def test_the_docs_show_imports_at_all() -> None:
    assert len(IMPORTS) > 20  # the collector found the README, docs and notebooks


@pytest.mark.parametrize(("where", "module", "names"), IMPORTS, ids=[i[0] for i in IMPORTS])
def test_every_documented_import_resolves(where: str, module: str, names: tuple[str, ...]) -> None:
    try:
        imported = importlib.import_module(module)
    except ImportError as error:
        if 'pip install "jevqueue[' in str(error):
            pytest.skip(f"{module} needs an extra this environment lacks: {error}")
        raise AssertionError(f"{where}: `import {module}` fails: {error}") from None
    for name in names:
        assert hasattr(imported, name), f"{where}: {module} has no {name!r}"


@pytest.mark.parametrize(("where", "module", "names"), IMPORTS, ids=[i[0] for i in IMPORTS])
def test_day_one_names_come_from_the_top_level(
    where: str, module: str, names: tuple[str, ...]
) -> None:
    if module == "jevqueue":
        advertised = set(jevqueue.__all__)
        hidden = [name for name in names if name not in advertised]
        assert not hidden, (
            f"{where}: from jevqueue import {hidden}: import these from their package instead"
        )
        return
    day_one = [name for name in names if name in jevqueue.__all__]
    assert not day_one, f"{where}: import {day_one} from jevqueue, not from {module}"
    assert not any(part.startswith("_") for part in module.split(".")), (
        f"{where}: {module} is a private module; import from its package"
    )
