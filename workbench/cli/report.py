"""write the workbench's view of a conversion as one offline HTML page"""

from __future__ import annotations

import argparse
from typing import Any

from workbench.cli import options
from workbench.errors import WorkbenchError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_model_arguments(parser)
    options.add_conversion_arguments(parser)
    options.add_output_argument(parser, "the HTML file to write (default: report.html)",
                                default="report.html")
    parser.add_argument("--check", action="store_true",
                        help="also build the engines, validate and time them (workbench check)")
    options.add_tensorrt_argument(parser, "add TensorRT's verdict on every engine (TensorRT-RTX's "
                                          "builder)")
    options.add_per_engine_argument(parser, "also rank the engines by error, with measured "
                                            "remedies")
    options.add_batch_sizes_argument(parser, "with --check: comma-separated (default: 1)")
    options.add_target_gpu_argument(parser, "at each of --batch-sizes, and the "
                                            "minimum_segment_size sweep")
    parser.add_argument("--tune-store", metavar="DIR",
                        help="add a Tuning section: the trials `workbench tune --store DIR` "
                             "stored for this model")


def run(args: argparse.Namespace) -> int:
    from workbench.checks.conversion_check import (
        check_conversion,
        parse_batch_sizes,
        print_progress,
    )
    from workbench.viz.html_report import check_report_path, write_html_report

    # Bad parameters or output paths fail before the slow model load.
    params = options.conversion_params(args)
    check_report_path(args.output)
    sizes = parse_batch_sizes(args.batch_sizes)
    options.check_target_gpu(args)
    tuning = _stored_tuning(args) if args.tune_store else None
    options.require_tensorrt(args)
    session = options.open_session(args)
    check = check_conversion(session, params, print_progress, batch_sizes=sizes) \
        if args.check else None
    tensorrt = options.tensorrt_verdicts(session, session.convert(params), params) \
        if args.tensorrt else None
    per_engine = None
    if args.per_engine:
        from workbench.checks.per_engine import per_engine_accuracy

        per_engine = per_engine_accuracy(session, params, batch_size=sizes[-1],
                                         progress=print_progress)
    if tuning is not None and args.target_gpu:
        from workbench.tuning.estimates import with_estimates

        tuning = with_estimates(tuning, session, args.target_gpu, sizes[0])
    path = write_html_report(session, params, args.output, check, tuning, tensorrt,
                             per_engine=per_engine, target_gpu=args.target_gpu,
                             batch_sizes=sizes)
    print(f"wrote {path}")
    return 0


def _stored_tuning(args: argparse.Namespace) -> Any:
    """The `TuneResult` of the trials stored for the model under `--tune-store`."""
    from workbench.tuning.driver import model_fingerprint
    from workbench.tuning.trial_store import TrialStore
    from workbench.tuning.tune_result import TuneResult

    tags = options.split(args.tags)
    store = TrialStore(args.tune_store, model_fingerprint(args.model, args.signature_key, tags))
    trials = list(store.load().values())
    if not trials:
        raise WorkbenchError(f"no tuning trials of {args.model} in {args.tune_store}: run "
                             f"`workbench tune {args.model} --store {args.tune_store}` first")
    return TuneResult(trials, model=args.model, store=store.directory, problems=store.problems)
