"""write the conversion for production: a TF-TRT script (TensorFlow <= 2.17), the whole model
as ONNX (checked against native TF) or trtexec commands for that ONNX
"""

from __future__ import annotations

import argparse

from workbench.cli import options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_model_arguments(parser)
    options.add_conversion_arguments(parser)
    parser.add_argument("--format", required=True, choices=("tftrt", "onnx", "trtexec"))
    options.add_output_argument(parser, "the file to write", required=True)
    options.add_batch_sizes_argument(parser, "the shapes build() and trtexec get, "
                                             "comma-separated (default: 1)")
    parser.add_argument("--onnx", default=None,
                        help="trtexec: the ONNX file the commands name (default: OUTPUT.onnx)")


def run(args: argparse.Namespace) -> int:
    from workbench.checks.export_formats import export
    from workbench.tuning.grid import parse_integers

    params = options.conversion_params(args)
    path = export(args.model, args.format, args.output, params,
                  batch_sizes=parse_integers("--batch-sizes", args.batch_sizes),
                  signature_key=args.signature_key, tags=options.split(args.tags),
                  output_node_names=options.split(args.outputs), onnx_path=args.onnx)
    print(f"wrote {path}")
    return 0
