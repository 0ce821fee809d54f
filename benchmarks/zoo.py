"""Model zoo: every keras.applications architecture (random weights) plus LSTM, GRU, map_fn,
string-decoding, cond and jit-compiled-function models, each through TF-TRT's flow.

Per model: convert (default TF-TRT parameters), first run (engines built), the outputs against
native TensorFlow's, save, `workbench.load` and a run of the reloaded model. Prints one table
row per model; a row passes when every step worked and the outputs agree (relative error
<= 1e-3, or within 4x of how far native TF's own outputs move for a 1e-6 input change, the
"TF noise" column, for the few random-weight models that amplify rounding that much).

    .venv/bin/python benchmarks/zoo.py [--quick] [--models ConvNeXtTiny,lstm]

`--quick` runs the feature models and three small architectures. Each model runs in its own
process, smallest first, watched for memory: one over `--max-rss-gb` (default 7) is stopped
and its row says so; the "peak GB" column is the process's peak RSS as the watcher saw it.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import record  # noqa: E402

import workbench  # noqa: E402
from sample_models.zoo import ZooModel, zoo  # noqa: E402
from workbench import trt_convert as trt  # noqa: E402
from workbench.checks.inputs import random_inputs  # noqa: E402
from workbench.errors import first_line  # noqa: E402

QUICK = ("MobileNetV3Small", "ConvNeXtTiny", "EfficientNetB0")
# Outputs agree when max |converted - native| <= TOLERANCE * max |native| (relative: random
# weights make some architectures' logits tiny, 1e-20, and others large), or, for a model so
# sensitive that native TF itself moves more than that when its input moves by PERTURBATION
# (random-weight EfficientNetV2M at 480x480: 70%), within NOISE_FACTOR times that movement.
TOLERANCE = 1e-3
PERTURBATION = 1e-6
NOISE_FACTOR = 4.0
GENERATED_BATCH = 2  # rows without their own inputs get the workbench's generated ones


@dataclass
class ZooRow:
    model: str
    nodes: int = 0
    engines: int = 0
    percent: float = 0.0
    convert_s: float = 0.0
    first_run_s: float = 0.0
    max_error: float = float("nan")  # max |converted - native|
    rel_error: float = float("nan")  # the same over max |native|
    tf_noise: float = float("nan")  # relative move of native TF's outputs, input * (1 + 1e-6)
    reload_ok: bool = False
    peak_gb: float = float("nan")  # the process's peak RSS, as the watcher saw it
    error: str = ""

    @property
    def passed(self) -> bool:
        return not self.error and self.reload_ok


def run_model(entry: ZooModel, seed: int = 0) -> ZooRow:
    """Converts, runs, compares, saves and reloads one zoo model."""
    row = ZooRow(entry.name)
    try:
        _run(entry, row, seed)
    except Exception as exc:  # one row per failure, the table goes on
        row.error = f"{type(exc).__name__}: {first_line(exc)}"[:300]
    return row


def run_isolated(entry: ZooModel, max_rss_gb: float, timeout_s: float) -> ZooRow:
    """`run_model` in a child process, stopped when it outgrows `max_rss_gb` or `timeout_s`."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    child = context.Process(target=_child, args=(entry.name, results), daemon=True)
    child.start()
    start = time.monotonic()
    peak = 0.0
    try:
        while child.is_alive() and results.empty():
            peak = max(peak, _rss_gb(child.pid))
            if peak > max_rss_gb:
                return ZooRow(entry.name, error=f"stopped: used more than {max_rss_gb:g} GB of "
                              "memory (--max-rss-gb)")
            if time.monotonic() - start > timeout_s:
                return ZooRow(entry.name, error=f"stopped after {timeout_s:g} s (--timeout)")
            time.sleep(0.5)
        if results.empty():
            return ZooRow(entry.name, error=f"the process died (exit code {child.exitcode})")
        row = results.get()
        row.peak_gb = peak
        return row
    finally:
        if child.is_alive():
            child.kill()
        child.join()


def _child(name: str, results: Any) -> None:
    logging.getLogger("workbench").setLevel(logging.ERROR)
    results.put(run_model(zoo()[name]))


def _rss_gb(pid: int | None) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return 0.0


def _run(entry: ZooModel, row: ZooRow, seed: int) -> None:
    model = entry.make()
    source = ({"input_saved_model_dir": model} if isinstance(model, str)
              else {"input_model": model})
    start = time.perf_counter()
    converter = trt.TrtGraphConverterV2(**source)
    function = converter.convert()
    row.convert_s = time.perf_counter() - start
    inputs = (entry.inputs(np.random.default_rng(seed), model) if entry.inputs else
              list(random_inputs(converter.session, GENERATED_BATCH, seed).values()))
    result = converter.result
    row.nodes, row.engines = result.total_nodes, len(result.engines)
    row.percent = result.percent_converted
    start = time.perf_counter()
    converted = _numpy(function(*inputs))
    row.first_run_s = time.perf_counter() - start
    native = _numpy(converter.session.loaded(*inputs))
    row.max_error = max_error(converted, native)
    row.rel_error = row.max_error / _scale(native)
    row.tf_noise = _noise(converter.session.loaded, inputs, native)
    if not agree(converted, native, row.tf_noise):
        raise AssertionError(f"outputs differ from native TF by {row.max_error:.3g} "
                             f"(relative {row.rel_error:.3g})")
    with tempfile.TemporaryDirectory(prefix="zoo-saved-") as directory:
        converter.save(directory, overwrite=True)
        reloaded = _numpy(workbench.load(directory)(*inputs))
    row.reload_ok = agree(reloaded, converted)
    if not row.reload_ok:
        raise AssertionError(f"the reloaded model differs by {max_error(reloaded, converted):.3g}")


