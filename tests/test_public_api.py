"""The lessons use only the public API: names the package exports, each documented on the API
page, so moving a module behind them changes no lesson."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

import workbench

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# Modules a lesson may import from, besides the package's own names.
PUBLIC_MODULES = {"workbench", "workbench.trt_convert", "workbench.ui"}


def _code(path: Path) -> ast.Module:
    cells = nbformat.read(path, as_version=4).cells
    source = "\n".join(c.source for c in cells if c.cell_type == "code")
    return ast.parse(re.sub(r"^\s*[%!].*$", "", source, flags=re.M))  # no magics


def _workbench_uses(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The workbench modules a lesson imports, and the `workbench.NAME` attributes it reads."""
    modules, names = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("workbench"):
            modules.add(node.module)
            if node.module == "workbench":
                names |= {a.name for a in node.names}
        elif isinstance(node, ast.Import):
            modules |= {a.name for a in node.names if a.name.startswith("workbench")}
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id == "workbench"):
            names.add(node.attr)
    return modules, names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_lessons_use_only_public_names(path: Path) -> None:
    tree = _code(path)
    modules, names = _workbench_uses(tree)
    assert modules <= PUBLIC_MODULES, f"{path.name} imports internals: {modules - PUBLIC_MODULES}"
    public = set(workbench._LAZY_EXPORTS) | {"trt_convert", "ui"}
    assert names <= public, f"{path.name} uses names the package does not export: {names - public}"
    assert ".session.prepared(" not in ast.unparse(tree), "use converter.graph"


def test_every_exported_name_is_documented_on_the_api_page() -> None:
    page = (ROOT / "docs" / "api.md").read_text()
    documented = set(re.findall(r"^::: ([\w.]+)$", page, flags=re.M))
    defined = {name: getattr(workbench, name) for name in workbench._LAZY_EXPORTS}
    missing = [f"{o.__module__}.{o.__qualname__}" for o in defined.values()
               if f"{o.__module__}.{o.__qualname__}" not in documented]
    assert not missing, f"docs/api.md lacks ::: entries for {missing}"
