"""The compiled engine op: built from `ort_engine_op.cc` on first use, cached, loaded once.
(`opened` does the same for another `OpSource`: `trt_engine_op.py`'s TRTEngineOp.)

The library is compiled with TensorFlow's own flags (`tf.sysconfig`) by `WORKBENCH_CXX`
(default `$CXX`, else `g++`) into the cache directory `graph/cache.py` uses (a file beside the
prepared-graph entries, which eviction leaves alone; a temporary directory when the cache is
off), under a key of the source, the TensorFlow and ONNX Runtime versions and the compiler
flags, so a second process, or kernel, loads it without compiling. Anything that goes wrong
(no compiler, a compile error, an ONNX Runtime without its C library) is logged once and engine
calls stay on the Python path; `WORKBENCH_ENGINE_CALLS=python` chooses that path outright.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from workbench import environment
from workbench.errors import first_line
from workbench.lazy import tf

logger = logging.getLogger("workbench.engines")

SOURCE = Path(__file__).with_name("ort_engine_op.cc")
COMPILE_TIMEOUT_S = 600
_ERROR_SIZE = 1024
T = TypeVar("T")

_lock = threading.Lock()
_loaded: NativeLibrary | None = None
_failure: str | None = None  # why the library is unavailable in this process
_temporary_dir: str | None = None


@dataclass
class NativeLibrary:
    """The loaded library: its TensorFlow op module and its C entry points."""

    path: Path
    ops: Any  # what tf.load_op_library returns; `ops.workbench_ort_engine(...)` makes the op
    c: ctypes.CDLL
    onnxruntime_version: str

    def error_buffer(self) -> Any:
        return ctypes.create_string_buffer(_ERROR_SIZE)


def forced_python() -> bool:
    return environment.ENGINE_CALLS.read().lower() == "python"


def compiler() -> str:
    return environment.CXX.read() or os.environ.get("CXX") or "g++"


def onnxruntime_library() -> Path | None:
    """ONNX Runtime's C library inside its wheel (`capi/libonnxruntime.so.<version>`)."""
    import onnxruntime

    capi = Path(onnxruntime.__file__).parent / "capi"
    found = sorted(capi.glob("libonnxruntime.so*"))
    return found[0] if found else None


@dataclass(frozen=True)
class OpSource:
    """What one compiled library is made from: its C++ source, its -D defines, and the
    versions of the libraries it calls besides TensorFlow (part of its cache key)."""

    path: Path
    defines: tuple[str, ...] = ()
    versions: tuple[str, ...] = ()


def engine_call_source() -> OpSource:
    """The engine-call op's: it calls ONNX Runtime's C API."""
    import onnxruntime

    return OpSource(SOURCE, versions=(onnxruntime.__version__,))


def compile_command(output: Path, source: OpSource | None = None) -> list[str]:
    source = source or engine_call_source()
    return [compiler(), "-shared", "-fPIC", "-O2", "-w", *(f"-D{d}" for d in source.defines),
            str(source.path), "-o", str(output),
            *tf.sysconfig.get_compile_flags(), *tf.sysconfig.get_link_flags(), "-ldl"]


def library_file(source: OpSource | None = None) -> Path:
    """Where the library compiled from `source` (the engine-call op's by default) for these
    versions and this compiler lives."""
    source = source or engine_call_source()
    digest = hashlib.sha256(source.path.read_bytes())
    flags = compile_command(Path("out"), source)[1:]  # not the compiler's path
    for part in (tf.__version__, *source.versions, *flags):
        digest.update(part.encode() + b"\0")
    stem = source.path.stem.replace("_", "-")
    return _directory() / f"workbench-{stem}-{digest.hexdigest()[:16]}.so"


def _directory() -> Path:
    from workbench.graph.cache import cache_dir

    root = cache_dir()
    if root is not None:
        return root
    global _temporary_dir
    if _temporary_dir is None:
        import atexit

        _temporary_dir = tempfile.mkdtemp(prefix="workbench-ort-op-")
        atexit.register(shutil.rmtree, _temporary_dir, True)
    return Path(_temporary_dir)


