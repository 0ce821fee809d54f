"""Peak memory by phase of one zoo model converted, run, saved and reloaded in this process,
as multiples of its weights, next to the floor and each copy of the weights held.

    nice .venv/bin/python benchmarks/memory_phases.py VGG16 [ConvNeXtXLarge ...] [--saved-model]
    nice .venv/bin/python benchmarks/memory_phases.py VGG16 --one-process

For each phase (convert(), the first call with engines built, save(), workbench.load() and
the reload's first call) it prints the phase's peak resident memory above the process's size
after the imports (the kernel's high-water mark, reset before each phase through
/proc/self/clear_refs, so TensorFlow's and ONNX Runtime's native memory count too), as GB and
as a multiple of the weights, then what is held once the phase is over:

- the floor: the copies the phase cannot do without. The user's Keras model (while it lives),
  TensorFlow's copy of the weights the native segments run with (and of every weight while no
  engine is built: the engines are built from it), and each built engine's copy (its ONNX
  Runtime session);
- every other copy found (serialized engines, ONNX exports, graph protos holding weights,
  twin sessions of the compiled engine op): what is held above the floor, by name.

Sizes of protos and engines are the bytes of the weights they hold; a session holds about its
engine's model again. The last line per model is the issue's verdict: every phase at most
`--limit` (3) times the weights, counting what the workbench holds. With an in-memory Keras
model (no `--saved-model`) the user's model is in the process before the workbench is called
and for its whole life: its variables (1x) are printed in each phase's peak and then taken out
for the verdict (`workbench` in the phase line).

`--one-process` is a notebook user's sequence in one process, from a SavedModel: convert(),
the first call, save(), `del converter, function`, `workbench.load()` of what was saved and its
first call. Every phase's peak is above the size after the imports, so what the dropped
converter still holds counts in the reload's phases; the line after `del` is the RSS left.
The benchmark calls no `gc.collect()` there, as a user calls none. Its figures are not
written to benchmarks/results/ (whose one command names the per-phase runs).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402, F401  (imported before the baseline is read)
import numpy as np  # noqa: E402
import onnxruntime  # noqa: E402, F401
import record  # noqa: E402
import tensorflow  # noqa: E402, F401

import workbench  # noqa: E402
from sample_models.zoo import zoo  # noqa: E402
from workbench import trt_convert as trt  # noqa: E402
from workbench.engines.runtime.saving import MANIFEST  # noqa: E402
from workbench.hardware import release_free_memory  # noqa: E402

GB = 2**30


def _status_kb(field_name: str) -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field_name))


def rss() -> int:
    return _status_kb("VmRSS:") * 1024


def reset_peak() -> None:
    """The high-water mark back to the current RSS (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def peak() -> int:
    return _status_kb("VmHWM:") * 1024


# --- what holds the weights -----------------------------------------------------------------

USERS_MODEL = "Keras model's variables"  # held by the user, taken out of the verdict


def _weight_bytes(graph_def: Any) -> int:
    """Bytes of the large Consts (weights) a GraphDef holds, its library's included."""
    from workbench.engines.weights import large_const

    nodes = [*graph_def.node, *(n for f in graph_def.library.function for n in f.node_def)]
    return sum(len(t.tensor_content) for n in nodes if (t := large_const(n)) is not None)


@dataclass
class Holdings:
    """Copies of the weights held now, in bytes: the floor's, and the others by name."""

    floor: dict[str, int] = field(default_factory=dict)
    above: dict[str, int] = field(default_factory=dict)

    def add(self, to_floor: bool, name: str, size: int) -> None:
        if size:
            target = self.floor if to_floor else self.above
            target[name] = target.get(name, 0) + size


def holdings(model: Any, converted: Any, converter: Any) -> Holdings:
    """The copies of the weights the objects of this run hold (see the module docstring)."""
    held = Holdings()
    if model is not None and not isinstance(model, str):
        held.add(True, USERS_MODEL, sum(v.numpy().nbytes for v in model.weights))
    if converter is not None and converter._session is not None:
        session = converter._session
        protos = {id(p.graph_def): p.graph_def for p in session._prepared.values()}
        if session._optimized is not None:
            protos[id(session._optimized.graph_def)] = session._optimized.graph_def
        for proto in protos.values():  # FP32's prepared GraphDef is the frozen one
            held.add(False, "frozen and prepared GraphDefs", _weight_bytes(proto))
    if converted is None:
        return held
    graph = converted._graph
    built = {name for name, op in converted.ops.items() if op.engines()} \
        if converted._segments is not None else set()
    if graph is not None:
        if graph.converted_held:
            held.add(False, "converted GraphDef", _weight_bytes(graph.converted_graph_def))
        for segment in graph.segments:
            if segment.graph_def_held:
                held.add(False, "segment GraphDefs", _weight_bytes(segment.graph_def))
    native = sum(t.numpy().nbytes for t in converted.captured_weights.values())
    held.add(True, "TF weights (native segments)", native)
    if converted._segments is not None:
        for name, runtime in converted._segments.items():
            if runtime.onnx_model is not None:
                held.add(False, "ONNX exports kept", runtime.onnx_model.ByteSize())
            for _, engine in runtime.op.engines():
                size = getattr(engine, "model_size", None) or \
                    len(getattr(engine, "model_bytes", b""))
                native = getattr(engine, "native", None)
                owned = getattr(engine, "_session", None) is not None
                held.add(True, "engines' sessions", size if engine.is_active else 0)
                if owned and native is not None and native._open:
                    held.add(False, "second sessions (Python's and the compiled op's)", size)
            fallback = runtime.op.native._function is not None
            held.add(False, "native fallback segments",
                     _weight_bytes(runtime.segment.graph_def) if fallback and name in built
                     else 0)
    return held


# --- phases ---------------------------------------------------------------------------------

@dataclass
class Phase:
    name: str
    peak: int  # bytes above the process's RSS after the imports
    seconds: float
    held: Holdings
    where: str = ""  # --where: the code running at the peak


class PeakWhere:
    """`--where`: samples RSS every 10 ms in a thread and keeps the main thread's innermost
    workbench frames at the highest sample: where in the code a phase peaks."""

    def __init__(self) -> None:
        self.top, self.stack = 0, ""
        self._stop = threading.Event()
        self._main = threading.main_thread().ident
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            now = rss()
            if now > self.top:
                self.top = now
                self.stack = " < ".join(self._workbench_frames()[:4])

    def _workbench_frames(self) -> list[str]:
        """The main thread's workbench frames, innermost first, as names only. No frame or
        traceback object outlives this call: one kept would keep its locals (a save's
        variables) alive, and `traceback` kept EfficientNetV2L's `save()` 0.5x higher."""
        names = []
        frame = sys._current_frames().get(self._main)
        while frame is not None:
            code = frame.f_code
            if "/workbench/" in code.co_filename and "benchmarks" not in code.co_filename:
                names.append(f"{Path(code.co_filename).stem}.{code.co_name}:{frame.f_lineno}")
            frame = frame.f_back
        return names

    def stop(self) -> str:
        self._stop.set()
        self._thread.join()
        return self.stack


class Run:
    def __init__(self, weights: int, base: int, where: bool = False, collect: bool = True):
        self.weights, self.base, self.where = weights, base, where
        self.collect = collect  # False: no gc.collect() between phases (a user calls none)
        self.phases: list[Phase] = []

    def phase(self, name: str, step: Callable[[], Any], held: Callable[[], Holdings],
              quiet: bool = False) -> Any:
        if self.collect:
            gc.collect()
        reset_peak()
        sampler = PeakWhere() if self.where else None
        start = time.perf_counter()
        result = step()
        seconds = time.perf_counter() - start
        top = peak() - self.base
        where = sampler.stop() if sampler is not None else ""  # not counting held()'s reads
        phase = Phase(name, top, seconds, held(), where)
        # held() reads every weight's bytes out of the protos: the heap it leaves behind is the
        # benchmark's, not the next phase's.
        release_free_memory()
        if self.collect:
            gc.collect()
        self.phases.append(phase)
        if not quiet:
            self.show(phase)
        return result

    def x(self, size: int) -> str:
        return f"{size / self.weights:4.2f}x"

    def workbench(self, phase: Phase) -> int:
        """The phase's peak without the user's model: what the workbench holds."""
        return phase.peak - phase.held.floor.get(USERS_MODEL, 0)

    def show(self, phase: Phase) -> None:
        floor = sum(phase.held.floor.values())
        own = f" (workbench {self.x(self.workbench(phase))})" \
            if USERS_MODEL in phase.held.floor else ""
        print(f"{phase.name:<20} peak +{phase.peak / GB:5.2f} GB = {self.x(phase.peak)}{own}  "
              f"floor {self.x(floor)}  {phase.seconds:6.1f} s", flush=True)
        for label, items in (("floor", phase.held.floor), ("above", phase.held.above)):
            for name, size in items.items():
                print(f"    {label}  {self.x(size)}  {name}", flush=True)
        if phase.where:
            print(f"    peak in {phase.where}", flush=True)


SAVE = """
import json, sys
import tensorflow as tf
from sample_models.zoo import zoo
model = zoo()[sys.argv[1]].make()
tf.saved_model.save(model, sys.argv[2])
print(json.dumps([sum(v.numpy().nbytes for v in model.weights), list(model.input_shape)]))
"""


class _Saved(str):
    """A SavedModel directory that also answers a zoo entry's `inputs` (its input shape)."""

    input_shape: tuple


def saved_model(name: str, directory: str) -> tuple[_Saved, int]:
    """The zoo model exported as a SavedModel by another process, and its weights' bytes."""
    done = subprocess.run([sys.executable, "-c", SAVE, name, directory], capture_output=True,
                          text=True, check=True)
    weights, shape = json.loads(done.stdout.strip().splitlines()[-1])
    path = _Saved(directory)
    path.input_shape = tuple(shape)
    return path, weights


def measure(name: str, limit: float, where: bool, from_saved_model: bool) -> bool:
    entry = zoo()[name]
    gc.collect()
    base = rss()
    start = time.perf_counter()
    if from_saved_model:
        exported = tempfile.TemporaryDirectory(prefix="memory-phases-model-")  # removed at exit
        model, weights = saved_model(name, exported.name)
        made = "SavedModel exported by another process"
    else:
        model = entry.make()
        weights = sum(v.numpy().nbytes for v in model.weights)
        made = f"Keras model built +{(rss() - base) / GB:.2f} GB"
    print(f"\n{name}: weights {weights / GB:.2f} GB, {made} in "
          f"{time.perf_counter() - start:.1f} s", flush=True)
    run = Run(weights, base, where)
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=model) if isinstance(model, str) \
        else trt.TrtGraphConverterV2(input_model=model)
    function = run.phase("convert()", converter.convert,
                         lambda: holdings(model, converter._converted_func, converter))
    inputs = entry.inputs(np.random.default_rng(0), model)
    run.phase("first call", lambda: function(*inputs),
              lambda: holdings(model, function, converter))
    with tempfile.TemporaryDirectory(prefix="memory-phases-") as directory:
        run.phase("save()", lambda: converter.save(directory, overwrite=True),
                  lambda: holdings(model, function, converter))
        # Reloaded as a user would, after a restart: in a fresh process.
        reload = subprocess.run([sys.executable, __file__, "--reload", directory,
                                 "--weights", str(weights), name, *["--where"] * where],
                                capture_output=True, text=True, check=False)
        lines = [line for line in reload.stdout.splitlines() if line.startswith("{")]
        if reload.returncode or not lines:
            print(reload.stdout[-2000:], reload.stderr[-2000:])
            raise SystemExit(f"{name}: the reload failed")
        for line in lines:
            phase = Phase(**{**json.loads(line), "held": Holdings(**json.loads(line)["held"])})
            run.phases.append(phase)
            run.show(phase)
    worst = max(run.workbench(p) for p in run.phases)
    ok = worst <= limit * weights
    mine = ", the workbench's, the Keras model's variables taken out" \
        if not from_saved_model else ""
    print(f"{name}: worst phase {run.x(worst)} the weights{mine} "
          f"({'within' if ok else 'ABOVE'} {limit:g}x)", flush=True)
    model = "the Keras model's taken out, " if not from_saved_model else ""
    FIGURES.extend(record.figure(f"{name}: {p.name} peak (x the weights, {model}"
                                 f"{weights / GB:.2f} GB)", run.x(run.workbench(p)).strip(),
                                 f"<= {limit:g}x", run.workbench(p) <= limit * weights)
                   for p in run.phases)
    return ok


