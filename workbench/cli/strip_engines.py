"""write a model TF-TRT (or the workbench) converted with every TRTEngineOp replaced by its
native segment: TensorFlow >= 2.18 and TF Serving load it without the workbench
"""

from __future__ import annotations

import argparse

from workbench.cli import options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="the SavedModel directory TF-TRT's (or the workbench's) "
                                      "save() wrote")
    options.add_output_argument(parser, "the new SavedModel's directory (new or empty)",
                                required=True, metavar="DIR")
    options.add_debug_argument(parser)


def run(args: argparse.Namespace) -> int:
    from workbench.engines.tftrt.strip import strip_engines

    print(strip_engines(args.model, args.output))
    return 0
