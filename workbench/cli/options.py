"""The argument groups commands share, declared once, and what they turn into: a model's
session, conversion parameters, a checked target GPU, and what `--tensorrt` and `--target-gpu`
add to a conversion."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    from workbench.conversion.params import ConversionParams
    from workbench.conversion.session import ConversionSession
    from workbench.profiling.estimate.calibration import Calibration

EXIT_USAGE = 2
EXIT_INTERNAL = 1
EXIT_MISMATCH = 3  # validate, check: outputs differ beyond the tolerances


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="SavedModel directory, .keras file or frozen .pb")
    parser.add_argument("--signature-key", default=None, help="default: serving_default")
    parser.add_argument("--tags", default=None, help="comma-separated, default: serve")
    parser.add_argument("--outputs", default=None,
                        help="output node names of a frozen .pb, comma-separated")
    add_debug_argument(parser)


def add_conversion_arguments(parser: argparse.ArgumentParser) -> None:
    add_precision_argument(parser)
    parser.add_argument("--minimum-segment-size", type=int, default=3,
                        help="smaller segments stay in TensorFlow (default: 3)")
    parser.add_argument("--use-dynamic-shape", action="store_true",
                        help="explicit batch with optimization profiles (default: implicit batch)")
    parser.add_argument("--profile-strategy", default=None,
                        help="Range, Optimal, Range+Optimal or ImplicitBatchModeCompatible")
    parser.add_argument("--denylist", default=None,
                        help="op types never converted, comma-separated "
                             "(default: $TF_TRT_OP_DENYLIST)")
    parser.add_argument("--max-engines", type=int, default=None,
                        help="keep the N largest engines (default: "
                             "$TF_TRT_MAX_ALLOWED_ENGINES or 20; <= 0: no limit)")
    add_prepare_for_argument(parser)


def add_precision_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--precision", default="FP32", help="FP32, FP16 or INT8")


def add_prepare_for_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prepare-for", default=None, metavar="GPU|cpu",
                        help="the device TF-TRT's Grappler run saw: a GPU (T4, V100, A100, "
                             "'RTX 3090', ...) or compute capability (7.5, sm_75), or cpu "
                             "(default: T4)")


def add_target_gpu_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--target-gpu", default=None, metavar="NAME",
                        help="add the latency estimated for this GPU (T4, A100, 'NVIDIA A100 "
                             f"80GB PCIe', ...): converted vs native TF, {what}; labelled "
                             "estimated, with the model's measured error")


def add_target_batch_size_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target-batch-size", type=int, default=1, metavar="N",
                        help="with --target-gpu: the batch size estimated (default: 1)")


def add_calibration_arguments(parser: argparse.ArgumentParser, measured: str) -> None:
    """--calibrate PROFILE.json / --measured-ms X: rescale every estimate on that GPU."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--calibrate", default=None, metavar="PROFILE.json",
                       help="a trtexec --exportProfile of one engine on the target GPU (its "
                            "layer info beside it): every estimate on that GPU is rescaled by "
                            "that engine's measured / estimated time")
    group.add_argument("--measured-ms", type=float, default=None, metavar="X",
                       help=f"the latency measured on the target GPU of {measured}: every "
                            "estimate on that GPU is rescaled by measured / estimated")


def add_tensorrt_argument(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--tensorrt", action="store_true", help=help)


def add_batch_sizes_argument(parser: argparse.ArgumentParser,
                             help: str = "comma-separated (default: 1)") -> None:
    parser.add_argument("--batch-sizes", default="1", help=help)


def add_per_engine_argument(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--per-engine", action="store_true", help=help)


def add_tolerance_arguments(parser: argparse.ArgumentParser) -> None:
    for name in ("atol", "rtol"):
        parser.add_argument(f"--{name}", type=float, default=None,
                            help="default per precision: FP32 1e-5, FP16 1e-2, INT8 1e-1")


def add_output_argument(parser: argparse.ArgumentParser, help: str, **options: object) -> None:
    parser.add_argument("-o", "--output", help=help, **options)


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true",
                        help="print exactly one JSON document on stdout")


def add_debug_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--debug", action="store_true", help="show tracebacks")


def split(text: str | None) -> tuple[str, ...] | None:
    """Comma-separated text as its non-empty parts; None stays None (the callee's default)."""
    from workbench.tuning.grid import split_values

    return None if text is None else tuple(split_values(text))


def conversion_params(args: argparse.Namespace) -> ConversionParams:
    """The conversion the options ask for, TF-TRT's environment variables applied; built (and
    so checked) before any slow work. A command without --denylist or --max-engines
    (validate) takes them from the environment alone."""
    from workbench.conversion.params import params_from_environment

    return params_from_environment(
        precision_mode=args.precision,
        minimum_segment_size=args.minimum_segment_size,
        use_dynamic_shape=args.use_dynamic_shape,
        dynamic_shape_profile_strategy=args.profile_strategy,
        denylist=split(getattr(args, "denylist", None)),
        max_engines=getattr(args, "max_engines", None),
    )


def open_session(args: argparse.Namespace) -> ConversionSession:
    from workbench.conversion.session import ConversionSession

    return ConversionSession.open(
        args.model, args.signature_key, split(args.tags), split(args.outputs),
        prepare_for=args.prepare_for,
    )


def check_target_gpu(args: argparse.Namespace) -> None:
    """An unknown --target-gpu fails before the slow model load, listing the known ones."""
    if args.target_gpu:
        from workbench.profiling.estimate.conversion import target_gpu_name

        target_gpu_name(args.target_gpu)


def require_tensorrt(args: argparse.Namespace) -> None:
    """With --tensorrt, fails before any work when the builder is missing, saying how to
    install it."""
    if args.tensorrt:
        from workbench.engines.inspection.tensorrt_verdict import require_tensorrt as require

        require()


def tensorrt_verdicts(session: ConversionSession, result: Any, params: ConversionParams
                      ) -> dict[str, dict]:
    """engine -> TensorRT's verdict (the JSON object) on generated inputs."""
    from workbench.checks.tensorrt_verdicts import conversion_verdicts
    from workbench.engines.runtime.converted_model import converted_model

    converted = converted_model(session, result, params)
    verdicts = conversion_verdicts(session, converted)
    return {name: verdict.to_json() for name, verdict in verdicts.items()}


def gpu_estimate(session: ConversionSession, result: Any, params: ConversionParams,
                 args: argparse.Namespace, tensorrt: dict[str, dict] | None = None) -> dict:
    """The estimate for --target-gpu: engines TensorRT built (--tensorrt) from their kernels."""
    from workbench.profiling.estimate.conversion import conversion_estimate

    return conversion_estimate(session, params, args.target_gpu, args.target_batch_size, result,
                               tensorrt=tensorrt)


def calibration_of(args: argparse.Namespace, gpu: str, estimated_ms: float | None,
                   what: str) -> Calibration | None:
    """The `Calibration` --calibrate / --measured-ms ask for (None without either)."""
    from workbench.profiling.estimate.calibration import from_measured, from_profile

    if getattr(args, "calibrate", None):
        return from_profile(args.calibrate, gpu)
    if getattr(args, "measured_ms", None) is not None:
        if estimated_ms is None:
            raise WorkbenchError(f"--measured-ms: {what} has no estimate to calibrate on")
        return from_measured(gpu, args.measured_ms, estimated_ms, what)
    return None
