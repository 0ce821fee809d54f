"""try a grid of conversion settings (convert, build, validate, time), one trial per point on
Dask workers; print the table, the Pareto set and a recommendation
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from workbench.cli import options

TUNE_COLUMNS = ("trial_id", "precision_mode", "minimum_segment_size", "use_dynamic_shape",
                "dynamic_shape_profile_strategy", "denylist", "max_engines", "status",
                "percent_converted", "engines", "latency_ms", "speedup", "max_abs_error",
                "top1_agreement", "worker")
# The grid keys typed as text, with the options that type them (what errors call them).
GRID_OPTIONS = {"precision_mode": "--precision", "minimum_segment_size": "--minimum-segment-size",
                "use_dynamic_shape": "--use-dynamic-shape",
                "dynamic_shape_profile_strategy": "--profile-strategy",
                "max_engines": "--max-engines"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_model_arguments(parser)
    parser.add_argument("--precision", default=None, help="comma-separated, e.g. FP32,FP16,INT8")
    parser.add_argument("--minimum-segment-size", default=None,
                        help="comma-separated, e.g. 2,3,5")
    parser.add_argument("--use-dynamic-shape", default=None,
                        help="off, on or off,on (default: off; on when --profile-strategy is "
                             "given)")
    parser.add_argument("--profile-strategy", default=None,
                        help="comma-separated, e.g. Range,Optimal")
    parser.add_argument("--denylist", action="append", default=None, metavar="OP,OP",
                        help="one denylist per use (repeat to try several; '' for none)")
    parser.add_argument("--max-engines", default=None, help="comma-separated engine limits")
    options.add_batch_sizes_argument(parser)
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=None,
                       help="local Dask worker processes (default: 1)")
    where.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="run on an existing Dask cluster, e.g. tcp://host:8786")
    parser.add_argument("--store", default=None, metavar="DIR",
                        help="where trials are kept and resumed from (default: ./workbench_runs)")
    parser.add_argument("--timeout", type=float, default=None, metavar="S",
                        help="seconds a trial may take on its worker before it is given up")
    options.add_tensorrt_argument(parser, "add TensorRT's verdict to every trial (engines "
                                          "TensorRT-RTX builds)")
    options.add_target_gpu_argument(parser, "per trial at the first of --batch-sizes; the "
                                            "Pareto set and the recommendation then rank by the "
                                            "estimate")
    parser.add_argument("--no-validate", action="store_true",
                        help="do not compare outputs with native TensorFlow")
    parser.add_argument("--retry-failed", action="store_true",
                        help="run stored failed and timed-out trials again")
    options.add_json_argument(parser)


def run(args: argparse.Namespace) -> int:
    from workbench.checks.conversion_check import parse_batch_sizes
    from workbench.tuning import tune

    result = tune(args.model, _grid(args), batch_sizes=parse_batch_sizes(args.batch_sizes),
                  workers=args.workers, scheduler=args.scheduler, store=args.store,
                  timeout=args.timeout, validate=not args.no_validate,
                  signature_key=args.signature_key, tags=options.split(args.tags),
                  retry_failed=args.retry_failed, tensorrt=args.tensorrt,
                  target_gpu=args.target_gpu)
    for problem in result.problems:
        print(f"workbench: warning: {problem}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_json(), default=str))
    else:
        _print_result(result)
    return 0


def _grid(args: argparse.Namespace) -> dict[str, list[Any]]:
    """The grid the options ask for; options not given take TF-TRT's defaults."""
    from workbench.tuning.grid import grid_from_text

    texts = {key: getattr(args, option[2:].replace("-", "_"))
             for key, option in GRID_OPTIONS.items()}
    return grid_from_text(texts, args.denylist, GRID_OPTIONS)


def _print_result(result: Any) -> None:
    """The trials, the Pareto set and the recommendation as text tables."""
    import pandas as pd

    from workbench.tuning.tune_result import ESTIMATE_COLUMNS

    target = result.target
    columns = list(TUNE_COLUMNS) + (list(ESTIMATE_COLUMNS) if target else [])
    latency = f"latency estimated for {target['gpu']}" if target else "latency"
    with pd.option_context("display.width", 200, "display.max_columns", None,
                           "display.max_colwidth", 60):
        print(result.table[columns].to_string(index=False))
        print(f"\nPareto set ({latency}, max error, % converted):")
        print(result.pareto[columns].to_string(index=False)
              if len(result.pareto) else "(no trial succeeded)")
    if target:
        print(f"\nestimated_*: {target['label']}; latency_ms and speedup: measured here")
    chosen = result.recommended
    print(f"\nrecommended: {chosen['trial_id']} {json.dumps(chosen['params'])}\n  because "
          f"{chosen['reason']}" if chosen else "\nno recommendation: no trial succeeded")
