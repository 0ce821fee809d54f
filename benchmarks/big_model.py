"""A model past protobuf's 2 GB through the user guide's path in one process: convert, build,
call, save, delete, reload with `workbench.load` and with plain `tf.saved_model.load`, call.

    nice .venv/bin/python benchmarks/big_model.py                  # 4096 -> 3 x 16384 -> 1000
    nice .venv/bin/python benchmarks/big_model.py --hidden 16384,16384 --out 8 --no-record

The model (`sample_models.big_dense`: float32 Dense layers with random weights, 2.48 GB by
default) is written as a SavedModel by a child process, so this one starts with none of it.
Printed, as multiples of the weights: the saved converted model's size on disk (target
<= 2.2x: the native copy and the engine's), the peak resident memory above the process's
size after the imports over the whole path (<= 3x; benchmarks/memory_phases.py says how it is
read), the reload's time, and whether the outputs on a held-out random batch (not the one
the engines were built with) equal native TensorFlow's. `--before SECONDS` gives the reload
time of an earlier workbench on this model (this script run with that checkout's
PYTHONPATH), printed next to this one.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import onnxruntime  # noqa: E402, F401  (imported before the baseline is read)
import record  # noqa: E402
import tensorflow as tf  # noqa: E402
from memory_phases import peak, reset_peak, rss  # noqa: E402

import workbench  # noqa: E402
from sample_models import big_dense  # noqa: E402
from workbench import trt_convert as trt  # noqa: E402

GB = 1e9
def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def run(model_dir: Path, out_dir: Path, inputs: int) -> dict[str, float]:
    """The user guide's path; figures in bytes and seconds."""
    rng = np.random.default_rng(0)
    build_batch = rng.standard_normal([4, inputs], np.float32)
    held_out = rng.standard_normal([4, inputs], np.float32)  # not what the engines saw
    base = rss()
    reset_peak()
    figures: dict[str, float] = {}
    start = time.perf_counter()
    converter = trt.TrtGraphConverterV2(input_saved_model_dir=str(model_dir))
    function = converter.convert()
    converter.build(lambda: iter([[build_batch]]))
    converted = function(held_out)["y"].numpy()
    figures["convert_build_call_s"] = time.perf_counter() - start
    start = time.perf_counter()
    converter.save(str(out_dir))
    figures["save_s"] = time.perf_counter() - start
    del converter, function
    start = time.perf_counter()
    reloaded = workbench.load(out_dir)
    figures["reload_s"] = time.perf_counter() - start
    reloaded_out = reloaded(held_out)["y"].numpy()
    del reloaded
    start = time.perf_counter()
    plain = tf.saved_model.load(str(out_dir)).signatures["serving_default"]
    plain_out = plain(x=tf.constant(held_out))["y"].numpy()
    figures["plain_reload_call_s"] = time.perf_counter() - start
    del plain
    figures["peak_bytes"] = peak() - base
    native = tf.saved_model.load(str(model_dir)).signatures["serving_default"]
    expected = native(x=tf.constant(held_out))["y"].numpy()
    figures["max_abs_diff"] = float(max(np.abs(o - expected).max()
                                        for o in (converted, reloaded_out, plain_out)))
    figures["scale"] = float(np.abs(expected).max())
    figures["disk_bytes"] = disk_bytes(out_dir)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=4096)
    parser.add_argument("--hidden", default="16384,16384,16384")
    parser.add_argument("--out", type=int, default=1000)
    parser.add_argument("--before", type=float, help="an earlier workbench's reload seconds")
    parser.add_argument("--no-record", action="store_true", help="print only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="big-model-") as tmp:
        model_dir = Path(tmp) / "model"
        weights = big_dense.build(model_dir, args.inputs, [int(h) for h in args.hidden.split(",")],
                                  args.out)
        figures = run(model_dir, Path(tmp) / "converted", args.inputs)
    shape = f"{args.inputs} -> {args.hidden.replace(',', ' -> ')} -> {args.out}"
    disk, memory = figures["disk_bytes"] / weights, figures["peak_bytes"] / weights
    close = figures["max_abs_diff"] <= 1e-5 * max(1.0, figures["scale"])
    before = f" (before: {args.before:.1f} s)" if args.before else ""
    rows = [
        record.figure(f"{shape} ({weights / GB:.2f} GB): saved size / weights",
                      f"{disk:.2f}x ({figures['disk_bytes'] / GB:.2f} GB)", "<= 2.2x",
                      disk <= 2.2),
        record.figure("peak memory / weights, convert to reloaded call in one process",
                      f"{memory:.2f}x ({figures['peak_bytes'] / GB:.2f} GB)", "<= 3x",
                      memory <= 3),
        record.figure("workbench.load of the saved model",
                      f"{figures['reload_s']:.1f} s{before}", "<= before" if before else "",
                      figures["reload_s"] <= args.before * 1.1 if args.before else None),
        record.figure("outputs on a held-out batch vs native TF (converted, reloaded, plain)",
                      f"max |diff| {figures['max_abs_diff']:.2g} (outputs up to "
                      f"{figures['scale']:.3g})", "unchanged", close),
        record.figure("convert + build + call / save / plain tf.saved_model.load + call",
                      f"{figures['convert_build_call_s']:.1f} s / {figures['save_s']:.1f} s / "
                      f"{figures['plain_reload_call_s']:.1f} s"),
    ]
    for row in rows:
        print(f"{row['measure']}: {row['figure']}" + (f" (target {row['target']}: "
              f"{'met' if row['met'] else 'NOT met'})" if row["target"] else ""))
    if not args.no_record:
        record.write("big_model", rows)


if __name__ == "__main__":
    main()
