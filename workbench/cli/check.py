"""build the engines, compare with native TF on generated inputs and time both per batch size:
the Validation tab (exit 3 on a mismatch)
"""

from __future__ import annotations

import argparse
import json

from workbench.cli import options
from workbench.cli.options import EXIT_MISMATCH


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_model_arguments(parser)
    options.add_conversion_arguments(parser)
    options.add_batch_sizes_argument(parser)
    parser.add_argument("--batches", type=int, default=2, help="generated batches to compare")
    parser.add_argument("--iterations", type=int, default=20, help="timed calls per figure")
    options.add_tolerance_arguments(parser)
    parser.add_argument("--whole-model", action="store_true",
                        help="also time the whole model as one engine on the backend")
    options.add_per_engine_argument(parser, "also rank the engines by the error each adds to "
                                            "the outputs, with the measured effect of remedies "
                                            "for the worst")
    options.add_target_gpu_argument(parser, "at each of --batch-sizes, beside the measured "
                                            "figures")
    options.add_json_argument(parser)


def run(args: argparse.Namespace) -> int:
    from workbench.checks.conversion_check import (
        check_conversion,
        parse_batch_sizes,
        print_progress,
    )

    params = options.conversion_params(args)
    sizes = parse_batch_sizes(args.batch_sizes)
    options.check_target_gpu(args)
    session = options.open_session(args)
    check = check_conversion(
        session, params, None if args.json else print_progress,
        batch_sizes=sizes, batches=args.batches, iterations=args.iterations,
        atol=args.atol, rtol=args.rtol, whole_model=args.whole_model,
        target_gpu=args.target_gpu)
    per_engine = None
    if args.per_engine:
        from workbench.checks.per_engine import per_engine_accuracy

        per_engine = per_engine_accuracy(session, params, batches=args.batches,
                                         batch_size=sizes[-1], atol=args.atol, rtol=args.rtol)
    if args.json:
        document = check.to_json()
        if per_engine is not None:
            document["per_engine"] = per_engine.to_json()
        print(json.dumps(document))
    else:
        print(check.summary(outputs=True))
        if per_engine is not None:
            print(per_engine)
    return 0 if check.validation.passed else EXIT_MISMATCH
