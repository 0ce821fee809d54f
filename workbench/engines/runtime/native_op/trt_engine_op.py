"""TF-TRT's `TRTEngineOp` in this process, so saved converted models hold TF-TRT's nodes.

TF-TRT's save() wrote one TRTEngineOp per engine, and code written for it loads the model with
plain `tf.saved_model.load` and counts those nodes in a signature's graph. TensorFlow >= 2.18
has no such op, and a node of an unregistered op does not even load. The workbench compiles
`trt_engine_op.cc` (TF-TRT 2.17's op declaration, and a CPU kernel that runs the engine's
`segment_func`, as TF-TRT's kernel did when it had no engine) with the engine-call op's
machinery (`library.py`: cached, compiled once per TensorFlow version). Where TRTEngineOp is
already registered (TF-TRT's own ops loaded in TensorFlow <= 2.17), only the CPU kernel is
added. Without a compiler the op is unavailable: the reason is logged once, and saving falls
back to calling each native segment directly (`saving.py`).
"""

from __future__ import annotations

import logging
import shutil
import threading
from pathlib import Path

from workbench.engines.runtime.native_op.library import (
    OpSource,
    UnloadableError,
    compiler,
    library_file,
    opened,
)
from workbench.errors import first_line
from workbench.lazy import tf

logger = logging.getLogger("workbench.engines")

ENGINE_OP = "TRTEngineOp"
SOURCE = Path(__file__).with_name("trt_engine_op.cc")
KERNEL_ONLY = ("WORKBENCH_KERNEL_ONLY",)

_lock = threading.Lock()
_registered = False
_failure: str | None = None  # why TRTEngineOp cannot be registered in this process


def register_engine_op() -> bool:
    """Whether TRTEngineOp is registered here with the workbench's CPU kernel, compiling the
    library first when it is not cached; False (the reason logged once) when it cannot be."""
    global _registered, _failure
    with _lock:
        if not _registered and _failure is None:
            try:
                opened(_source(), _load)
                _registered = True
            except Exception as exc:  # no compiler, a compile error: the native layout instead
                _failure = first_line(exc)
                logger.warning("TRTEngineOp is not available in this process (%s): saved "
                               "models call their native segments directly", _failure)
    return _registered


def register_if_compiled() -> None:
    """Registers TRTEngineOp when its library is already compiled (loading it takes
    milliseconds; compiling is left to the first save)."""
    if _registered or _failure is not None:
        return
    try:
        compiled = library_file(_source()).exists()
    except Exception:  # noqa: BLE001 - a TensorFlow without sysconfig: nothing to register
        return
    if compiled:
        register_engine_op()


def status() -> tuple[bool, str]:
    """Whether saved models get TF-TRT's TRTEngineOps here, and how, for `workbench doctor`,
    without compiling anything."""
    if _registered:
        return True, "registered in this process"
    if _failure is not None:
        return False, _failure
    if library_file(_source()).exists():
        return True, "compiled, registered when TensorFlow is imported"
    if shutil.which(compiler()) is None:
        return False, f"compiler {compiler()!r} not found: saved engines stay plain calls"
    return True, f"compiled with {compiler()} on the first save"


def unavailable_reason() -> str | None:
    """Why TRTEngineOp could not be registered in this process, if it was tried and failed."""
    return _failure


def _source() -> OpSource:
    """The op's library; only its kernels where TensorFlow registered TRTEngineOp already."""
    from workbench.tf_private.function_defs import op_def

    return OpSource(SOURCE, defines=KERNEL_ONLY if op_def(ENGINE_OP) is not None else ())


def _load(path: Path) -> Path:
    try:
        tf.load_op_library(str(path))
    except Exception as exc:
        raise UnloadableError(f"{path.name}: {first_line(exc)}") from exc
    return path
