"""Rewrites on the zoo: each model's TF-TRT engines and % converted before and after the verified
rewrites (workbench rewrite), in implicit batch and dynamic shape mode, with the rewritten
model's outputs checked against the original's.

Models (random weights, small configurations: the machine is shared): Keras 3 transformers
written the way Keras writes them (a BERT-like encoder with exact GELU, the same with tanh
GELU, a GPT-2-like decoder), keras.applications ConvNeXtTiny (exact GELU) and MobileNetV3Small,
and an LSTM; the last two have nothing to rewrite (controls). Outputs are compared on two
generated input batches of 4 (`checks.rewritten.compare_rewritten`: uniform floats, valid ids,
0/1 masks; data the rewrites were never tuned on). Relative error: the largest absolute
difference over the output's largest magnitude.

    .venv/bin/python benchmarks/rewrites.py [--models bert_like,lstm]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import record  # noqa: E402

from sample_models import control_flow, transformers  # noqa: E402
from workbench.checks.rewritten import compare_rewritten  # noqa: E402
from workbench.conversion.params import ConversionParams  # noqa: E402
from workbench.conversion.session import ConversionSession  # noqa: E402

TARGET_RELATIVE_ERROR = 1e-5
BERT_LAYERS = 4


def _application(name: str, side: int) -> Callable[[], Any]:
    def make() -> Any:
        import keras

        keras.utils.set_random_seed(1234)
        return getattr(keras.applications, name)(weights=None, input_shape=(side, side, 3),
                                                 classifier_activation=None)
    return make


MODELS: dict[str, Callable[[], Any]] = {
    "bert_like": lambda: transformers.bert_like(layers=BERT_LAYERS),
    "bert_like_tanh_gelu": lambda: transformers.bert_like(layers=BERT_LAYERS, exact_gelu=False),
    "gpt_like": transformers.gpt_like,
    "ConvNeXtTiny": _application("ConvNeXtTiny", 64),
    "MobileNetV3Small": _application("MobileNetV3Small", 96),
    "lstm": control_flow.lstm,
}
MODES = {"implicit batch": ConversionParams(),
         "dynamic shape": ConversionParams(use_dynamic_shape=True,
                                           dynamic_shape_profile_strategy="Range")}


def measure(name: str) -> dict[str, Any]:
    start = time.perf_counter()
    session = ConversionSession.open(MODELS[name](), cache=False)
    rewritten = session.rewritten()
    row: dict[str, Any] = {"model": name, "rewrites": dict(rewritten.rewrite_counts)}
    for mode, params in MODES.items():
        before = session.convert(params)
        after = rewritten.convert(params) if rewritten.rewrite_counts else before
        row[mode] = (len(before.engines), before.percent_converted,
                     len(after.engines), after.percent_converted)
    errors = compare_rewritten(session, rewritten.loaded) if rewritten.rewrite_counts else []
    row["max_rel_error"] = max((e.max_rel_error for e in errors), default=0.0)
    row["seconds"] = time.perf_counter() - start
    return row


COLUMNS = ["model", "rewrites (matches)", "implicit batch: engines, % converted",
           "dynamic shape: engines, % converted", "outputs: max rel. error"]


def cells(row: dict[str, Any]) -> list[str]:
    """One table row as text."""
    rewrites = ", ".join(f"{k} ({v})" for k, v in row["rewrites"].items()) or "none apply"
    error = f"{row['max_rel_error']:.1e}" if row["rewrites"] else "-"
    return [row["model"], rewrites, *(_change(row[mode]) for mode in MODES), error]


def table(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|---" * len(COLUMNS) + "|"]
    return lines + ["| " + " | ".join(cells(row)) + " |" for row in rows]


def _change(values: tuple[int, float, int, float]) -> str:
    engines, percent, engines_after, percent_after = values
    if (engines, percent) == (engines_after, percent_after):
        return f"{engines}, {percent:.1f}% (unchanged)"
    return f"{engines} -> **{engines_after}**, {percent:.1f}% -> **{percent_after:.1f}%**"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    names = parser.parse_args().models.split(",")
    rows = []
    for name in names:
        rows.append(measure(name))
        print(f"{name}: {rows[-1]}", flush=True)
    print("\n".join(table(rows)))
    figures = []
    for row in rows:
        if not row["rewrites"]:
            continue
        engines, _, engines_after, _ = row["dynamic shape"]
        met = row["max_rel_error"] <= TARGET_RELATIVE_ERROR
        figures.append(record.figure(
            f"{row['model']}: engines before -> after the rewrites (dynamic shape); outputs' "
            "max relative error", f"{engines} -> {engines_after}; {row['max_rel_error']:.1e}",
            f"error <= {TARGET_RELATIVE_ERROR:g}", met))
    record.write("rewrites", figures, details={
        "title": "Engines and % converted before -> after the rewrites",
        "columns": COLUMNS, "rows": [cells(row) for row in rows]})


if __name__ == "__main__":
    main()
