"""TensorRT-RTX's own parser and builder over every engine the exporter makes.

Per model, mode (implicit batch, dynamic shape) and precision (FP32, FP16): the model is
converted with `TrtGraphConverterV2`, and `tensorrt_verdicts()` has TensorRT-RTX parse each
engine's ONNX (FP16: float16 ONNX) into a strongly typed network and build a plan with the
conversion's profile (implicit batch: batch 1..4 at
the build's shapes; dynamic shape: the Range profile of `build()`'s two input sets, batch 1 and
4, free dims 8 and 16, open image sizes 224). Prints one line per engine: parsed, built,
TensorRT's error; then a per-model summary. The builder runs without a GPU.

    .venv/bin/python benchmarks/tensorrt_parse_survey.py [--models tiny_bert,ResNet50]
        [--modes implicit,dynamic] [--precisions FP32,FP16]

Default models: the sample models, the zoo's jit-compiled-function model and one architecture
of each keras.applications family (random weights). Each conversion runs in its own process.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

import record

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SAMPLES = ("quickstart_mlp", "digits_cnn", "resnet50", "mobilenet_v2", "tiny_bert", "detector",
           "lstm", "gru", "map_fn_cnn", "png_cnn", "cond_mlp")
FEATURES = ("xla_function",)  # sample_models.zoo's feature models that are not samples
APPLICATIONS = ("ResNet50", "MobileNetV2", "MobileNetV3Small", "EfficientNetB0",
                "EfficientNetV2B0", "ConvNeXtTiny", "DenseNet121", "InceptionV3", "Xception",
                "NASNetMobile", "VGG16")
BATCHES = (1, 4)  # build()'s input sets (implicit batch: the largest builds the engine)
FREE_DIMS = (8, 16)  # unknown non-batch dims (sequence lengths) of those sets


@dataclass
class EngineRow:
    model: str
    mode: str
    precision: str
    engine: str
    parsed: bool = False
    built: bool = False
    error: str = ""


def survey(model: str, mode: str, precision: str) -> list[EngineRow]:
    """Every engine of one conversion through TensorRT-RTX (`tensorrt_verdicts()`, uncached
    profiles from the two input sets as build() takes them)."""
    from sample_models.zoo import zoo
    from workbench import trt_convert as trt
    from workbench.checks.inputs import random_inputs

    source = _source(model, zoo())
    kwargs = {"input_model": source} if not isinstance(source, str) else {
        "input_saved_model_dir": source}
    dynamic = mode == "dynamic"
    converter = trt.TrtGraphConverterV2(**kwargs, precision_mode=precision,
                                        use_dynamic_shape=dynamic)
    func = converter.convert()
    # Images of an open size (MobileNetV3) take 224, their default size with weights.
    dims = (224, 224) if model in APPLICATIONS else FREE_DIMS
    sets = [random_inputs(converter.session, batch, other_dim=dim)
            for batch, dim in zip(BATCHES, dims, strict=True)]
    if not dynamic:  # TF-TRT's implicit batch: one engine for the largest batch
        sets = sets[-1:]
    names = func.input_names
    verdicts = converter.tensorrt_verdicts(lambda: [[s[n] for n in names] for s in sets])
    return [EngineRow(model, mode, precision, name, v.parsed, v.built, v.error or "")
            for name, v in verdicts.items()]


def _source(model: str, models: dict):
    import sample_models

    if model in SAMPLES:
        return str(sample_models.build(model))
    return models[model].make()


def _run(task: tuple[str, str, str]) -> list[EngineRow]:
    model, mode, precision = task
    try:
        return survey(model, mode, precision)
    except Exception as error:  # one model's failure is its row, not the survey's end
        return [EngineRow(model, mode, precision, "-", error=f"{type(error).__name__}: "
                          f"{str(error).splitlines()[0] if str(error) else ''}")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(SAMPLES + FEATURES + APPLICATIONS))
    parser.add_argument("--modes", default="implicit,dynamic")
    parser.add_argument("--precisions", default="FP32,FP16")
    args = parser.parse_args()
    tasks = [(m, mode, p) for m in args.models.split(",") for mode in args.modes.split(",")
             for p in args.precisions.split(",")]
    context = multiprocessing.get_context("spawn")
    summary = []
    for task in tasks:
        with ProcessPoolExecutor(1, mp_context=context) as pool:
            try:
                rows = pool.submit(_run, task).result()
            except BrokenProcessPool:  # killed, e.g. out of memory
                rows = [EngineRow(*task, "-", error="the conversion's process died")]
        for r in rows:
            print(f"{r.model:16} {r.mode:8} {r.precision:4} {r.engine:28} "
                  f"parsed={r.parsed!s:5} built={r.built!s:5} {r.error[:300]}", flush=True)
        built = sum(r.built for r in rows)
        summary.append((*task, len(rows), built, sorted({r.error[:160] for r in rows
                                                           if not r.built})))
    print("\nmodel            mode     prec engines built refused (reasons)")
    for model, mode, precision, engines, built, reasons in summary:
        print(f"{model:16} {mode:8} {precision:4} {engines:7} {built:5} {engines - built:3} "
              f"{' | '.join(reasons)}")
    record.write("tensorrt_parse_survey", [
        record.figure(f"{model} {mode} {precision}: engines TensorRT-RTX builds",
                      f"{built} of {engines}" + (f" (refused: {' | '.join(reasons)[:200]})"
                                                 if reasons else ""),
                      "every engine built or refused with TensorRT's reason", None)
        for model, mode, precision, engines, built, reasons in summary],
        keep_other_models=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