def _numpy(outputs: dict[str, Any]) -> dict[str, np.ndarray]:
    return {name: np.asarray(value) for name, value in outputs.items()}


def max_error(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> float:
    if set(got) != set(want):
        raise AssertionError(f"outputs {sorted(got)} differ from {sorted(want)}")
    return max((float(np.max(np.abs(got[k].astype("float64") - want[k].astype("float64"))))
                if got[k].size else 0.0) for k in want)


def _scale(outputs: dict[str, np.ndarray]) -> float:
    return max([1e-30] + [float(np.max(np.abs(v.astype("float64"))))
                          for v in outputs.values() if v.size and v.dtype.kind in "fiu"])


def _noise(native_fn: Any, inputs: list[np.ndarray], native: dict[str, np.ndarray]) -> float:
    """How far native TF's own outputs move, relatively, when float inputs move by
    PERTURBATION (0 for models without float inputs)."""
    if not any(x.dtype.kind == "f" for x in inputs):
        return 0.0
    moved = [x * np.asarray(1 + PERTURBATION, x.dtype) if x.dtype.kind == "f" else x
             for x in inputs]
    return max_error(_numpy(native_fn(*moved)), native) / _scale(native)


def agree(got: dict[str, np.ndarray], want: dict[str, np.ndarray], noise: float = 0.0
          ) -> bool:
    allowed = max(TOLERANCE, NOISE_FACTOR * noise) * _scale(want)
    return max_error(got, want) <= allowed


def table(rows: list[ZooRow]) -> str:
    header = (f"{'model':<22} {'nodes':>6} {'engines':>7} {'% conv':>7} {'convert s':>9} "
              f"{'1st run s':>9} {'max error':>9} {'rel error':>9} {'TF noise':>9} {'reload':>6} "
              f"{'peak GB':>7}  result")
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(f"{r.model:<22} {r.nodes:>6} {r.engines:>7} {r.percent:>7.2f} "
                     f"{r.convert_s:>9.1f} {r.first_run_s:>9.1f} {r.max_error:>9.2g} "
                     f"{r.rel_error:>9.2g} {r.tf_noise:>9.2g} "
                     f"{'ok' if r.reload_ok else '-':>6} {r.peak_gb:>7.1f}  "
                     f"{'PASS' if r.passed else r.error}")
    return "\n".join(lines)


COLUMNS = ["model", "nodes", "engines", "% converted", "convert s", "first run s", "rel error",
           "reload", "peak GB", "result"]


def write_results(rows: list[ZooRow]) -> None:
    """The results file keeps every model's latest row (a run may cover a few models)."""
    path = record.RESULTS / "zoo.json"
    previous = json.loads(path.read_text())["details"] if path.exists() else {}
    kept = previous.get("rows", [])
    latest = {row[0]: row for row in kept}
    for r in rows:
        latest[r.model] = [r.model, str(r.nodes), str(r.engines), f"{r.percent:.2f}",
                           f"{r.convert_s:.1f}", f"{r.first_run_s:.1f}", f"{r.rel_error:.2g}",
                           "ok" if r.reload_ok else "-", f"{r.peak_gb:.1f}",
                           "PASS" if r.passed else r.error]
    order = list(zoo())
    merged = sorted(latest.values(), key=lambda row: order.index(row[0])
                    if row[0] in order else len(order))
    passed = sum(row[-1] == "PASS" for row in merged)
    record.write("zoo", [record.figure(
        "zoo models through TF-TRT's flow (convert, run, compare, save, reload)",
        f"{passed} of {len(merged)} pass", "every model passes", passed == len(merged))],
        {"title": "The model zoo, per model", "note": previous.get("note", ""),
         "columns": COLUMNS, "rows": merged})


def select(models: str | None, quick: bool) -> list[ZooModel]:
    every = zoo()
    if models:
        names = [n.strip() for n in models.split(",") if n.strip()]
        unknown = [n for n in names if n not in every]
        if unknown:
            raise SystemExit(f"unknown zoo model(s) {', '.join(unknown)}; choose from: "
                             f"{', '.join(every)}")
        return [every[n] for n in names]
    if quick:
        return [every[n] for n in QUICK] + [m for m in every.values() if m.kind == "feature"]
    return list(every.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="feature models and 3 small "
                        "architectures")
    parser.add_argument("--models", help="comma-separated zoo names (e.g. ConvNeXtTiny,lstm)")
    parser.add_argument("--max-rss-gb", type=float, default=7.0,
                        help="stop a model whose process uses more memory (default 7)")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="stop a model after this many seconds (default 1800)")
    args = parser.parse_args(argv)
    print(f"{'model':<22} {'nodes':>6} ...", flush=True)
    rows = []
    for entry in select(args.models, args.quick):
        rows.append(run_isolated(entry, args.max_rss_gb, args.timeout))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    print()
    print(table(rows))
    write_results(rows)
    failed = [r.model for r in rows if not r.passed]
    print(f"\n{len(rows) - len(failed)}/{len(rows)} passed"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