def load() -> NativeLibrary | None:
    """The loaded library, compiled first when not cached; None (and why, logged once) when
    engine calls must use the Python path."""
    global _loaded, _failure
    if forced_python():
        return None
    with _lock:
        if _loaded is None and _failure is None:
            try:
                _loaded = _open()
            except Exception as exc:  # any failure means the Python path, never a crash
                _failure = first_line(exc)
                logger.warning("engine calls use the Python path: %s", _failure)
    return _loaded


def status() -> tuple[str, str]:
    """Which path engine calls take, for `workbench doctor`, without compiling anything."""
    if forced_python():
        return "python", f"{environment.ENGINE_CALLS.name}=python"
    if _loaded is not None:
        return "compiled op", f"{_loaded.path} (onnxruntime {_loaded.onnxruntime_version})"
    if _failure is not None:
        return "python", _failure
    path = library_file()
    if path.exists():
        return "compiled op", f"{path} (compiled, loaded on the first engine call)"
    if shutil.which(compiler()) is None:
        return "python", f"compiler {compiler()!r} not found"
    return "compiled op", f"compiled with {compiler()} on the first engine call"


class UnloadableError(RuntimeError):
    """TensorFlow cannot load the library file."""


def _open() -> NativeLibrary:
    return opened(engine_call_source(), _load)


def opened(source: OpSource, load_library: Callable[[Path], T]) -> T:
    """`load_library(path)` of the cached library compiled from `source`; compiled first when
    missing, or when `load_library` raises `UnloadableError` (a damaged file: never trusted)."""
    path = library_file(source)
    if path.exists():
        try:
            return load_library(path)
        except UnloadableError as exc:
            logger.info("compiling %s again: %s", source.path.name, exc)
            path.unlink(missing_ok=True)
    return load_library(_compile(path, source))


def _compile(path: Path, source: OpSource) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    command = compile_command(staging, source)
    logger.info("compiling %s: %s", source.path.name, " ".join(command))
    try:
        done = subprocess.run(command, capture_output=True, text=True,
                              timeout=COMPILE_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise RuntimeError(
            f"compiler {command[0]!r} not found (set {environment.CXX.name})") from None
    if done.returncode != 0:
        staging.unlink(missing_ok=True)
        errors = [line for line in done.stderr.splitlines() if "error" in line]
        raise RuntimeError(f"compiling {source.path.name} failed: "
                           f"{(errors or done.stderr.splitlines() or ['no output'])[0]}")
    os.replace(staging, path)  # atomic: another process compiling meanwhile writes its own
    return path


def _load(path: Path) -> NativeLibrary:
    runtime = onnxruntime_library()
    if runtime is None:
        raise RuntimeError("this onnxruntime wheel has no libonnxruntime.so to call")
    try:
        ops = tf.load_op_library(str(path))
    except Exception as exc:
        raise UnloadableError(f"{path.name}: {first_line(exc)}") from exc
    c = ctypes.CDLL(str(path))
    _declare(c)
    error = ctypes.create_string_buffer(_ERROR_SIZE)
    if c.wb_ort_init(str(runtime).encode(), error, _ERROR_SIZE) != 0:
        raise RuntimeError(f"onnxruntime's C API: {error.value.decode(errors='replace')}")
    return NativeLibrary(path, ops, c, c.wb_ort_version().decode())


def _declare(c: ctypes.CDLL) -> None:
    text, size, i64 = ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int64
    texts = ctypes.POINTER(text)
    c.wb_ort_init.argtypes = [text, text, size]
    c.wb_ort_version.restype = text
    c.wb_ort_register.argtypes = [
        text, text, ctypes.c_int, ctypes.c_int, texts, ctypes.c_int,
        texts, ctypes.POINTER(ctypes.c_int), ctypes.c_int, texts, ctypes.c_int,
        ctypes.POINTER(i64), ctypes.c_int, text, size]
    c.wb_ort_unregister.argtypes = [text]
    c.wb_ort_calls.argtypes = [text]
    c.wb_ort_calls.restype = i64
