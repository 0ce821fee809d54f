"""Carry a conversion out of the workbench: a TF-TRT script, the whole model as ONNX, trtexec.

- `tftrt`: a Python script for TensorFlow <= 2.17 that runs TF-TRT's `TrtGraphConverterV2`
  with exactly the chosen parameters and environment variables, builds for the shapes the
  profile strategy needs, calibrates INT8 on the user's data and saves.
- `onnx`: the whole model through tf2onnx, checked against native TensorFlow before it is
  written (`checks.onnx_model`).
- `trtexec`: a shell script of trtexec commands for that ONNX model (the profile strategy's
  min/opt/max shapes, precision flags, the profiling exports the Profiling tab reads) and a
  Polygraphy command comparing TensorRT with ONNX Runtime.

Every file goes through a temporary file renamed into place: nothing half-written.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

from workbench.checks.inputs import random_inputs
from workbench.checks.onnx_model import checked_output_path, write_atomically, write_onnx
from workbench.conversion.params import ConversionParams, params_from_environment
from workbench.engines.backends.tensorrt_backend import implicit_batch_profile
from workbench.engines.profiles import Profile, ShapeSet, optimization_profiles
from workbench.errors import WorkbenchError
from workbench.words import counted

if TYPE_CHECKING:
    from workbench.conversion.session import ConversionSession

FORMATS = ("tftrt", "onnx", "trtexec")
TFTRT_IMPORT = "from tensorflow.python.compiler.tensorrt import trt_convert as trt"
WORKBENCH_IMPORT = "from workbench import trt_convert as trt"
_TEMPLATE = Path(__file__).with_name("templates") / "tftrt_script.py.tmpl"
# trtexec's precision flags per TF-TRT precision mode (INT8 falls back to FP16, as TF-TRT did).
_TRTEXEC_PRECISION = {"FP32": [], "FP16": ["--fp16"], "INT8": ["--fp16", "--int8"]}


def params_of(source: Any) -> ConversionParams:
    """ConversionParams from what the workbench holds: ConversionParams, a tuning trial
    (`TrialRecord`, its `params`), the CLI's JSON `params` dict, or a converter."""
    if isinstance(source, ConversionParams):
        return source
    params = getattr(source, "params", source)
    if isinstance(params, ConversionParams):
        return params
    if isinstance(params, Mapping):
        values = {k: v for k, v in params.items() if k in ConversionParams.__dataclass_fields__}
        values["denylist"] = tuple(values.get("denylist") or ())
        return ConversionParams(**values)
    raise WorkbenchError(f"cannot read conversion parameters from {type(source).__name__}")


def build_shape_sets(session: ConversionSession, batch_sizes: Sequence[int] = (1,)
                     ) -> list[ShapeSet]:
    """The input shapes build() gets: one set per batch size, largest first (in implicit batch
    mode its engine serves every smaller batch); unknown other dims as the workbench's
    generated inputs have them."""
    sizes = sorted(set(batch_sizes), reverse=True)
    if not sizes or min(sizes) < 1:
        raise WorkbenchError(f"batch sizes must be >= 1, got {list(batch_sizes)}")
    return [tuple(tuple(int(d) for d in array.shape)
                  for array in random_inputs(session, size).values()) for size in sizes]


def engine_profiles(params: ConversionParams, shape_sets: Sequence[ShapeSet]) -> list[Profile]:
    """The TensorRT optimization profiles the conversion's engines get for these shapes."""
    if params.use_dynamic_shape:
        return optimization_profiles(shape_sets, params.dynamic_shape_profile_strategy or "Range")
    largest = max(shape_sets, key=lambda shapes: shapes[0][0] if shapes and shapes[0] else 0)
    return [implicit_batch_profile(largest[0][0] if largest[0] else 1, largest)]


