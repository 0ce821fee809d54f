"""TensorFlow's import-time chatter kept off stderr, on every CPU.

TensorFlow's C++ libraries log while they load, before `TF_CPP_MIN_LOG_LEVEL` applies: absl's
"All log messages before absl::InitializeLog() ..." line, the oneDNN notice (only on CPUs where
oneDNN is on by default, e.g. with AVX-512), the CPU-feature guard, TF-TRT's "Could not find
TensorRT" in TF <= 2.17. So the first `import tensorflow` runs with file descriptor 2 redirected
to a file; afterwards only the log lines the level lets through (and anything that is not a log
line) are written back, and a failed import replays everything. `import workbench` installs
this; `TF_CPP_MIN_LOG_LEVEL=0` or the CLI's `--debug` keep everything. The finder that catches
the first import also puts the workbench's TensorFlow settings in the environment
(`lazy.before_tensorflow_import`), whichever route imports TensorFlow first.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

from workbench.lazy import (
    after_tensorflow_import,
    before_tensorflow_import,
    run_after_import_callbacks,
)

DEFAULT_LEVEL = 2  # hide INFO and WARNING, as TF_CPP_MIN_LOG_LEVEL=2 does after the import
SEVERITIES = "IWEF"  # absl/TF severity letters, in TF_CPP_MIN_LOG_LEVEL's order
# absl's format (TF >= 2.18) and TF's own (TF <= 2.17): the severity letter is group 1.
_LOG_LINE = re.compile(
    r"^(?:([IWEF])\d{4} [\d:.]+ +\d+ [^\]\s]+\] "
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: ([IWEF]) [^\]\s]+\] )")
_CONTINUATION = re.compile(r"\s|To enable the following instructions")
_ABSL_PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called"


def environment_level() -> int:
    """`TF_CPP_MIN_LOG_LEVEL` as TensorFlow reads it (unset or unreadable: our default, 2)."""
    try:
        return int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", DEFAULT_LEVEL))
    except ValueError:
        return DEFAULT_LEVEL


class LogFilter:
    """Decides line by line which of TensorFlow's native log lines pass at `level`: absl's
    preamble and the entries below `level` go, with their continuation lines (indented, or the
    CPU-feature guard's second line); every other line is kept."""

    def __init__(self, level: int):
        self.level, self._dropping = level, False

    def keep(self, line: str) -> bool:
        match = _LOG_LINE.match(line)
        if match:
            self._dropping = SEVERITIES.index(match.group(1) or match.group(2)) < self.level
        elif line.startswith(_ABSL_PREAMBLE):
            self._dropping = False
            return False
        elif not _CONTINUATION.match(line):
            self._dropping = False
        return not self._dropping


def kept_lines(text: str, level: int) -> str:
    """`text` as `LogFilter` passes it."""
    log_filter = LogFilter(level)
    return "".join(line for line in text.splitlines(keepends=True) if log_filter.keep(line))


def filter_native_stderr(level: int) -> None:
    """For the rest of the process, what native code writes to fd 2 passes through `LogFilter`;
    Python's `sys.stderr` keeps the real stderr. For the CLI: some native lines come after the
    import and ignore TF_CPP_MIN_LOG_LEVEL (absl's preamble and TF 2.17's Grappler device count)."""
    if sys.stderr is not sys.__stderr__:  # already redirected (by us, or captured by a caller)
        return
    _flush_stderr()
    try:
        real = os.dup(2)
    except OSError:  # no stderr at all: nothing to keep clean
        return
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    sys.stderr = open(real, "w", buffering=1, errors="backslashreplace")
    threading.Thread(target=_pump, args=(read_end, real, level), daemon=True).start()


def _pump(read_end: int, real: int, level: int) -> None:
    log_filter = LogFilter(level)
    with open(read_end, "rb") as source:
        for raw in source:
            if log_filter.keep(raw.decode(errors="replace")):
                os.write(real, raw)


@contextlib.contextmanager
def filtered_stderr(level: int) -> Iterator[None]:
    """Native and Python writes to fd 2 inside the block pass through `kept_lines` at its end;
    when the block raises, everything written is replayed as it was."""
    _flush_stderr()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr at all: nothing to keep clean
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        failed = True
        try:
            yield
            failed = False
        finally:
            _flush_stderr()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode(errors="replace")
            text = text if failed else kept_lines(text, level)
            if text:
                os.write(2, text.encode())


def _flush_stderr() -> None:
    with contextlib.suppress(AttributeError, OSError, ValueError):
        sys.stderr.flush()


class _QuietLoader(importlib.abc.Loader):
    """Runs the wrapped loader's exec_module inside `filtered_stderr` (level 0: unfiltered)
    and then the workbench's after-import callbacks (`lazy.after_tensorflow_import`), then
    steps aside."""

    def __init__(self, loader: Any, level: int):
        self._loader, self._level = loader, level

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__loader__ = module.__spec__.loader = self._loader  # nobody keeps the wrapper
        with filtered_stderr(self._level) if self._level > 0 else contextlib.nullcontext():
            self._loader.exec_module(module)
            run_after_import_callbacks()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _QuietFinder(importlib.abc.MetaPathFinder):
    """Finds `tensorflow` once, with a loader that imports it through `filtered_stderr`."""

    def __init__(self, level: int | None):
        self.level = level

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != "tensorflow":
            return None
        uninstall()  # the first import only; this also lets find_spec below skip us
        before_tensorflow_import()
        if self.level is None:  # `import workbench`: TensorFlow's own filter at our default too,
            # or its INFO lines (Grappler's at every conversion) fill a notebook's cells
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", str(DEFAULT_LEVEL))
        spec = importlib.util.find_spec(fullname)
        level = environment_level() if self.level is None else self.level
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader, level)
        return spec


