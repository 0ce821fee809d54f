"""Engine calls without Python: a compiled TensorFlow op runs a built ONNX Runtime engine.

A fallback-free engine call (`hybrid_graph.engine_function(..., fallback=False)`) used to be a
`numpy_function` into `EngineOp.try_engine`: ~0.06 ms a call before any work. Where it can, the
call is now the `WorkbenchOrtEngine` op (`ort_engine_op.cc`), which hands TensorFlow's input
buffers to ONNX Runtime's C API. It serves exactly the calls `try_engine` would give the same
engine, and every other call misses to the Python path:

- the op's cache holds one built ONNX Runtime engine on the CPU provider, with numeric inputs
  and outputs of the segment's dtypes and a model of at most `WORKBENCH_NATIVE_CALL_MAX_BYTES`
  (default 256 MB);
- the input shapes are ones that engine serves: implicit batch, a batch up to the engine's and
  the other dims equal; explicit batch, inside one of its optimization profiles.

A miss or an ONNX Runtime error fails the call with `workbench-engine-miss[<engine>]`, which
the converted model treats as today's `EngineMissError`: it reruns the call with the fallback
branch, where `try_engine` decides, builds or runs the native segment and records why.
"""

from __future__ import annotations

import ctypes
import itertools
import logging
import os
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from workbench import environment
from workbench.engines.backends.onnxruntime_backend import (
    OPTIMIZATION_LEVEL,
    SESSION_CONFIG,
    OrtEngine,
)
from workbench.engines.profiles import Profile
from workbench.engines.runtime.native_op.library import NativeLibrary, load
from workbench.errors import first_line
from workbench.graph.nodes import numpy_dtype_name
from workbench.lazy import tf

if TYPE_CHECKING:
    from workbench.engines.runtime.engine_op import EngineOp
    from workbench.engines.segment import SegmentGraph

logger = logging.getLogger("workbench.engines")

# dtypes the op hands to ONNX Runtime as they are (strings and complex stay on Python).
NUMERIC = frozenset({"float32", "float16", "bfloat16", "float64", "int8", "int16", "int32",
                     "int64", "uint8", "uint16", "uint32", "uint64", "bool"})
_keys = itertools.count()


class NativeSession:
    """An engine's session in the op's registry, open while the engine is active (the
    engine's only one: see `OrtEngine.hand_over`).

    Holds the engine weakly: when the engine goes, so does the session, and a call still naming
    it misses to the Python path. `calls()` counts the calls the op served, across reopenings.
    """

    def __init__(self, lib: NativeLibrary, engine: OrtEngine, bounds: list[Profile]):
        self.lib = lib
        self.key = f"{engine.name}#{next(_keys)}-{os.getpid()}".encode()
        self._engine = weakref.ref(engine)
        self._bounds = bounds
        self._closed_calls = 0
        self._open = False
        weakref.finalize(engine, self.close)  # keeps the count of calls served

    def open(self) -> None:
        engine = self._engine()
        if self._open or engine is None:
            return
        names_in = [n.encode() for n in engine.input_names]
        names_out = [n.encode() for n in engine.output_names]
        config = [part.encode() for pair in SESSION_CONFIG.items() for part in pair]
        ranks = [len(s) for s in self._bounds[0].min]
        flat = [d for p in self._bounds
                for lo, hi in zip(p.min, p.max, strict=True)
                for pair in zip(lo, hi, strict=True) for d in pair]
        error = self.lib.error_buffer()
        failed = self.lib.c.wb_ort_register(
            self.key, str(engine.path).encode(), engine.threads, OPTIMIZATION_LEVEL,
            _texts(config), len(SESSION_CONFIG), _texts(names_in), _array(ctypes.c_int, ranks),
            len(ranks), _texts(names_out), len(names_out), _array(ctypes.c_int64, flat),
            len(self._bounds), error, len(error))
        if failed:
            raise RuntimeError(error.value.decode(errors="replace"))
        self._open = True

    def close(self) -> None:
        if self._open:
            self._closed_calls = self.calls()
            self.lib.c.wb_ort_unregister(self.key)
            self._open = False

    def calls(self) -> int:
        return self._closed_calls + max(self.lib.c.wb_ort_calls(self.key), 0)


def engine_call(op: EngineOp, segment: SegmentGraph) -> Callable[[list[Any]], Any] | None:
    """The compiled call of `op`'s engine (inputs -> output tensors, in a graph), or None when
    this engine's calls stay on the Python path (see the module docstring)."""
    engines = op.engines()
    if len(engines) != 1 or len(op.cache) != 1:
        return None
    key, engine = engines[0]
    bounds = _bounds(op, key)
    if bounds is None or not _eligible(engine, segment):
        return None
    lib = load()
    if lib is None:
        return None
    session = engine.native if isinstance(engine.native, NativeSession) else None
    if session is None:
        session = NativeSession(lib, engine, bounds)
        try:
            engine.hand_over(session)
        except RuntimeError as exc:
            engine.native = None  # the engine makes its own session again
            logger.warning("engine %s is called through Python: its compiled op's session "
                           "failed: %s", op.name, first_line(exc))
            return None
    op.count_native_calls(session)
    tout = [tf.as_dtype(numpy_dtype_name(s.dtype)) for s in segment.output_specs]
    name, key_text = op.name, session.key.decode()
    return lambda inputs: lib.ops.workbench_ort_engine(inputs, Tout=tout, key=key_text,
                                                       engine=name, name=name)


def _bounds(op: EngineOp, key: Any) -> list[Profile] | None:
    """The input shapes the cached engine serves, as profiles (min and max per dim)."""
    if not op.settings.use_implicit_batch:
        return list(op.profiles) or None
    if any(len(shape) == 0 for shape in key):  # TF-TRT serves no scalar implicit-batch input
        return None
    return [Profile(tuple((0, *s[1:]) for s in key), key, key)]


def _eligible(engine: Any, segment: SegmentGraph) -> bool:
    if not isinstance(engine, OrtEngine) or engine.providers != ["CPUExecutionProvider"]:
        return False
    if engine.model_size > environment.NATIVE_CALL_MAX_BYTES.read():
        return False
    want_in = [numpy_dtype_name(s.dtype) for s in segment.input_specs]
    want_out = [numpy_dtype_name(s.dtype) for s in segment.output_specs]
    have_in = [None if t is None else t.name for t in engine.input_types]
    have_out = [None if t is None else t.name for t in engine.output_types]
    return (set(want_in + want_out) <= NUMERIC and want_in == have_in and want_out == have_out)


def _texts(items: list[bytes]) -> Any:
    return (ctypes.c_char_p * max(len(items), 1))(*items)


def _array(kind: Any, items: list[int]) -> Any:
    return (kind * max(len(items), 1))(*items)
