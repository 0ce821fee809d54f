"""Opening a model: TensorFlow's own freezing, our cold convert(), and a reopen from the cache.

Per model (keras.applications, weights=None, saved as a SavedModel in a temp dir), each step in
a fresh process with TensorFlow already imported, as after a kernel restart:
  tf_freeze  TensorFlow's `convert_variables_to_constants_v2` of the signature (the reference)
  cold       `TrtGraphConverterV2(input_saved_model_dir=...).convert()` with an empty cache
  reopen     the same convert() again, the prepared graph read from the cache
  first_call the reopened model's first call at batch 1 (its engines built then), as a
             notebook runs it after a restart
Issue 12's targets, printed as ratios measured in the same run: cold <= 0.5x and reopen <= 0.1x
tf_freeze (VGG16), cold <= 3 s and reopen <= 0.5 s (ResNet-50), first call <= 10 s (VGG16).
Each step's peak resident memory is printed too (the process's peak, and how much above its
RSS after the imports).
Then benchmarks/engine_calls.py --quick prints the engine-call overhead per call and
EfficientNetB0 converted vs native at batch 1 (`--no-engine-calls` skips it).

    nice .venv/bin/python benchmarks/open.py [--models resnet50,vgg16] [--no-engine-calls]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import record

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

MODELS = {"resnet50": "ResNet50", "vgg16": "VGG16", "inception_resnet_v2": "InceptionResNetV2"}
REOPEN_TARGET_S = {"resnet50": 0.5}
REOPEN_TARGET_RATIO = {"vgg16": 0.1}
COLD_TARGET_S = {"resnet50": 3.0}
COLD_TARGET_RATIO = {"vgg16": 0.5}
FIRST_CALL_TARGET_S = {"vgg16": 10.0}
ENGINE_CALLS = Path(__file__).with_name("engine_calls.py")

# Peak RSS of the process (ru_maxrss, KiB on Linux), and its RSS after the imports.
MEMORY = """
import resource
def _rss_mb():
    with open("/proc/self/status") as status:
        return next(int(l.split()[1]) for l in status if l.startswith("VmRSS")) / 1024
def memory(after_import_mb):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"peak_rss_mb": peak, "above_import_mb": peak - after_import_mb}
"""

# Each step runs in its own process, so nothing is warm but TensorFlow's import.
SAVE = """
import sys, tensorflow as tf, keras
model = getattr(keras.applications, sys.argv[2])(weights=None)
tf.saved_model.save(model, sys.argv[1])
"""
TF_FREEZE = MEMORY + """
import json, sys, time, tensorflow as tf
from tensorflow.python.framework import convert_to_constants
imported_mb = _rss_mb()
loaded = tf.saved_model.load(sys.argv[1])  # kept: the signature needs its variables
function = loaded.signatures["serving_default"]
start = time.perf_counter()
convert_to_constants.convert_variables_to_constants_v2(function)
print(json.dumps({"seconds": time.perf_counter() - start, **memory(imported_mb)}))
"""
CONVERT = MEMORY + """
import json, sys, time, tensorflow as tf
from workbench.trt_convert import TrtGraphConverterV2
imported_mb = _rss_mb()
start = time.perf_counter()
converter = TrtGraphConverterV2(input_saved_model_dir=sys.argv[1])
converter.convert()
seconds = time.perf_counter() - start
session = converter._session
print(json.dumps({"seconds": seconds, "from_cache": session.optimized.from_cache,
                  "timings": session.timings, **memory(imported_mb)}))
