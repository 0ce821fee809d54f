"""draw the segment graph by name scope, as the app's Segment graph tab does: groups collapsed
until opened (.svg, .dot or .png)
"""

from __future__ import annotations

import argparse

from workbench.cli import options
from workbench.errors import WorkbenchError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_model_arguments(parser)
    options.add_conversion_arguments(parser)
    parser.add_argument("--view", default="converted", choices=("converted", "full", "engine"),
                        help="TF-TRT's top level, every prepared node by engine, or one engine "
                             "(default: converted)")
    parser.add_argument("--engine", default="",
                        help="the engine to open (implies --view engine)")
    parser.add_argument("--open", default=None, metavar="SCOPE,...",
                        help="the groups to open (scope paths, as the tooltips and --list name "
                             "them); default: the first view, within about 60 boxes")
    parser.add_argument("--depth", type=int, default=None,
                        help="open every group this many levels down instead")
    parser.add_argument("--find", default="", metavar="TEXT",
                        help="open and highlight the nodes whose name or op type matches")
    parser.add_argument("--list", action="store_true",
                        help="print the groups (id, nodes, converted) instead of drawing")
    options.add_tensorrt_argument(parser, "write each engine's TensorRT kernels (or why TensorRT "
                                          "refused it) in its box (TensorRT-RTX's builder; no "
                                          "GPU needed)")
    parser.add_argument("--target-gpu", default=None, metavar="NAME",
                        help="write each engine's estimated time on this GPU in its box")
    options.add_target_batch_size_argument(parser)
    options.add_output_argument(parser, "FILE.svg, FILE.dot or FILE.png", default=None)


def run(args: argparse.Namespace) -> int:
    from workbench.viz.scope_graphs import drawing_format, write_scope_drawing

    params = options.conversion_params(args)
    if not args.list:  # before the slow model load
        if not args.output:
            raise WorkbenchError("say where to draw: -o FILE.svg, FILE.dot or FILE.png "
                                 "(or --list)")
        drawing_format(args.output)
    options.require_tensorrt(args)  # before the slow model load, as `convert` does
    options.check_target_gpu(args)
    session = options.open_session(args)
    result = session.convert(params)
    graph = session.prepared(params.precision_mode).graph
    if args.list:
        from workbench.viz.hierarchy import ScopeTree

        for line in ScopeTree.build(graph, result).outline():
            print(line)
        return 0
    from workbench.viz.overlays import engine_overlays

    tensorrt = options.tensorrt_verdicts(session, result, params) if args.tensorrt else None
    overlays = engine_overlays(
        tensorrt, options.gpu_estimate(session, result, params, args, tensorrt) if args.target_gpu
        else None)
    drawing = write_scope_drawing(
        graph, result, args.output, view="engine" if args.engine else args.view,
        engine=args.engine, open_groups=options.split(args.open), depth=args.depth,
        search=args.find, overlays=overlays)
    print(f"wrote {args.output} ({drawing.boxes} boxes, {len(drawing.highlight)} highlighted)")
    return 0