FIGURES: list[dict[str, Any]] = []  # every measured phase, for benchmarks/results/


def one_process(name: str, limit: float, where: bool) -> bool:
    """`--one-process` (see the module docstring): a notebook user's whole sequence."""
    entry = zoo()[name]
    gc.collect()
    base = rss()
    exported = tempfile.TemporaryDirectory(prefix="memory-phases-model-")  # removed at exit
    model, weights = saved_model(name, exported.name)
    print(f"\n{name}, one process: weights {weights / GB:.2f} GB, SavedModel exported by "
          "another process", flush=True)
    run = Run(weights, base, where, collect=False)
    user = {"converter": trt.TrtGraphConverterV2(input_saved_model_dir=model)}
    user["function"] = run.phase("convert()", user["converter"].convert,
                                 lambda: holdings(None, user["converter"]._converted_func,
                                                  user["converter"]))
    inputs = entry.inputs(np.random.default_rng(0), model)
    run.phase("first call", lambda: user["function"](*inputs),
              lambda: holdings(None, user["function"], user["converter"]))
    with tempfile.TemporaryDirectory(prefix="memory-phases-") as directory:
        run.phase("save()", lambda: user["converter"].save(directory, overwrite=True),
                  lambda: holdings(None, user["function"], user["converter"]))
        user.clear()  # the user's `del converter, function` (and no gc.collect())
        run.phases.append(Phase("del (RSS left)", rss() - base, 0.0, Holdings()))
        run.show(run.phases[-1])
        user["reloaded"] = run.phase("workbench.load()", lambda: workbench.load(directory),
                                     lambda: holdings(None, None, None))
        run.phase("reload's first call", lambda: user["reloaded"](*inputs),
                  lambda: holdings(None, user["reloaded"], None))
    worst = max(p.peak for p in run.phases)
    ok = worst <= limit * weights
    print(f"{name}, one process: worst phase {run.x(worst)} the weights "
          f"({'within' if ok else 'ABOVE'} {limit:g}x)", flush=True)
    return ok


