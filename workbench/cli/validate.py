"""run the converted model against native TensorFlow and compare outputs, Polygraphy's way
(exit 3 on a mismatch)
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from workbench.cli import options
from workbench.cli.options import EXIT_MISMATCH
from workbench.errors import WorkbenchError
from workbench.words import counted

if TYPE_CHECKING:
    from workbench.conversion.session import ConversionSession


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_model_arguments(parser)
    options.add_precision_argument(parser)
    parser.add_argument("--minimum-segment-size", type=int, default=3)
    parser.add_argument("--use-dynamic-shape", action="store_true")
    options.add_prepare_for_argument(parser)
    parser.add_argument("--profile-strategy", default=None)
    parser.add_argument("--inputs", default=None, metavar="FILE.npz",
                        help="arrays named by input, split into batches on the first axis "
                             "(default: generated inputs; see docs/engines.md)")
    parser.add_argument("--input-key", default=None,
                        help="the array of --inputs feeding a single-input model")
    parser.add_argument("--calibration-key", default=None,
                        help="INT8: the array of --inputs to calibrate with "
                             "(default: random inputs)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--batches", type=int, default=4, help="random batches")
    options.add_tolerance_arguments(parser)
    parser.add_argument("--check-error-stat", default=None,
                        help="elemwise, max, mean, median or quantile (default: elemwise; "
                             "mean for INT8)")
    parser.add_argument("--error-quantile", type=float, default=0.99)
    options.add_json_argument(parser)


def run(args: argparse.Namespace) -> int:
    from workbench.checks.validation import generated_inputs, validate
    from workbench.engines.runtime.converted_model import converted_model

    if args.batch_size < 1 or args.batches < 1:
        raise WorkbenchError("--batch-size and --batches must be >= 1")
    params = options.conversion_params(args)
    arrays = _npz(args.inputs) if args.inputs else {}
    session = options.open_session(args)
    model = converted_model(session, session.convert(params), params)
    if params.needs_calibration:
        calibration = _calibration_sets(args, session, arrays)
        model.calibrate(lambda: iter(calibration))
        if params.use_implicit_batch:  # TF-TRT's convert() built them for those shapes
            model.build(lambda: iter(calibration))
    inputs = (_batches(session, arrays, args.input_key, args.batch_size) if args.inputs
              else list(generated_inputs(session, args.batches, args.batch_size)))
    report = validate(model, session.loaded, inputs, atol=args.atol, rtol=args.rtol,
                      check_error_stat=args.check_error_stat, error_quantile=args.error_quantile)
    print(json.dumps(report.to_json()) if args.json else report)
    return 0 if report.passed else EXIT_MISMATCH


def _calibration_sets(args: argparse.Namespace, session: ConversionSession,
                      arrays: dict[str, Any]) -> list[dict[str, Any]]:
    """INT8's calibration batches: the --calibration-key array, else generated ones."""
    from workbench.checks.conversion_check import CALIBRATION_SEED
    from workbench.checks.validation import generated_inputs

    if args.calibration_key:
        # TF-TRT calibrates on one shape: a ragged last batch is left out.
        return _batches(session, arrays, args.calibration_key, args.batch_size, whole=True)
    return list(generated_inputs(session, args.batches, args.batch_size, seed=CALIBRATION_SEED))


def _npz(path: str) -> dict[str, Any]:
    import numpy as np

    try:
        with np.load(path) as npz:
            return dict(npz)
    except (OSError, ValueError) as exc:
        raise WorkbenchError(f"cannot read --inputs {path}: {exc}") from None


def _batches(session: ConversionSession, arrays: dict[str, Any], key: str | None, size: int,
             whole: bool = False) -> list[dict[str, Any]]:
    """Input sets of `size` rows (`whole`: full batches only): the array `key` for a
    single-input model, else one array per input name."""
    names = session.loaded.input_names
    if key is not None:
        if len(names) != 1 or key not in arrays:
            raise WorkbenchError(f"--input-key/--calibration-key {key!r} needs a single-input "
                                 f"model and an array of that name; inputs: {', '.join(names)}; "
                                 f"arrays: {', '.join(arrays)}")
        feeds = {names[0]: arrays[key]}
    else:
        missing = [n for n in names if n not in arrays]
        if missing:
            raise WorkbenchError(f"--inputs has no array for {counted(len(missing), 'input')} "
                                 f"({', '.join(missing)}) "
                                 f"(arrays: {', '.join(arrays)}); name them or use --input-key")
        feeds = {n: arrays[n] for n in names}
    rows = min(len(a) for a in feeds.values())
    stop = rows - rows % size if whole else rows
    return [{n: a[i:i + size] for n, a in feeds.items()} for i in range(0, stop, size)]
