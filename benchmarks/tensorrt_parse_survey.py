"""TensorRT-RTX's own parser and builder over every engine the exporter makes.

Per model, mode (implicit batch, dynamic shape) and precision (FP32, FP16): the model is
converted with `TrtGraphConverterV2`, each engine's segment is exported to ONNX as the engines
are built (FP16: float16 ONNX from `to_float16`), and TensorRT-RTX parses it into a strongly
typed network and builds a plan with the conversion's profile (implicit batch: batch 1..4 at
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


def tensorrt_build(model_bytes: bytes, profiles: list, shape_values: dict) -> tuple[bool, bool,
                                                                                    str]:
    """(parsed, built, TensorRT's first error) for one ONNX model and its profiles.

    `profiles`: [(min, opt, max) per network input]; `shape_values`: input name -> (min, opt,
    max) of its values, for the inputs TensorRT takes as shape tensors.
    """
    import tensorrt_rtx as trt

    logger = _Logger(trt)
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(model_bytes):
        errors = [str(parser.get_error(i).desc()) for i in range(parser.num_errors)]
        return False, False, "; ".join(errors) or logger.first_error()
    config = builder.create_builder_config()
    inputs = [network.get_input(i) for i in range(network.num_inputs)]
    for profile in profiles:
        trt_profile = builder.create_optimization_profile()
        for tensor, (low, opt, high) in zip(inputs, profile, strict=True):
            if tensor.is_shape_tensor:
                trt_profile.set_shape_input(tensor.name, *shape_values[tensor.name])
            else:
                trt_profile.set_shape(tensor.name, low, opt, high)
        config.add_optimization_profile(trt_profile)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        return True, False, logger.first_error() or "build_serialized_network returned None"
    return True, True, ""


class _Logger:
    """Keeps TensorRT's errors (the builder reports why it failed only through its logger)."""

    def __new__(cls, trt):  # a subclass of trt.ILogger made on first use (lazy import)
        class Logger(trt.ILogger):
            def __init__(self) -> None:
                trt.ILogger.__init__(self)
                self.errors: list[str] = []

            def log(self, severity, msg) -> None:
                if severity <= trt.ILogger.Severity.ERROR:
                    self.errors.append(msg)

            def first_error(self) -> str:
                return self.errors[0] if self.errors else ""

        return Logger()


def survey(model: str, mode: str, precision: str) -> list[EngineRow]:
    """Every engine of one conversion through TensorRT-RTX."""
    from sample_models.zoo import zoo
    from workbench import trt_convert as trt
    from workbench.engines.onnx_export import ExportError
    from workbench.engines.onnxruntime_backend import fold_for_precision, to_float16
    from workbench.engines.profiles import optimization_profiles
    from workbench.engines.runtime import collect_inputs
    from workbench.engines.tensorrt_backend import implicit_batch_profile
    from workbench.profiling.tensorflow import random_inputs

    source = _source(model, zoo())
    kwargs = {"input_model": source} if not isinstance(source, str) else {
        "input_saved_model_dir": source}
    converter = trt.TrtGraphConverterV2(**kwargs, precision_mode=precision,
                                        use_dynamic_shape=mode == "dynamic")
    func = converter.convert()
    dynamic = mode == "dynamic"
    # Images of an open size (MobileNetV3) take 224, their default size with weights.
    dims = (224, 224) if model in APPLICATIONS else FREE_DIMS
    sets = [random_inputs(converter.session, batch, other_dim=dim)
            for batch, dim in zip(BATCHES, dims, strict=True)]
    if not dynamic:  # TF-TRT's implicit batch: one engine for the largest batch
        sets = sets[-1:]
    names = func.input_names
    inputs = collect_inputs(lambda: [[s[n] for n in names] for s in sets], names, "inputs")
    shapes = func._engine_shapes(inputs)  # what build() reads; no public form of it yet
    collected = func._run_collecting(inputs, shapes=False)  # engine inputs (shape tensors)
    rows = []
    for name in func.segments:
        row = EngineRow(model, mode, precision, name)
        rows.append(row)
        try:
            onnx_model = func.onnx_model(name, keep=False)
        except ExportError as error:
            row.error = f"export: {error}"
            continue
        if precision == "FP16":
            onnx_model = to_float16(fold_for_precision(onnx_model))
        engine_shapes = shapes.get(name) or []
        if not engine_shapes:
            row.error = "no input shapes (engine not reached by the inputs)"
            continue
        if dynamic:
            profiles = [list(zip(p.min, p.opt, p.max, strict=True))
                        for p in optimization_profiles(engine_shapes, "Range")]
        else:
            p = implicit_batch_profile(engine_shapes[-1][0][0] if engine_shapes[-1][0] else 1,
                                       engine_shapes[-1])
            profiles = [list(zip(p.min, p.opt, p.max, strict=True))]
        values = _engine_input_values(collected, name, onnx_model)
        row.parsed, row.built, row.error = tensorrt_build(
            onnx_model.SerializeToString(), profiles, values)
    return rows


def _engine_input_values(collected: dict, name: str, onnx_model) -> dict:
    """(min, opt, max) of the values of each int engine input over the input sets: what a
    shape-tensor input's profile takes (the last set is the optimum, as build() orders)."""
    import numpy as np

    batches = collected.get(name, ([], []))[1]
    initializers = {t.name for t in onnx_model.graph.initializer}
    graph_inputs = [i.name for i in onnx_model.graph.input if i.name not in initializers]
    values = {}
    for index, input_name in enumerate(graph_inputs):
        arrays = [np.asarray(b[index]).reshape(-1) for b in batches]
        if arrays and arrays[0].dtype.kind in "iu" and len({a.size for a in arrays}) == 1 \
                and arrays[0].size <= 8:
            low, high = np.min(arrays, axis=0), np.max(arrays, axis=0)
            values[input_name] = (low.tolist(), high.tolist(), high.tolist())
    return values


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
    sys.stdout.flush()


if __name__ == "__main__":
    main()