def reload_phases(directory: str, weights: int, name: str, where: bool) -> None:
    """`workbench.load()` and the first call of a saved model, each a JSON line (the inputs
    are the zoo entry's, made before the baseline is read)."""
    entry = zoo()[name]
    inputs = entry.inputs(np.random.default_rng(0), _Shapes(directory))
    run = Run(weights, rss(), where)
    reloaded = run.phase("workbench.load()", lambda: workbench.load(directory),
                         lambda: holdings(None, None, None), quiet=True)
    run.phase("reload's first call", lambda: reloaded(*inputs),
              lambda: holdings(None, reloaded, None), quiet=True)
    for phase in run.phases:
        print(json.dumps(asdict(phase)), flush=True)


class _Shapes:
    """What a zoo entry's `inputs` reads off a model: its input shape (of the saved model)."""

    def __init__(self, directory: str):
        manifest = json.loads((Path(directory) / "assets" / MANIFEST).read_text())
        shape = manifest["input_shapes"][0]
        self.input_shape = None if shape is None else tuple(
            None if d < 0 else d for d in shape)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", default=["VGG16"])
    parser.add_argument("--limit", type=float, default=3.0,
                        help="the most a phase may hold, in multiples of the weights")
    parser.add_argument("--saved-model", action="store_true",
                        help="convert the model from a SavedModel directory (exported by "
                             "another process) rather than an in-memory Keras model")
    parser.add_argument("--one-process", action="store_true",
                        help="convert, call, save, del, workbench.load() and call in this one "
                             "process, from a SavedModel (a notebook user's sequence)")
    parser.add_argument("--where", action="store_true",
                        help="name the code running at each phase's peak (RSS sampled)")
    parser.add_argument("--reload", help=argparse.SUPPRESS)  # the fresh process's phases
    parser.add_argument("--weights", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reload:
        reload_phases(args.reload, args.weights, args.models[0], args.where)
        return
    if args.one_process:  # its figures are in docs/memory.md, not benchmarks/results/
        sys.exit(0 if all([one_process(name, args.limit, args.where) for name in args.models])
                 else 1)
    results = [measure(name, args.limit, args.where, args.saved_model) for name in args.models]
    record.write("memory_phases", FIGURES, keep_other_models=True)
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
