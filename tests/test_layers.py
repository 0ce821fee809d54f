"""The package's layering: imports point down only, and no module imports itself in a circle.

Every `import` in every module counts, function-level ones included, so a lazy import cannot hide
an upward dependency or a cycle. The order below is the one in the documentation's architecture page
(docs/architecture.md).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIR = ROOT / "workbench"

# Low to high. A module may import its own layer and the ones before it.
LAYERS: list[tuple[str, ...]] = [
    ("durable_files", "environment", "errors", "hardware", "lazy", "quiet", "tf_compat",
     "tf_private", "words"),
    ("graph",),
    ("conversion",),
    ("engines",),
    ("profiling",),
    ("checks",),
    ("trt_convert",),
    ("viz",),
    ("tuning",),
    ("diagnosis",),
    ("ui",),
    ("cli",),
    ("",),  # workbench/__init__.py: the package's lazy re-exports sit on top
]


# The rooms of engines/, low to high: what an engine is (engines/ itself), its ONNX form, the
# backends that build and run it, the converted model at run time, TensorRT's account of it;
# TF-TRT's own converted models (tftrt/) import no other room.
ENGINE_ROOMS: list[str] = ["", "onnx", "backends", "runtime", "inspection", "tftrt"]


def module_files(package_dir: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under the package."""
    root = package_dir.name
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = list(path.relative_to(package_dir).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join([root, *parts])] = path
    return modules


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The package's module `name` refers to: itself, or the nearest enclosing module."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Modules of the package that `module` imports anywhere in its file."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                drop = node.level - 1 if is_package else node.level
                anchor = anchor[: len(anchor) - drop]
                base = ".".join(anchor + ([base] if base else []))
            # `from pkg import sub` imports the submodule when there is one.
            targets = [f"{base}.{alias.name}" for alias in node.names]
            targets = [t if t in modules else base for t in targets]
        else:
            continue
        for target in targets:
            resolved = _resolve(target, modules)
            if resolved and resolved != module:
                found.add(resolved)
    return found


# TensorFlow's private modules are imported in workbench/tf_private/ only (its docstring says
# why each is needed): a change of TensorFlow's internals then breaks one place.
TF_PRIVATE_HOME = "tf_private"
TF_PRIVATE_PREFIXES = ("tensorflow.python", "tensorflow.compiler")


def tf_private_imports(package_dir: Path) -> list[str]:
    """`module imports name` for every import of a TensorFlow-private module (an `import`,
    or `importlib.import_module` of a literal name) outside the package's tf_private/."""
    found = []
    for module, path in module_files(package_dir).items():
        if module.split(".")[1:2] == [TF_PRIVATE_HOME]:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module"
                  and node.args and isinstance(node.args[0], ast.Constant)):
                names = [str(node.args[0].value)]
            else:
                continue
            found += [f"{module} imports {name}" for name in names
                      if name.startswith(TF_PRIVATE_PREFIXES)]
    return sorted(found)


# TF-TRT's Python API for users: the package's own modules use the services under it (the
# checks, the conversion), so the facade can follow TF-TRT's quirks without moving them.
FACADE = "trt_convert"


def facade_importers(graph: dict[str, set[str]], package: str) -> list[str]:
    """Modules that import `package`'s facade; the package's `__init__` may re-export it."""
    return sorted(module for module, targets in graph.items()
                  if f"{package}.{FACADE}" in targets and module != package)


# One name, one module: a name found twice sends a reader to the wrong file. The one exception
# is deliberate: an op family's rules (conversion/ops/) and its ONNX exporters
# (engines/onnx/ops/) carry the family's name, so a new op goes to the same name in both.
OP_FAMILY_MIRROR = frozenset({"conversion/ops", "engines/onnx/ops"})