def tftrt_script(session: ConversionSession, params: ConversionParams,
                 batch_sizes: Sequence[int] = (1,), script_name: str = "convert_tftrt.py",
                 saved_model: Path | None = None) -> str:
    """The TF-TRT conversion script's text (`python script.py [OUTPUT_DIR]`). `saved_model`:
    the SavedModel the script converts when it is not the session's own (the rewritten model
    that `export` writes beside the script)."""
    if saved_model is None and session.loaded.kind != "saved_model":
        raise WorkbenchError("the TF-TRT script converts SavedModels: save the model with "
                             "tf.saved_model.save first")
    shape_sets = build_shape_sets(session, batch_sizes)
    specs = session.optimized.input_specs
    if any(spec.dtype.name == "string" for spec in specs):
        raise WorkbenchError("the TF-TRT script builds from zero-filled inputs, which a "
                             "string input cannot take; export ONNX or trtexec instead")
    model = Path(saved_model or session.loaded.source).resolve()
    strategy = params.dynamic_shape_profile_strategy
    values = {
        "model_name": model.name, "script_name": script_name, "summary": describe(params),
        "rewrites_note": _rewrites_note(session.rewrite_counts),
        "denylist": repr(",".join(params.denylist)), "max_engines": repr(str(params.max_engines)),
        "model": repr(str(model)), "output_dir": repr(f"{model.name}_tftrt_{params.precision_mode}"
                                                      .lower()),
        "inputs": repr({name: spec.dtype.name for name, spec
                        in zip(session.loaded.input_names, specs, strict=True)}),
        "profile_note": (f"the {strategy} profile strategy" if strategy
                         else "implicit batch mode") + " makes these TensorRT profiles: "
                        + " | ".join(p.describe() for p in engine_profiles(params, shape_sets)),
        "build_shapes": repr([list(shapes) for shapes in shape_sets]),
        "calibration_batch": repr(shape_sets[-1][0][0] if shape_sets[-1][0] else 1),
        "tags": repr(list(session.loaded.tags)),
        "signature_key": repr(session.loaded.signature_key),
        "precision_mode": f"trt.TrtPrecisionMode.{params.precision_mode}",
        "minimum_segment_size": repr(params.minimum_segment_size),
        "use_dynamic_shape": repr(params.use_dynamic_shape),
        "dynamic_shape_profile_strategy": repr(strategy),
        "maximum_cached_engines": repr(params.maximum_cached_engines),
        "max_workspace_size_bytes": repr(params.max_workspace_size_bytes),
        "use_calibration": repr(params.use_calibration),
        "allow_build_at_runtime": repr(params.allow_build_at_runtime),
        "needs_calibration": repr(params.needs_calibration),
        "convert_argument": "calibration_input_fn=calibration_input_fn"
                            if params.needs_calibration else "",
    }
    return Template(_TEMPLATE.read_text()).substitute(values)


def _rewrites_note(counts: Mapping[str, int]) -> str:
    if not counts:
        return ""
    applied = ", ".join(f"{name} ({count})" for name, count in counts.items())
    return ("\n\nThe model is the original with the workbench's verified rewrites applied "
            f"({applied};\ndocs/rewrites.md), written beside this script by the export: plain "
            "TensorFlow, its outputs\nequal to the original's within each rewrite's stated "
            "bound.")


def write_rewritten(session: ConversionSession, script: Path) -> Path:
    """Saves a rewritten session's model beside `script` as `<script stem>_model/`, replacing
    the one an earlier export wrote there; through a temporary directory renamed into place."""
    from workbench.conversion.rewrites.model import save_rewritten

    directory = script.with_name(f"{script.stem}_model")
    if directory.exists() and not (directory / "saved_model.pb").is_file():
        raise WorkbenchError(f"{directory} exists and is not a SavedModel: move it away, the "
                             "export writes the rewritten model there")
    temporary = Path(tempfile.mkdtemp(dir=script.parent, prefix=f".{directory.name}."))
    try:
        save_rewritten(session.loaded, temporary / "model")
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(temporary / "model", directory)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return directory


def describe(params: ConversionParams) -> str:
    """The settings in one line, as the script's docstring and the app state them."""
    mode = (f"dynamic shape, {params.dynamic_shape_profile_strategy}" if params.use_dynamic_shape
            else "implicit batch")
    denylist = ",".join(params.denylist) or "none"
    limit = (f"at most {counted(params.max_engines, 'engine')}" if params.max_engines > 0
             else "no engine limit")  # 0: TF_TRT_MAX_ALLOWED_ENGINES's "no limit"
    return (f"{params.precision_mode}, minimum_segment_size={params.minimum_segment_size}, "
            f"{mode}, denylist {denylist}, {limit}")


