"""Rewrites on the zoo: each model's TF-TRT engines and % converted before and after the verified
rewrites (workbench rewrite), in implicit batch and dynamic shape mode, with the rewritten
model's outputs checked against the original's.

Models (random weights, small configurations by default: the machine is shared): Keras 3
transformers written the way Keras writes them (a BERT-like encoder with exact GELU, the same
with tanh GELU, a GPT-2-like decoder), keras.applications ConvNeXtTiny (exact GELU) and
MobileNetV3Small, and an LSTM; the last two have nothing to rewrite (controls). On request
(`--models`): `bert_base`, the BERT-like encoder at BERT-Base's size (12 layers, hidden 768,
sequence 128), and, where keras-hub is importable (it is not a dependency), keras-hub's own
`BertBackbone` at BERT-Base's size and a small `GPT2Backbone` and `LlamaBackbone`, built from
their constructors (nothing downloaded). Outputs are compared on two
generated input batches of 4 (`checks.rewritten.compare_rewritten`: uniform floats, valid ids,
0/1 masks; data the rewrites were never tuned on). Relative error: the largest absolute
difference over the output's largest magnitude. Where TF-TRT's cap of 20 engines
(`TF_TRT_MAX_ALLOWED_ENGINES`) is reached, the table also gives the count without the cap.

    .venv/bin/python benchmarks/rewrites.py [--models bert_like,lstm]
    .venv/bin/python benchmarks/rewrites.py --models bert_base,keras_hub_bert_base
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from dataclasses import replace
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


def _keras_hub(name: str, sequence: int, **config: Any) -> Callable[[], Any]:
    """A keras-hub backbone from its constructor, called on inputs of a fixed `sequence`."""
    def make() -> Any:
        try:
            import keras_hub
        except ImportError:
            raise SystemExit(f"{name} needs keras-hub: pip install keras-hub") from None
        import keras

        keras.utils.set_random_seed(1234)
        backbone = getattr(keras_hub.models, name)(**config)
        inputs = {spec: keras.Input((sequence,), dtype="int32", name=spec)
                  for spec in backbone.input}
        # Inputs as a list: the workbench calls a Keras model with its inputs in order.
        return keras.Model(list(inputs.values()), backbone(inputs))
    return make


BERT_BASE = {"layers": 12, "hidden": 768, "heads": 12, "intermediate": 3072, "vocab": 30522}
MODELS: dict[str, Callable[[], Any]] = {
    "bert_like": lambda: transformers.bert_like(layers=BERT_LAYERS),
    "bert_like_tanh_gelu": lambda: transformers.bert_like(layers=BERT_LAYERS, exact_gelu=False),
    "gpt_like": transformers.gpt_like,
    "ConvNeXtTiny": _application("ConvNeXtTiny", 64),
    "MobileNetV3Small": _application("MobileNetV3Small", 96),
    "lstm": control_flow.lstm,
}
ON_REQUEST: dict[str, Callable[[], Any]] = {
    "bert_base": lambda: transformers.bert_like(**BERT_BASE),
    "keras_hub_bert_base": _keras_hub(
        "BertBackbone", 128, vocabulary_size=30522, num_layers=12, num_heads=12,
        hidden_dim=768, intermediate_dim=3072),
    "keras_hub_gpt2": _keras_hub(
        "GPT2Backbone", 64, vocabulary_size=1000, num_layers=2, num_heads=2, hidden_dim=128,
        intermediate_dim=512, max_sequence_length=64),
    "keras_hub_llama": _keras_hub(
        "LlamaBackbone", 64, vocabulary_size=1000, num_layers=2, num_query_heads=2,
        num_key_value_heads=1, hidden_dim=128, intermediate_dim=256),
    "keras_hub_gemma": _keras_hub(
        "GemmaBackbone", 64, vocabulary_size=1000, num_layers=2, num_query_heads=2,
        num_key_value_heads=1, hidden_dim=128, intermediate_dim=256, head_dim=64),
}
MODES = {"implicit batch": ConversionParams(),
         "dynamic shape": ConversionParams(use_dynamic_shape=True,
                                           dynamic_shape_profile_strategy="Range")}


UNCAPPED = 10_000  # max_engines high enough to count every segment


def _engines(session: ConversionSession, params: ConversionParams) -> tuple[int, float, int]:
    """Engines, % converted, and the engines without TF-TRT's cap (the segments there are)."""
    result = session.convert(params)
    engines = len(result.engines)
    if engines >= params.max_engines:
        engines_uncapped = len(session.convert(replace(params, max_engines=UNCAPPED)).engines)
    else:
        engines_uncapped = engines
    return engines, result.percent_converted, engines_uncapped


def measure(name: str) -> dict[str, Any]:
    start = time.perf_counter()
    session = ConversionSession.open({**MODELS, **ON_REQUEST}[name](), cache=False)
    rewritten = session.rewritten()
    row: dict[str, Any] = {"model": name, "rewrites": dict(rewritten.rewrite_counts)}
    for mode, params in MODES.items():
        before = _engines(session, params)
        row[mode] = (before, _engines(rewritten, params) if rewritten.rewrite_counts else before)
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


def _change(values: tuple[tuple[int, float, int], tuple[int, float, int]]) -> str:
    (engines, percent, _), (engines_after, percent_after, _) = values
    before, after = (_count(v) for v in values)
    if (engines, percent) == (engines_after, percent_after):
        return f"{before}, {percent:.1f}% (unchanged)"
    return f"{before} -> **{after}**, {percent:.1f}% -> **{percent_after:.1f}%**"


def _count(values: tuple[int, float, int]) -> str:
    engines, _, uncapped = values
    return str(engines) if engines == uncapped else f"{engines} ({uncapped} uncapped)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"comma-separated; also: {', '.join(ON_REQUEST)}")
    names = parser.parse_args().models.split(",")
    previous = _previous_rows(names)
    rows = []
    for name in names:
        rows.append(measure(name))
        print(f"{name}: {rows[-1]}", flush=True)
        _write(rows, previous)  # after each model: a long run keeps what it measured
    print("\n".join(table(rows)))


def _write(rows: list[dict[str, Any]], previous: list[list[str]]) -> None:
    figures = []
    for row in rows:
        if not row["rewrites"]:
            continue
        before, after = row["dynamic shape"]
        met = row["max_rel_error"] <= TARGET_RELATIVE_ERROR
        figures.append(record.figure(
            f"{row['model']}: engines before -> after the rewrites (dynamic shape); outputs' "
            f"max relative error", f"{_count(before)} -> {_count(after)}; "
            f"{row['max_rel_error']:.1e}", f"error <= {TARGET_RELATIVE_ERROR:g}", met))
    record.write("rewrites", figures, keep_other_models=True, details={
        "title": "Engines and % converted before -> after the rewrites",
        "columns": COLUMNS, "rows": previous + [cells(row) for row in rows]})


def _previous_rows(names: list[str]) -> list[list[str]]:
    """The table rows of the models this run did not measure, from the last results file."""
    path = record.RESULTS / "rewrites.json"
    if not path.exists():
        return []
    rows = json.loads(path.read_text()).get("details", {}).get("rows", [])
    return [row for row in rows if row[0] not in names]


if __name__ == "__main__":
    main()