def shared_module_names(package_dir: Path) -> dict[str, list[str]]:
    """Module file name -> the folders holding it, for every name in more than one folder
    (`__init__.py` and the like aside), an op family's pair of modules aside."""
    folders: dict[str, list[str]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        if not path.name.startswith("__"):
            folder = path.parent.relative_to(package_dir).as_posix()
            folders.setdefault(path.name, []).append(folder)
    return {name: where for name, where in folders.items()
            if len(where) > 1 and set(where) != OP_FAMILY_MIRROR}


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    modules = module_files(package_dir)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def layer_of(module: str, layers: list[tuple[str, ...]]) -> int:
    first = module.partition(".")[2].partition(".")[0]
    for rank, names in enumerate(layers):
        if first in names:
            return rank
    raise AssertionError(f"{module} is in no layer: add its name to LAYERS in tests/test_layers.py")


def upward_imports(graph: dict[str, set[str]], layers: list[tuple[str, ...]]) -> list[str]:
    return sorted(f"{module} imports {target} (a higher layer)"
                  for module, targets in graph.items() for target in targets
                  if layer_of(target, layers) > layer_of(module, layers))


def room_of(module: str) -> int | None:
    """The rank of an engines/ module's room; None outside engines/."""
    parts = module.split(".")
    if parts[1:2] != ["engines"]:
        return None
    room = parts[2] if len(parts) > 3 or (len(parts) == 3 and parts[2] in ENGINE_ROOMS) else ""
    return ENGINE_ROOMS.index(room) if room in ENGINE_ROOMS else 0


def upward_room_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{module} imports {target} (a higher room of engines/)"
                  for module, targets in graph.items() if room_of(module) is not None
                  for target in targets
                  if room_of(target) is not None and room_of(target) > room_of(module))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def shortest_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One shortest import circle through the component's first module, for the message."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for succ in sorted(graph[node] & members):
                if succ == start:
                    return paths[node] + [start]
                if succ not in paths:
                    paths[succ] = paths[node] + [succ]
                    following.append(succ)
        frontier = following
    raise AssertionError(f"{start} is on no cycle")


def test_every_module_has_a_layer():
    for module in import_graph(PACKAGE_DIR):
        layer_of(module, LAYERS)


def test_no_upward_imports():
    problems = upward_imports(import_graph(PACKAGE_DIR), LAYERS)
    assert not problems, "upward imports:\n" + "\n".join(problems)


def test_engine_rooms_import_down_only():
    graph = import_graph(PACKAGE_DIR)
    assert {m.split(".")[2] for m in graph if room_of(m) and m.count(".") >= 2} == set(
        ENGINE_ROOMS[1:]), "a room of engines/ is missing from ENGINE_ROOMS, or one is gone"
    problems = upward_room_imports(graph)
    assert not problems, "upward imports between engines/ rooms:\n" + "\n".join(problems)


def test_no_import_cycles():
    graph = import_graph(PACKAGE_DIR)
    found = [f"{' -> '.join(shortest_cycle(graph, c))} ({len(c)} modules in this tangle)"
             for c in cycles(graph)]
    assert not found, "import cycles:\n" + "\n".join(found)


def test_tensorflow_private_modules_are_imported_in_tf_private_only():
    problems = tf_private_imports(PACKAGE_DIR)
    assert not problems, ("TensorFlow-private imports outside workbench/tf_private/ (add a "
                          "function there instead):\n" + "\n".join(problems))


def test_tf_private_checker_finds_each_kind_of_import(tmp_path):
    package = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "def f():\n    from tensorflow.python.framework import ops\n",
        "pkg/b.py": "import importlib\nimportlib.import_module('tensorflow.compiler.x')\n",
        "pkg/c.py": "import tensorflow.python.eager.context\nimport tensorflow as tf\n",
        "pkg/tf_private/__init__.py": "from tensorflow.python.grappler import item\n",
    })
    assert tf_private_imports(package) == [
        "pkg.a imports tensorflow.python.framework", "pkg.b imports tensorflow.compiler.x",
        "pkg.c imports tensorflow.python.eager.context"]


def test_nothing_in_the_package_imports_the_facade():
    importers = facade_importers(import_graph(PACKAGE_DIR), PACKAGE_DIR.name)
    assert not importers, ("these modules import workbench.trt_convert (TF-TRT's API for users); "
                           "use the services under it instead:\n" + "\n".join(importers))


def test_facade_checker_counts_imports_not_the_text_of_one(tmp_path):
    package = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/trt_convert.py": "",
        # checks/export_formats.py writes this line into the scripts it exports: a string
        "pkg/script.py": 'IMPORT = "from pkg import trt_convert as trt"\n',
        "pkg/cli.py": "def run():\n    from pkg import trt_convert\n",
    })
    assert facade_importers(import_graph(package), "pkg") == ["pkg.cli"]


