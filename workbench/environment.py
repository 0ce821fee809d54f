"""Every environment variable the workbench reads: its name, its meaning and how it is parsed.

TF-TRT's variables (`TF_TRT_*`) keep TF-TRT's meaning and TensorFlow's parsing (a flag reads
like `ReadBoolFromEnvVar`: 1/0 or true/false in any case); the workbench's own start with
`WORKBENCH_`. Code reads a variable through its declaration here (`MAX_ALLOWED_ENGINES.read()`),
never through `os.environ`, so each variable has one parser and one place that says what it does.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from workbench.errors import WorkbenchError

T = TypeVar("T")


class EnvironmentVariableError(WorkbenchError):
    """An environment variable holds a value its parser refuses."""


@dataclass(frozen=True)
class Variable(Generic[T]):
    """One environment variable: unset or blank reads as `default`."""

    name: str
    meaning: str
    parse: Callable[[str], T]
    default: T

    def read(self) -> T:
        raw = os.environ.get(self.name, "").strip()
        if not raw:
            return self.default
        try:
            return self.parse(raw)
        except ValueError as error:
            raise EnvironmentVariableError(f"{self.name}={raw!r}: {error}") from None


def flag(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in ("1", "true"):
        return True
    if lowered in ("0", "false"):
        return False
    raise ValueError("must be true/false or 1/0")


def names(raw: str) -> tuple[str, ...]:
    """A comma-separated list, in its order, blanks dropped."""
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def integer(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ValueError("must be an integer") from None


def text(raw: str) -> str:
    return raw


# --- TF-TRT's ------------------------------------------------------------------------------
OP_DENYLIST = Variable(
    "TF_TRT_OP_DENYLIST", "op types never converted (comma-separated)", names, ())
MAX_ALLOWED_ENGINES = Variable(
    "TF_TRT_MAX_ALLOWED_ENGINES", "the engine limit; <= 0: no limit", integer, 20)
OP_FAKELIST = Variable(
    "TF_TRT_OP_FAKELIST", "op types treated as supported (TF-TRT's debug converter)", names, ())
EXPERIMENTAL_FEATURES = Variable(
    "TF_TRT_EXPERIMENTAL_FEATURES",
    "TF-TRT's experimental switches, e.g. reject_all_fp_cast_ops", names, ())
SHOW_DETAILED_REPORT = Variable(
    "TF_TRT_SHOW_DETAILED_REPORT",
    "1: the non-conversion report per op and reason; a path: that report as CSV", text, "")
ABORT_ENGINE_BUILD = Variable(
    "TF_TRT_ABORT_CUDA_ENGINE_BUILD", "every engine build fails (exercises the fallback)",
    flag, False)
ALLOW_NATIVE_SEGMENT = Variable(
    "TF_TRT_ALLOW_ENGINE_NATIVE_SEGMENT_EXECUTION",
    "false: an engine that cannot run is an error, not its native segment", flag, True)
EXPORT_GRAPH_VIZ_PATH = Variable(
    "TF_TRT_EXPORT_GRAPH_VIZ_PATH", "convert() writes the converted graph there as .dot", text, "")

# --- The workbench's -----------------------------------------------------------------------
CACHE_DIR = Variable(
    "WORKBENCH_CACHE_DIR",
    "the prepared-graph cache's folder; off/0/false/none: no cache", text, "")
CACHE_MAX_BYTES = Variable(
    "WORKBENCH_CACHE_MAX_BYTES", "the prepared-graph cache's size cap", integer, 2 << 30)
NATIVE_CALL_MAX_BYTES = Variable(
    "WORKBENCH_NATIVE_CALL_MAX_BYTES",
    "engines larger than this run through Python, not the compiled op", integer, 256 << 20)
ENGINE_CALLS = Variable(
    "WORKBENCH_ENGINE_CALLS", "python: every engine call through Python (no compiled op)",
    text, "")
CXX = Variable(
    "WORKBENCH_CXX", "the compiler of the engine op (else $CXX, else g++)", text, "")
TRTEXEC_FIXTURES = Variable(
    "WORKBENCH_TRTEXEC_FIXTURES",
    "another folder of real trtexec exports than sample_models/trtexec", text, "")

VARIABLES: tuple[Variable, ...] = (
    OP_DENYLIST, MAX_ALLOWED_ENGINES, OP_FAKELIST, EXPERIMENTAL_FEATURES, SHOW_DETAILED_REPORT,
    ABORT_ENGINE_BUILD, ALLOW_NATIVE_SEGMENT, EXPORT_GRAPH_VIZ_PATH, CACHE_DIR, CACHE_MAX_BYTES,
    NATIVE_CALL_MAX_BYTES, ENGINE_CALLS, CXX, TRTEXEC_FIXTURES)
