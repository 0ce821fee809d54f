"""segment a model as TF-TRT would; print its summary and report"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from workbench import environment
from workbench.cli import options, rewrite
from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    from workbench.conversion.params import ConversionParams
    from workbench.conversion.result import ConversionResult
    from workbench.conversion.session import ConversionSession
    from workbench.profiling.estimate.calibration import Calibration


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_model_arguments(parser)
    options.add_conversion_arguments(parser)
    options.add_json_argument(parser)
    parser.add_argument("--detailed", action="store_true",
                        help="show the reasons per op (like TF_TRT_SHOW_DETAILED_REPORT=1)")
    options.add_tensorrt_argument(parser, "add TensorRT's verdict on every engine (TensorRT-RTX's "
                                          "parser and builder; no GPU needed)")
    options.add_target_gpu_argument(parser, "per engine")
    options.add_target_batch_size_argument(parser)
    options.add_calibration_arguments(parser, "this conversion at --target-batch-size")


def run(args: argparse.Namespace) -> int:
    from workbench.conversion.advice import advice_lines, advise
    from workbench.conversion.conversion_report import ConversionReport
    from workbench.conversion.summary import summary_lines

    params = options.conversion_params(args)
    options.require_tensorrt(args)  # before any work: without the builder, say how to install it
    if args.target_batch_size < 1:
        raise WorkbenchError(f"--target-batch-size must be 1 or more, not {args.target_batch_size}")
    options.check_target_gpu(args)
    session = options.open_session(args)
    result = session.convert(params)
    advice = advise(session, params)
    tensorrt = options.tensorrt_verdicts(session, result, params) if args.tensorrt else None
    estimate = options.gpu_estimate(session, result, params, args, tensorrt) if args.target_gpu \
        else None
    calibration = None
    if estimate is not None:
        from workbench.profiling.estimate.calibration import calibrated

        calibration = options.calibration_of(
            args, args.target_gpu, estimate["converted_ms"],
            f"this conversion at batch {args.target_batch_size}")
        estimate = calibrated(estimate, calibration)
    if args.json:
        print(ConversionReport(result, advice, tensorrt=tensorrt, estimate=estimate).to_json())
        return 0
    for line in summary_lines(result):
        print(line)
    if estimate is not None:
        _print_estimate(session, params, args, estimate, calibration, advice)
    for name, verdict in (tensorrt or {}).items():
        outcome = (f"built, {verdict['plan_bytes']} bytes, {verdict['layers']} layers, "
                   f"{verdict['build_s']} s") if verdict["built"] else verdict["error"]
        print(f"{verdict['builder']} {name}: {outcome}")
    if result.nonconversion:
        _print_nonconversion(result, args.detailed)
    print("\n".join(advice_lines(advice)))
    return 0


def _print_estimate(session: ConversionSession, params: ConversionParams,
                    args: argparse.Namespace, estimate: dict,
                    calibration: Calibration | None, advice: list) -> None:
    """The model's estimate, the rewritten model's when the advice has the rewrites, then what
    the minimum_segment_size sweep suggests for the GPU."""
    from workbench.profiling.estimate.conversion import (
        estimate_line,
        sweep_advice,
        sweep_estimate,
    )

    print(estimate_line(estimate))
    rewritten = rewrite.estimate_line(session, params, advice, args.target_gpu,
                                      args.target_batch_size)
    if rewritten:
        print(rewritten)
    sweep = sweep_estimate(session, params, session.sweep(params), args.target_gpu,
                           args.target_batch_size, calibration)
    advice_line = sweep_advice(sweep, params.minimum_segment_size)
    if advice_line:
        print(advice_line)


def _print_nonconversion(result: ConversionResult, detailed: bool) -> None:
    """TF-TRT's non-conversion report, detailed as its environment variable or --detailed
    asks, and its CSV where the variable names one."""
    from workbench.conversion.conversion_report import (
        detailed_report_setting,
        nonconversion_report,
        write_nonconversion_csv,
    )

    setting = environment.SHOW_DETAILED_REPORT.read() or None
    from_environment, csv_path = detailed_report_setting(setting)
    print(nonconversion_report(result.nonconversion, from_environment or detailed))
    if csv_path:
        error = write_nonconversion_csv(result.nonconversion, csv_path)
        print(error or f"TF-TRT Non-Conversion Report saved at: `{csv_path}`", file=sys.stderr)
