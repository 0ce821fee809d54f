"""Errors the workbench raises for bad input: one clear line that says what to do."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

from workbench.words import counted

V = TypeVar("V")


class WorkbenchError(ValueError):
    """Base class: a problem with the user's input, reported without a traceback by the CLI."""


class ModelLoadError(WorkbenchError):
    """The model could not be loaded (missing path, corrupt file, unknown signature or tags)."""


class ConversionParamsError(WorkbenchError):
    """A conversion parameter has an impossible value."""


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an exception's message (TensorFlow's run to pages), or its type."""
    text = str(exc).strip()
    return text.splitlines()[0][:limit] if text else type(exc).__name__


class DuplicateRegistrationError(WorkbenchError):
    """Two families of a registry (op rules, ONNX converters) register the same op type."""


def merge_registry(what: str, parts: Iterable[Mapping[str, V]]) -> dict[str, V]:
    """One registry from its families' tables; an op type in two of them is an error (a
    silent overwrite would make the outcome depend on the families' order)."""
    merged: dict[str, V] = {}
    for part in parts:
        twice = sorted(merged.keys() & part.keys())
        if twice:
            raise DuplicateRegistrationError(
                f"{what}: {counted(len(twice), 'op type')} registered twice "
                f"({', '.join(twice)}); keep one entry")
        merged.update(part)
    return merged