"""
FIRST_CALL = MEMORY + """
import json, sys, time, numpy as np, tensorflow as tf
from workbench.trt_convert import TrtGraphConverterV2
imported_mb = _rss_mb()
converter = TrtGraphConverterV2(input_saved_model_dir=sys.argv[1])
function = converter.convert()
image = np.random.default_rng(0).random((1, 224, 224, 3), dtype=np.float32)
start = time.perf_counter()
function(tf.constant(image))
print(json.dumps({"seconds": time.perf_counter() - start, **memory(imported_mb)}))
"""
# The compiled engine op is built once per machine and version, into the cache directory.
COMPILE_OP = """
import json, time
from workbench.engines.runtime.native_op import library
start = time.perf_counter()
ok = library.load() is not None
print(json.dumps({"seconds": time.perf_counter() - start, "ok": ok}))
"""


def run(script: str, *args: str, env: dict[str, str] | None = None) -> dict:
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    if done.returncode:
        sys.exit(f"step failed: {done.stderr.strip().splitlines()[-1:]}")
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


def measure(name: str, work: Path) -> dict:
    model = work / name
    run(SAVE, str(model), MODELS[name])
    cache_env = {"WORKBENCH_CACHE_DIR": str(work / "cache")}
    tf_freeze = run(TF_FREEZE, str(model))
    cold = run(CONVERT, str(model), env=cache_env)
    reopen = run(CONVERT, str(model), env=cache_env)
    compile_op = run(COMPILE_OP, env=cache_env)  # once: the first call finds it compiled
    first_call = run(FIRST_CALL, str(model), env=cache_env)
    if cold["from_cache"] or not reopen["from_cache"]:
        sys.exit(f"{name}: the cache did not behave (cold {cold['from_cache']}, "
                 f"reopen {reopen['from_cache']})")
    return {"model": name, "model_mb": _size_mb(model), "tf_freeze_s": tf_freeze["seconds"],
            "cold_s": cold["seconds"], "reopen_s": reopen["seconds"],
            "first_call_s": first_call["seconds"], "compile_op": compile_op,
            "cold_timings": cold["timings"], "reopen_timings": reopen["timings"],
            "memory": {"tf_freeze": tf_freeze, "cold": cold, "reopen": reopen,
                       "first_call": first_call}}


def report(figures: dict) -> list[dict[str, Any]]:
    """Prints one model's figures; returns them as results-file rows."""
    name, tf_freeze = figures["model"], figures["tf_freeze_s"]
    cold, reopen = figures["cold_s"], figures["reopen_s"]
    print(f"{name} ({figures['model_mb']:.0f} MB): TF convert_variables_to_constants_v2 "
          f"{tf_freeze:.2f} s; cold convert() {cold:.2f} s ({cold / tf_freeze:.2f}x); "
          f"reopen {reopen:.2f} s ({reopen / tf_freeze:.3f}x)")
    compiled = figures["compile_op"]
    print(f"  first call at batch 1 (engines built): {figures['first_call_s']:.2f} s (the "
          f"compiled engine op {'compiled' if compiled['ok'] else 'NOT available'} before it, "
          f"once per machine: {compiled['seconds']:.1f} s)")
    if name in FIRST_CALL_TARGET_S:
        met = figures["first_call_s"] <= FIRST_CALL_TARGET_S[name]
        print(f"  target first call <= {FIRST_CALL_TARGET_S[name]} s: "
              f"{'met' if met else 'NOT met'}")
    print("  cold steps:   " + _steps(figures["cold_timings"]))
    print("  reopen steps: " + _steps(figures["reopen_timings"]))
    print("  peak RSS:     " + ", ".join(
        f"{step} {m['peak_rss_mb']:.0f} MB ({m['above_import_mb']:+.0f} MB over the imports)"
        for step, m in figures["memory"].items()))
    for label, seconds, limits, ratios in (("cold", cold, COLD_TARGET_S, COLD_TARGET_RATIO),
                                           ("reopen", reopen, REOPEN_TARGET_S,
                                            REOPEN_TARGET_RATIO)):
        if name in limits:
            met = seconds <= limits[name]
            print(f"  target {label} <= {limits[name]} s: {'met' if met else 'NOT met'}")
        if name in ratios:
            met = seconds / tf_freeze <= ratios[name]
            print(f"  target {label} <= {ratios[name]}x TF freezing: "
                  f"{'met' if met else 'NOT met'}")
    return _rows(figures)


def _rows(figures: dict) -> list[dict[str, Any]]:
    name, tf_freeze = figures["model"], figures["tf_freeze_s"]
    rows = []
    for label, seconds, limits, ratios in (
            ("cold convert()", figures["cold_s"], COLD_TARGET_S, COLD_TARGET_RATIO),
            ("reopen from the cache", figures["reopen_s"], REOPEN_TARGET_S,
             REOPEN_TARGET_RATIO)):
        targets, met = [], []
        if name in limits:
            targets.append(f"<= {limits[name]} s")
            met.append(seconds <= limits[name])
        if name in ratios:
            targets.append(f"<= {ratios[name]}x")
            met.append(seconds / tf_freeze <= ratios[name])
        rows.append(record.figure(
            f"{name}: {label} (x TensorFlow's freezing, {tf_freeze:.2f} s)",
            f"{seconds:.2f} s ({seconds / tf_freeze:.2f}x)", ", ".join(targets),
            all(met) if met else None))
    if name in FIRST_CALL_TARGET_S:
        limit = FIRST_CALL_TARGET_S[name]
        rows.append(record.figure(f"{name}: first call at batch 1 after a restart",
                                  f"{figures['first_call_s']:.2f} s", f"<= {limit} s",
                                  figures["first_call_s"] <= limit))
    return rows


def _steps(timings: dict[str, float]) -> str:
    return ", ".join(f"{key.removesuffix('_s')} {value:.2f} s" for key, value in timings.items())


def _size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50,vgg16",
                        help=f"comma-separated, of {', '.join(MODELS)}")
    parser.add_argument("--no-engine-calls", action="store_true",
                        help="skip benchmarks/engine_calls.py --quick")
    args = parser.parse_args()
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    rows = []
    for name in names:
        with tempfile.TemporaryDirectory(prefix="workbench-open-") as work:
            rows += report(measure(name, Path(work)))
    record.write("open", rows)
    if not args.no_engine_calls:
        sys.stdout.flush()
        subprocess.run([sys.executable, str(ENGINE_CALLS), "--quick"], check=True)


if __name__ == "__main__":
    main()
