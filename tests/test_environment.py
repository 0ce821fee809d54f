"""Every environment variable is declared once (name, meaning, parser) and read through it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from workbench import environment
from workbench.environment import EnvironmentVariableError, Variable, flag, integer, names

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("raw, value",
                         [("1", True), ("TRUE", True), ("false", False), ("0", False)])
def test_flags_read_like_tensorflow(monkeypatch, raw, value):
    monkeypatch.setenv("WORKBENCH_TEST_FLAG", raw)
    assert Variable("WORKBENCH_TEST_FLAG", "", flag, not value).read() is value


def test_a_bad_value_names_the_variable(monkeypatch):
    monkeypatch.setenv(environment.ALLOW_NATIVE_SEGMENT.name, "yes")
    with pytest.raises(EnvironmentVariableError,
                       match="TF_TRT_ALLOW_ENGINE_NATIVE_SEGMENT_EXECUTION='yes'"):
        environment.ALLOW_NATIVE_SEGMENT.read()
    monkeypatch.setenv(environment.MAX_ALLOWED_ENGINES.name, "many")
    with pytest.raises(EnvironmentVariableError, match="must be an integer"):
        environment.MAX_ALLOWED_ENGINES.read()


def test_unset_or_blank_reads_as_the_default(monkeypatch):
    monkeypatch.delenv(environment.MAX_ALLOWED_ENGINES.name, raising=False)
    assert environment.MAX_ALLOWED_ENGINES.read() == 20
    monkeypatch.setenv(environment.MAX_ALLOWED_ENGINES.name, "  ")
    assert environment.MAX_ALLOWED_ENGINES.read() == 20


def test_lists_keep_their_order_and_drop_blanks():
    assert names(" Conv2D,,Relu ") == ("Conv2D", "Relu")
    assert integer("-1") == -1


def test_every_variable_is_declared_and_documented():
    declared = {v.name for v in environment.VARIABLES}
    assert len(declared) == len(environment.VARIABLES)
    assert declared == {value.name for value in vars(environment).values()
                        if isinstance(value, Variable)}
    docs = "\n".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    assert not [name for name in declared if name not in docs]


def test_no_module_reads_our_variables_around_the_declarations():
    pattern = re.compile(r"^(TF_TRT|WORKBENCH)_")
    found = []
    for path in (ROOT / "workbench").rglob("*.py"):
        if path.name == "environment.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("get", "getenv") and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and pattern.match(str(node.args[0].value))):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, "read through workbench.environment instead: " + ", ".join(found)