def trtexec_commands(onnx_path: str, input_names: Sequence[str], params: ConversionParams,
                     shape_sets: Sequence[ShapeSet]) -> str:
    """A shell script: one trtexec build per optimization profile, writing the profiling JSON
    the Profiling tab reads, then a Polygraphy comparison of TensorRT with ONNX Runtime."""
    stem = Path(onnx_path).stem
    lines = ["#!/bin/sh", f"# TensorRT builds of {Path(onnx_path).name}: {describe(params)}.",
             "# Each profile's build writes its folder of TREx-named JSON files; read one with",
             f"# workbench profile --trtexec-profile {stem}_p0/{stem}.profile.json "
             f"--layer-info {stem}_p0/{stem}.graph.json, or load the folder in the Profiling tab.",
             "set -e", ""]
    if params.precision_mode == "INT8":
        lines += ["# --int8 without --calib=CACHE uses placeholder scales: fine for timing, "
                  "not for accuracy.", ""]
    for index, profile in enumerate(engine_profiles(params, shape_sets)):
        out = f"{stem}_p{index}/{stem}"
        command = ["trtexec", f"--onnx={onnx_path}", *_shape_flags(input_names, profile),
                   *_TRTEXEC_PRECISION[params.precision_mode], f"--saveEngine={out}.plan",
                   "--profilingVerbosity=detailed", "--dumpProfile", "--separateProfileRun",
                   f"--exportProfile={out}.profile.json", f"--exportLayerInfo={out}.graph.json",
                   f"--exportTimes={out}.timing.json"]
        lines += [f"# profile {index}: {profile.describe()}", f"mkdir -p {stem}_p{index}",
                  _join(command), ""]
    largest = max(shape_sets, key=lambda shapes: sum(s[0] for s in shapes if s))
    shapes = [f"{name}:{list(shape)}".replace(" ", "")
              for name, shape in zip(input_names, largest, strict=True)]
    polygraphy = ["polygraphy", "run", onnx_path, "--trt", "--onnxrt",
                  *(["--fp16"] if params.precision_mode != "FP32" else []),
                  "--input-shapes", *shapes, "--atol", "1e-3", "--rtol", "1e-3"]
    lines += ["# TensorRT against ONNX Runtime on the same model, on random inputs",
              shlex.join(polygraphy), ""]
    return "\n".join(lines)


def export(model: Any, format: str, output: str | os.PathLike, params: Any = None, *,
           batch_sizes: Sequence[int] = (1,), signature_key: str | None = None,
           tags: Sequence[str] | None = None, output_node_names: Sequence[str] | None = None,
           onnx_path: str | None = None) -> Path:
    """Writes the conversion as `format` ("tftrt", "onnx" or "trtexec") to `output` and
    returns its path. `model`: a model path or an open ConversionSession (a rewritten one,
    `session.rewritten()`, gets its model written beside a TF-TRT script); `params`: what
    `params_of` reads (default: TF-TRT's defaults and environment variables). `trtexec`
    commands name `onnx_path` (default: `output` with the suffix .onnx)."""
    from workbench.conversion.session import ConversionSession

    if format not in FORMATS:
        raise WorkbenchError(f"unknown export format {format!r}: use one of {', '.join(FORMATS)}")
    target = checked_output_path(output)
    params = params_from_environment() if params is None else params_of(params)
    session = model if isinstance(model, ConversionSession) else \
        ConversionSession.open(model, signature_key, tags, output_node_names)
    if format == "onnx":
        return write_onnx(session, target)
    if format == "tftrt":
        # A rewritten model is no SavedModel yet: the script converts it saved beside itself.
        saved = write_rewritten(session, target) if session.rewrite_counts else None
        text = tftrt_script(session, params, batch_sizes, target.name, saved)
    else:
        shapes = build_shape_sets(session, batch_sizes)
        onnx_file = onnx_path or str(target.with_suffix(".onnx").name)
        text = trtexec_commands(onnx_file, session.loaded.input_names, params, shapes)
    write_atomically(target, text.encode())
    if format == "trtexec":
        target.chmod(0o755)
    return target


def _shape_flags(names: Sequence[str], profile: Profile) -> list[str]:
    def spec(shapes: ShapeSet) -> str:
        return ",".join(f"{name}:{'x'.join(str(d) for d in shape)}"
                        for name, shape in zip(names, shapes, strict=True))

    return [f"--minShapes={spec(profile.min)}", f"--optShapes={spec(profile.opt)}",
            f"--maxShapes={spec(profile.max)}"]


def _join(command: list[str]) -> str:
    return " \\\n    ".join(shlex.quote(part) for part in command)