def test_no_two_modules_share_a_name():
    shared = shared_module_names(PACKAGE_DIR)
    assert not shared, ("modules sharing a name (rename one to say what it holds; see "
                        "docs/architecture.md):\n" + "\n".join(
                            f"{name}: {', '.join(where)}" for name, where in shared.items()))


def test_name_checker_allows_the_op_family_mirror_only(tmp_path):
    package = _write(tmp_path, {
        "pkg/__init__.py": "", "pkg/cli/__init__.py": "", "pkg/checks/__init__.py": "",
        "pkg/cli/export.py": "", "pkg/checks/export.py": "",
        "pkg/conversion/ops/conv.py": "", "pkg/engines/onnx/ops/conv.py": "",
        "pkg/conversion/ops/pooling.py": "", "pkg/engines/onnx/ops/pooling.py": "",
        "pkg/viz/pooling.py": "",
    })
    assert shared_module_names(package) == {
        "export.py": ["checks", "cli"],
        "pooling.py": ["conversion/ops", "engines/onnx/ops", "viz"]}


def test_architecture_page_states_the_same_order():
    text = (ROOT / "docs" / "architecture.md").read_text()
    start = text.index("The layers, low to high:\n\n") + len("The layers, low to high:\n\n")
    line = " ".join(text[start:text.index("\n\n", start)].split())
    stated = [tuple(name.strip(" `").removeprefix("workbench/__init__")
                    for name in re.sub(r"\(.*?\)", "", group).split(","))
              for group in line.split("<")]
    assert stated == LAYERS, "docs/architecture.md's layers and LAYERS disagree"


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_checker_finds_an_upward_import_and_a_cycle(tmp_path):
    package = _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/low/__init__.py": "",
        "pkg/low/a.py": "def f():\n    from pkg.high import b\n",  # upward, inside a function
        "pkg/low/c.py": "from . import d\n",
        "pkg/low/d.py": "def g():\n    from .c import x\n",  # c <-> d, one side lazy
        "pkg/high/__init__.py": "",
        "pkg/high/b.py": "from ..low import a\nimport pkg.low.c\n",
    })
    layers = [("low",), ("high",), ("",)]
    graph = import_graph(package)
    assert graph["pkg.high.b"] == {"pkg.low.a", "pkg.low.c"}
    assert upward_imports(graph, layers) == ["pkg.low.a imports pkg.high.b (a higher layer)"]
    assert cycles(graph) == [["pkg.high.b", "pkg.low.a"], ["pkg.low.c", "pkg.low.d"]]
    assert shortest_cycle(graph, ["pkg.low.c", "pkg.low.d"]) == ["pkg.low.c", "pkg.low.d",
                                                                "pkg.low.c"]


def test_checker_accepts_a_clean_package(tmp_path):
    package = _write(tmp_path, {
        "pkg/__init__.py": "from pkg.high.b import run\n",
        "pkg/low/__init__.py": "from .a import f\n",
        "pkg/low/a.py": "import os\ndef f():\n    return os.sep\n",
        "pkg/high/__init__.py": "",
        "pkg/high/b.py": "from pkg.low import f\ndef run():\n    return f()\n",
    })
    layers = [("low",), ("high",), ("",)]
    graph = import_graph(package)
    assert graph["pkg.high.b"] == {"pkg.low"}
    assert upward_imports(graph, layers) == []
    assert cycles(graph) == []


def test_a_module_outside_every_layer_is_named(tmp_path):
    package = _write(tmp_path, {"pkg/__init__.py": "", "pkg/stray.py": ""})
    with pytest.raises(AssertionError, match="pkg.stray is in no layer"):
        layer_of("pkg.stray", [("",)])
    assert set(import_graph(package)) == {"pkg", "pkg.stray"}


def test_room_checker_finds_an_upward_import():
    graph = {"workbench.engines.onnx.segment_export": {"workbench.engines.runtime.hybrid_graph"},
             "workbench.engines.runtime.hybrid_graph": {"workbench.engines.segment"},
             "workbench.engines.segment": set()}
    assert upward_room_imports(graph) == [
        "workbench.engines.onnx.segment_export imports workbench.engines.runtime.hybrid_graph"
        " (a higher room of engines/)"]