def install(level: int | None = None) -> None:
    """Filters the process's first `import tensorflow` at `level` (None: TF_CPP_MIN_LOG_LEVEL
    at import time, default 2; 0 filters nothing). Once TensorFlow is imported there is no
    import to filter, and its settings are set at once (they still count before its first
    tensor)."""
    uninstall()
    if "tensorflow" in sys.modules:
        before_tensorflow_import()
    else:
        sys.meta_path.insert(0, _QuietFinder(level))


def uninstall() -> None:
    """Lets TensorFlow's import print everything again."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _QuietFinder)]


def only_fatal_lines() -> None:
    """stderr for the process's own output alone (the CLI, a tuning worker): TensorFlow's
    import and native lines pass only when fatal, its Python loggers only errors, no warnings."""
    only_fatal = len(SEVERITIES) - 1
    install(level=only_fatal)  # at import: only fatal lines pass
    filter_native_stderr(level=only_fatal)  # and after it
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # after it: TensorFlow's own filter
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    logging.getLogger("absl").setLevel(logging.ERROR)


def quiet_notebook(conversion_report: bool = False) -> None:
    """A notebook that shows only what it computes: TensorFlow's native lines below errors
    (`TF_CPP_MIN_LOG_LEVEL=2` unless set), TensorFlow's Python loggers (save()'s "Assets
    written to ...", tf2onnx's deprecations) at errors only, and `convert()`'s non-conversion
    report off the page unless `conversion_report`. `workbench.quiet_notebook()`; call it before
    TensorFlow's first import, as the lessons' first cell does. Imports nothing heavy."""
    import logging

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", str(DEFAULT_LEVEL))
    logging.getLogger("absl").setLevel(logging.ERROR)
    after_tensorflow_import(_tensorflow_logger_at_errors)
    report_level = logging.NOTSET if conversion_report else logging.ERROR
    logging.getLogger("workbench.trt_convert").setLevel(report_level)


def _tensorflow_logger_at_errors() -> None:
    # In an interactive shell (a notebook's kernel), TensorFlow's first get_logger() sets its
    # logger to INFO: set after that, the level holds.
    import logging

    sys.modules["tensorflow"].get_logger().setLevel(logging.ERROR)
