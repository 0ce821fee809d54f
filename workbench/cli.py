"""`workbench` command line: the same work as the Python API, headless.

Errors are one line on stderr and a non-zero exit code; `--debug` shows the traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from workbench import cli_rewrite, environment
from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    from workbench.conversion.params import ConversionParams
    from workbench.conversion.session import ConversionSession

EXIT_USAGE = 2
EXIT_INTERNAL = 1
EXIT_MISMATCH = 3  # validate: outputs differ beyond the tolerances


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    _quiet_tensorflow(getattr(args, "debug", False))
    try:
        return args.run(args)
    except WorkbenchError as exc:
        return _fail(args, f"error: {exc}", EXIT_USAGE)
    except KeyboardInterrupt:
        return _fail(args, "interrupted", 130)
    except Exception as exc:  # anything else is our bug: say so in one line
        first = (str(exc).strip().splitlines() or [""])[0]
        return _fail(args, f"internal error: {type(exc).__name__}: {first} "
                           "(rerun with --debug for the traceback)", EXIT_INTERNAL)


def _fail(args: argparse.Namespace, message: str, code: int) -> int:
    if getattr(args, "debug", False):
        import traceback

        traceback.print_exc()
    print(f"workbench: {message}", file=sys.stderr)
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="workbench", description="Explore and tune TF-TRT conversions without a GPU."
    )
    commands = parser.add_subparsers(dest="command")
    convert = commands.add_parser(
        "convert", help="segment a model as TF-TRT would; print its summary and report"
    )
    _add_model_arguments(convert)
    _add_conversion_arguments(convert)
    convert.add_argument("--json", action="store_true",
                         help="print exactly one JSON document on stdout")
    convert.add_argument("--detailed", action="store_true",
                         help="show the reasons per op (like TF_TRT_SHOW_DETAILED_REPORT=1)")
    convert.add_argument("--tensorrt", action="store_true",
                         help="add TensorRT's verdict on every engine (TensorRT-RTX's parser "
                              "and builder; no GPU needed)")
    _add_target_gpu_argument(convert, "per engine")
    convert.add_argument("--target-batch-size", type=int, default=1, metavar="N",
                         help="with --target-gpu: the batch size estimated (default: 1)")
    convert.set_defaults(run=_run_convert)
    report = commands.add_parser(
        "report", help="write the workbench's view of a conversion as one offline HTML page"
    )
    _add_model_arguments(report)
    _add_conversion_arguments(report)
    report.add_argument("-o", "--output", default="report.html",
                        help="the HTML file to write (default: report.html)")
    report.add_argument("--check", action="store_true",
                        help="also build the engines, validate and time them (workbench check)")
    report.add_argument("--tensorrt", action="store_true",
                        help="add TensorRT's verdict on every engine (TensorRT-RTX's builder)")
    report.add_argument("--per-engine", action="store_true",
                        help="also rank the engines by error, with measured remedies")
    report.add_argument("--batch-sizes", default="1",
                        help="with --check: comma-separated (default: 1)")
    _add_target_gpu_argument(report, "at each of --batch-sizes, and the "
                                     "minimum_segment_size sweep")
    report.add_argument("--tune-store", metavar="DIR",
                        help="add a Tuning section: the trials `workbench tune --store DIR` "
                             "stored for this model")
    report.set_defaults(run=_run_report)
    _add_profile_command(commands)
    _add_estimate_command(commands)
    _add_validate_command(commands)
    _add_check_command(commands)
    _add_inspect_command(commands)
    _add_strip_command(commands)
    _add_tune_command(commands)
    _add_export_command(commands)
    _add_graph_command(commands)
    rewrite = commands.add_parser("rewrite", help=cli_rewrite.HELP)
    cli_rewrite.add_arguments(rewrite), rewrite.set_defaults(run=cli_rewrite.run)
    doctor = commands.add_parser(
        "doctor", help="what this machine can run: TensorFlow, TF-TRT, TensorRT, GPUs, engine "
                       f"backends, Graphviz, Chromium (exit {EXIT_INTERNAL} when the workbench "
                       "cannot run)")
    doctor.add_argument("--json", action="store_true",
                        help="print exactly one JSON document on stdout")
    doctor.add_argument("--debug", action="store_true", help="show tracebacks")
    doctor.set_defaults(run=_run_doctor)
    return parser


def _add_target_gpu_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--target-gpu", default=None, metavar="NAME",
                        help="add the latency estimated for this GPU (T4, A100, 'NVIDIA A100 "
                             f"80GB PCIe', ...): converted vs native TF, {what}; labelled "
                             "estimated, with the model's measured error")


def _add_tolerance_arguments(parser: argparse.ArgumentParser) -> None:
    for name in ("atol", "rtol"):
        parser.add_argument(f"--{name}", type=float, default=None,
                            help="default per precision: FP32 1e-5, FP16 1e-2, INT8 1e-1")


def _add_check_command(commands: argparse._SubParsersAction) -> None:
    check = commands.add_parser(
        "check", help="build the engines, compare with native TF on generated inputs and time "
                      f"both per batch size: the Validation tab (exit {EXIT_MISMATCH} on a "
                      "mismatch)")
    _add_model_arguments(check)
    _add_conversion_arguments(check)
    check.add_argument("--batch-sizes", default="1", help="comma-separated (default: 1)")
    check.add_argument("--batches", type=int, default=2, help="generated batches to compare")
    check.add_argument("--iterations", type=int, default=20, help="timed calls per figure")
    _add_tolerance_arguments(check)
    check.add_argument("--whole-model", action="store_true",
                       help="also time the whole model as one engine on the backend")
    check.add_argument("--per-engine", action="store_true",
                       help="also rank the engines by the error each adds to the outputs, "
                            "with the measured effect of remedies for the worst")
    _add_target_gpu_argument(check, "at each of --batch-sizes, beside the measured figures")
    check.add_argument("--json", action="store_true",
                       help="print exactly one JSON document on stdout")
    check.set_defaults(run=_run_check)


def _add_export_command(commands: argparse._SubParsersAction) -> None:
    export = commands.add_parser(
        "export", help="write the conversion for production: a TF-TRT script (TensorFlow "
                       "<= 2.17), the whole model as ONNX (checked against native TF) or "
                       "trtexec commands for that ONNX")
    _add_model_arguments(export)
    _add_conversion_arguments(export)
    export.add_argument("--format", required=True, choices=("tftrt", "onnx", "trtexec"))
    export.add_argument("-o", "--output", required=True, help="the file to write")
    export.add_argument("--batch-sizes", default="1",
                        help="the shapes build() and trtexec get, comma-separated (default: 1)")
    export.add_argument("--onnx", default=None,
                        help="trtexec: the ONNX file the commands name (default: OUTPUT.onnx)")
    export.set_defaults(run=_run_export)


def _run_export(args: argparse.Namespace) -> int:
    from workbench.checks.export import export

    params = _conversion_params(args)
    path = export(args.model, args.format, args.output, params,
                  batch_sizes=_integers("--batch-sizes", args.batch_sizes),
                  signature_key=args.signature_key, tags=_split(args.tags),
                  output_node_names=_split(args.outputs), onnx_path=args.onnx)
    print(f"wrote {path}")
    return 0


def _add_graph_command(commands: argparse._SubParsersAction) -> None:
    graph = commands.add_parser(
        "graph", help="draw the segment graph by name scope, as the app's Segment graph tab "
                      "does: groups collapsed until opened (.svg, .dot or .png)")
    _add_model_arguments(graph)
    _add_conversion_arguments(graph)
    graph.add_argument("--view", default="converted", choices=("converted", "full", "engine"),
                       help="TF-TRT's top level, every prepared node by engine, or one engine "
                            "(default: converted)")
    graph.add_argument("--engine", default="",
                       help="the engine to open (implies --view engine)")
    graph.add_argument("--open", default=None, metavar="SCOPE,...",
                       help="the groups to open (scope paths, as the tooltips and --list name "
                            "them); default: the first view, within about 60 boxes")
    graph.add_argument("--depth", type=int, default=None,
                       help="open every group this many levels down instead")
    graph.add_argument("--find", default="", metavar="TEXT",
                       help="open and highlight the nodes whose name or op type matches")
    graph.add_argument("--list", action="store_true",
                       help="print the groups (id, nodes, converted) instead of drawing")
    graph.add_argument("--tensorrt", action="store_true",
                       help="write each engine's TensorRT kernels (or why TensorRT refused it) "
                            "in its box (TensorRT-RTX's builder; no GPU needed)")
    graph.add_argument("--target-gpu", default=None, metavar="NAME",
                       help="write each engine's estimated time on this GPU in its box")
    graph.add_argument("--target-batch-size", type=int, default=1, metavar="N",
                       help="with --target-gpu: the batch size estimated (default: 1)")
    graph.add_argument("-o", "--output", default=None, help="FILE.svg, FILE.dot or FILE.png")
    graph.set_defaults(run=_run_graph)


def _run_graph(args: argparse.Namespace) -> int:
    from workbench.viz.scope_graphs import drawing_format, write_scope_drawing

    params = _conversion_params(args)
    if not args.list:  # before the slow model load
        if not args.output:
            raise WorkbenchError("say where to draw: -o FILE.svg, FILE.dot or FILE.png "
                                 "(or --list)")
        drawing_format(args.output)
    if args.tensorrt:  # before the slow model load, as `convert` does
        from workbench.engines.inspection.tensorrt_verdict import require_tensorrt

        require_tensorrt()
    _check_target_gpu(args)
    session = _open_session(args)
    result = session.convert(params)
    graph = session.prepared(params.precision_mode).graph
    if args.list:
        from workbench.viz.hierarchy import ScopeTree

        for line in ScopeTree.build(graph, result).outline():
            print(line)
        return 0
    from workbench.viz.overlays import engine_overlays

    tensorrt = _tensorrt_verdicts(session, result, params) if args.tensorrt else None
    overlays = engine_overlays(
        tensorrt, _gpu_estimate(session, result, params, args, tensorrt) if args.target_gpu
        else None)
    drawing = write_scope_drawing(
        graph, result, args.output, view="engine" if args.engine else args.view,
        engine=args.engine,
        open_groups=_split(args.open), depth=args.depth, search=args.find, overlays=overlays)
    print(f"wrote {args.output} ({drawing.boxes} boxes, {len(drawing.highlight)} highlighted)")
    return 0


def _add_tune_command(commands: argparse._SubParsersAction) -> None:
    tune = commands.add_parser(
        "tune", help="try a grid of conversion settings (convert, build, validate, time), one "
                     "trial per point on Dask workers; print the table, the Pareto set and a "
                     "recommendation")
    _add_model_arguments(tune)
    tune.add_argument("--precision", default=None, help="comma-separated, e.g. FP32,FP16,INT8")
    tune.add_argument("--minimum-segment-size", default=None, help="comma-separated, e.g. 2,3,5")
    tune.add_argument("--use-dynamic-shape", default=None,
                      help="off, on or off,on (default: off; on when --profile-strategy is given)")
    tune.add_argument("--profile-strategy", default=None,
                      help="comma-separated, e.g. Range,Optimal")
    tune.add_argument("--denylist", action="append", default=None, metavar="OP,OP",
                      help="one denylist per use (repeat to try several; '' for none)")
    tune.add_argument("--max-engines", default=None, help="comma-separated engine limits")
    tune.add_argument("--batch-sizes", default="1", help="comma-separated (default: 1)")
    where = tune.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=None,
                       help="local Dask worker processes (default: 1)")
    where.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="run on an existing Dask cluster, e.g. tcp://host:8786")
    tune.add_argument("--store", default=None, metavar="DIR",
                      help="where trials are kept and resumed from (default: ./workbench_runs)")
    tune.add_argument("--timeout", type=float, default=None, metavar="S",
                      help="seconds a trial may take on its worker before it is given up")
    tune.add_argument("--tensorrt", action="store_true",
                      help="add TensorRT's verdict to every trial (engines TensorRT-RTX builds)")
    _add_target_gpu_argument(tune, "per trial at the first of --batch-sizes; the Pareto "
                                   "set and the recommendation then rank by the estimate")
    tune.add_argument("--no-validate", action="store_true",
                      help="do not compare outputs with native TensorFlow")
    tune.add_argument("--retry-failed", action="store_true",
                      help="run stored failed and timed-out trials again")
    tune.add_argument("--json", action="store_true",
                      help="print exactly one JSON document on stdout")
    tune.set_defaults(run=_run_tune)


def _add_inspect_command(commands: argparse._SubParsersAction) -> None:
    inspect = commands.add_parser(
        "inspect", help="read a model TF-TRT already converted: its summary and saved engines")
    inspect.add_argument("model", help="the SavedModel directory TF-TRT's save() wrote")
    inspect.add_argument("--signature-key", default="serving_default",
                         help="default: serving_default")
    inspect.add_argument("--json", action="store_true",
                         help="print exactly one JSON document on stdout")
    inspect.add_argument("--export-engines", default=None, metavar="DIR",
                         help="write each saved engine's TensorRT plan as <engine>.<n>.plan")
    inspect.add_argument("--debug", action="store_true", help="show tracebacks")
    inspect.set_defaults(run=_run_inspect)


def _add_profile_command(commands: argparse._SubParsersAction) -> None:
    profile = commands.add_parser(
        "profile", help="print the per-layer timings of a trtexec --exportProfile file"
    )
    profile.add_argument("--trtexec-profile", required=True, metavar="FILE",
                         help="trtexec --exportProfile JSON")
    profile.add_argument("--layer-info", default=None, metavar="FILE",
                         help="trtexec --exportLayerInfo JSON (layer type, precision, tactic)")
    profile.add_argument("--json", action="store_true",
                         help="print exactly one JSON document on stdout")
    profile.add_argument("--debug", action="store_true", help="show tracebacks")
    profile.set_defaults(run=_run_profile)


def _add_estimate_command(commands: argparse._SubParsersAction) -> None:
    estimate = commands.add_parser(
        "estimate", help="estimate an engine's per-layer GPU latency on a named GPU from its "
                         "trtexec --exportLayerInfo file (no GPU needed)")
    estimate.add_argument("--trtexec-graph", required=True, metavar="FILE",
                          help="trtexec --exportLayerInfo JSON written with "
                               "--profilingVerbosity=detailed (batch as in its shapes)")
    estimate.add_argument("--gpu", required=True, metavar="NAME",
                          help="the GPU: a short name (T4, A100, RTX 3090) or as trtexec "
                               "prints it ('NVIDIA A100 80GB PCIe')")
    estimate.add_argument("--json", action="store_true",
                          help="print exactly one JSON document on stdout")
    estimate.add_argument("--debug", action="store_true", help="show tracebacks")
    estimate.set_defaults(run=_run_estimate)


def _run_estimate(args: argparse.Namespace) -> int:
    import json

    from workbench.graph.gpu_facts import gpu_facts
    from workbench.profiling.estimate import estimate_engine, estimate_text
    from workbench.profiling.trtexec import read_trtexec_kernels

    gpu = gpu_facts(args.gpu)  # an unknown name fails before the file is read
    document = estimate_engine(read_trtexec_kernels(args.trtexec_graph), gpu)
    print(json.dumps(document) if args.json else estimate_text(document))
    return 0


def _add_validate_command(commands: argparse._SubParsersAction) -> None:
    validate = commands.add_parser(
        "validate", help="run the converted model against native TensorFlow and compare "
                         f"outputs, Polygraphy's way (exit {EXIT_MISMATCH} on a mismatch)")
    _add_model_arguments(validate)
    validate.add_argument("--precision", default="FP32", help="FP32, FP16 or INT8")
    validate.add_argument("--minimum-segment-size", type=int, default=3)
    validate.add_argument("--use-dynamic-shape", action="store_true")
    _add_prepare_for_argument(validate)
    validate.add_argument("--profile-strategy", default=None)
    validate.add_argument("--inputs", default=None, metavar="FILE.npz",
                          help="arrays named by input, split into batches on the first axis "
                               "(default: generated inputs; see docs/engines.md)")
    validate.add_argument("--input-key", default=None,
                          help="the array of --inputs feeding a single-input model")
    validate.add_argument("--calibration-key", default=None,
                          help="INT8: the array of --inputs to calibrate with "
                               "(default: random inputs)")
    validate.add_argument("--batch-size", type=int, default=32)
    validate.add_argument("--batches", type=int, default=4, help="random batches")
    _add_tolerance_arguments(validate)
    validate.add_argument("--check-error-stat", default=None,
                          help="elemwise, max, mean, median or quantile (default: elemwise; "
                               "mean for INT8)")
    validate.add_argument("--error-quantile", type=float, default=0.99)
    validate.add_argument("--json", action="store_true",
                          help="print exactly one JSON document on stdout")
    validate.set_defaults(run=_run_validate)


def _add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="SavedModel directory, .keras file or frozen .pb")
    parser.add_argument("--signature-key", default=None, help="default: serving_default")
    parser.add_argument("--tags", default=None, help="comma-separated, default: serve")
    parser.add_argument("--outputs", default=None,
                        help="output node names of a frozen .pb, comma-separated")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")


def _add_conversion_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--precision", default="FP32", help="FP32, FP16 or INT8")
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
    _add_prepare_for_argument(parser)


def _add_prepare_for_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prepare-for", default=None, metavar="GPU|cpu",
                        help="the device TF-TRT's Grappler run saw: a GPU (T4, V100, A100, "
                             "'RTX 3090', ...) or compute capability (7.5, sm_75), or cpu "
                             "(default: T4)")


def _conversion_params(args: argparse.Namespace) -> ConversionParams:
    from workbench.conversion.params import params_from_environment

    return params_from_environment(
        precision_mode=args.precision,
        minimum_segment_size=args.minimum_segment_size,
        use_dynamic_shape=args.use_dynamic_shape,
        dynamic_shape_profile_strategy=args.profile_strategy,
        denylist=_split(args.denylist),
        max_engines=args.max_engines,
    )


def _open_session(args: argparse.Namespace) -> ConversionSession:
    from workbench.conversion.session import ConversionSession

    return ConversionSession.open(
        args.model, args.signature_key, _split(args.tags), _split(args.outputs),
        prepare_for=args.prepare_for,
    )


def _run_convert(args: argparse.Namespace) -> int:
    import json

    from workbench.conversion.advice import advice_lines, advise
    from workbench.conversion.report import (
        ConversionReport,
        detailed_report_setting,
        nonconversion_report,
        write_nonconversion_csv,
    )
    from workbench.conversion.summary import summary_lines

    params = _conversion_params(args)
    if args.tensorrt:  # before any work: without the builder, say how to install it
        from workbench.engines.inspection.tensorrt_verdict import require_tensorrt

        require_tensorrt()
    if args.target_batch_size < 1:
        raise WorkbenchError(f"--target-batch-size must be 1 or more, not {args.target_batch_size}")
    _check_target_gpu(args)
    session = _open_session(args)
    result = session.convert(params)
    advice = advise(session, params)
    tensorrt = _tensorrt_verdicts(session, result, params) if args.tensorrt else None
    estimate = _gpu_estimate(session, result, params, args, tensorrt) if args.target_gpu \
        else None
    if args.json:
        report = ConversionReport(result, advice, tensorrt=tensorrt)
        print(report.to_json() if estimate is None
              else json.dumps(_with_estimate(report.to_dict(), estimate), indent=2))
        return 0
    for line in summary_lines(result):
        print(line)
    if estimate is not None:
        from workbench.profiling.conversion_estimate import (
            estimate_line,
            sweep_advice,
            sweep_estimate,
        )

        print(estimate_line(estimate))
        rewritten_line = cli_rewrite.estimate_line(session, params, advice, args.target_gpu,
                                                   args.target_batch_size)
        print(rewritten_line) if rewritten_line else None
        sweep = sweep_estimate(session, params, session.sweep(params), args.target_gpu,
                               args.target_batch_size)
        advice_line = sweep_advice(sweep, params.validated().minimum_segment_size)
        if advice_line:
            print(advice_line)
    for name, verdict in (tensorrt or {}).items():
        outcome = (f"built, {verdict['plan_bytes']} bytes, {verdict['layers']} layers, "
                   f"{verdict['build_s']} s") if verdict["built"] else verdict["error"]
        print(f"{verdict['builder']} {name}: {outcome}")
    if result.nonconversion:
        setting = environment.SHOW_DETAILED_REPORT.read() or None
        detailed, csv_path = detailed_report_setting(setting)
        print(nonconversion_report(result.nonconversion, detailed or args.detailed))
        if csv_path:
            error = write_nonconversion_csv(result.nonconversion, csv_path)
            print(error or f"TF-TRT Non-Conversion Report saved at: `{csv_path}`",
                  file=sys.stderr)
    print("\n".join(advice_lines(advice)))
    return 0


def _gpu_estimate(session: ConversionSession, result: Any, params: ConversionParams,
                  args: argparse.Namespace, tensorrt: dict[str, dict] | None = None) -> dict:
    """The estimate for --target-gpu: engines TensorRT built (--tensorrt) from their kernels."""
    from workbench.profiling.conversion_estimate import conversion_estimate

    return conversion_estimate(session, params, args.target_gpu, args.target_batch_size, result,
                               tensorrt=tensorrt)


def _check_target_gpu(args: argparse.Namespace) -> None:
    """An unknown --target-gpu fails before the slow model load, listing the known ones."""
    if args.target_gpu:
        from workbench.profiling.conversion_estimate import target_gpu_name

        target_gpu_name(args.target_gpu)


def _with_estimate(document: dict, estimate: dict) -> dict:
    """The convert document with each engine's estimated time (inside its TensorRT verdict
    when there is one, with what it was estimated from) and the model's estimate at the top."""
    basis = estimate.get("engine_basis", {})
    for engine in document["engines"]:
        target = engine["tensorrt"] if "tensorrt" in engine else engine
        target["estimated_ms"] = estimate["engines"].get(engine["name"])
        target["estimated_from"] = basis.get(engine["name"])
    document["estimate"] = {key: value for key, value in estimate.items()
                            if key not in ("engines", "engine_basis")}
    return document


def _tensorrt_verdicts(session: ConversionSession, result: Any, params: ConversionParams
                       ) -> dict[str, dict]:
    """engine -> TensorRT's verdict (the JSON object) on generated inputs."""
    from workbench.engines.runtime.converted_model import converted_model
    from workbench.trt_convert import conversion_verdicts

    converted = converted_model(session, result, params)
    verdicts = conversion_verdicts(session, converted)
    return {name: verdict.to_json() for name, verdict in verdicts.items()}


def _run_report(args: argparse.Namespace) -> int:
    from workbench.checks.conversion_check import (
        check_conversion,
        parse_batch_sizes,
        print_progress,
    )
    from workbench.viz.html_report import check_report_path, write_html_report

    # Bad parameters or output paths fail before the slow model load.
    params = _conversion_params(args)
    check_report_path(args.output)
    sizes = parse_batch_sizes(args.batch_sizes)
    _check_target_gpu(args)
    tuning = _stored_tuning(args) if args.tune_store else None
    if args.tensorrt:
        from workbench.engines.inspection.tensorrt_verdict import require_tensorrt

        require_tensorrt()
    session = _open_session(args)
    check = check_conversion(session, params, print_progress, batch_sizes=sizes) \
        if args.check else None
    tensorrt = _tensorrt_verdicts(session, session.convert(params), params) \
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
    from workbench.tuning.result import TuneResult
    from workbench.tuning.store import TrialStore

    tags = _split(args.tags)
    store = TrialStore(args.tune_store, model_fingerprint(args.model, args.signature_key, tags))
    trials = list(store.load().values())
    if not trials:
        raise WorkbenchError(f"no tuning trials of {args.model} in {args.tune_store}: run "
                             f"`workbench tune {args.model} --store {args.tune_store}` first")
    return TuneResult(trials, model=args.model, store=store.directory, problems=store.problems)


def _run_profile(args: argparse.Namespace) -> int:
    import json
    import warnings

    from workbench.profiling.layers import table_document, table_text
    from workbench.profiling.trtexec import read_trtexec, sibling_metadata

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = read_trtexec(args.trtexec_profile, args.layer_info,
                             profile_metadata=sibling_metadata(args.trtexec_profile))
    for warning in caught:  # e.g. layer info from another engine: say so, keep going
        print(f"workbench: warning: {warning.message}", file=sys.stderr)
    print(json.dumps(table_document(table)) if args.json else table_text(table))
    return 0


def _run_validate(args: argparse.Namespace) -> int:
    import json

    from workbench import trt_convert
    from workbench.checks.validate import generated_inputs, validate

    if args.batch_size < 1 or args.batches < 1:
        raise WorkbenchError("--batch-size and --batches must be >= 1")
    converter = trt_convert.TrtGraphConverterV2(
        input_model=args.model, input_saved_model_tags=_split(args.tags),
        input_saved_model_signature_key=args.signature_key, output_node_names=_split(args.outputs),
        precision_mode=args.precision, minimum_segment_size=args.minimum_segment_size,
        use_dynamic_shape=args.use_dynamic_shape,
        dynamic_shape_profile_strategy=args.profile_strategy, prepare_for=args.prepare_for)
    arrays = _npz(args.inputs) if args.inputs else {}

    def calibration() -> Any:
        if args.calibration_key:
            # TF-TRT calibrates on one shape: a ragged last batch is left out.
            return _batches(converter, arrays, args.calibration_key, args.batch_size,
                            whole=True)
        return generated_inputs(converter.session, args.batches, args.batch_size, seed=1000)

    func = converter.convert(calibration if converter.params.needs_calibration else None)
    inputs = (_batches(converter, arrays, args.input_key, args.batch_size) if args.inputs
              else list(generated_inputs(converter.session, args.batches, args.batch_size)))
    report = validate(func, converter.session.loaded, inputs, atol=args.atol, rtol=args.rtol,
                      check_error_stat=args.check_error_stat, error_quantile=args.error_quantile)
    if args.json:
        table = report.table()
        print(json.dumps({"passed": report.passed, "backend": report.backend,
                          "device": report.device, "precision": report.precision,
                          "batches": report.batches, "native_runs": report.native_runs,
                          "tolerances": report.tolerances,
                          "outputs": json.loads(table.to_json(orient="records"))}))
    else:
        print(report)
    return 0 if report.passed else EXIT_MISMATCH


def _add_strip_command(commands: argparse._SubParsersAction) -> None:
    strip = commands.add_parser(
        "strip-engines", help="write a model TF-TRT (or the workbench) converted with every "
                              "TRTEngineOp replaced by its native segment: TensorFlow >= 2.18 "
                              "and TF Serving load it without the workbench")
    strip.add_argument("model", help="the SavedModel directory TF-TRT's (or the workbench's) "
                                     "save() wrote")
    strip.add_argument("-o", "--output", required=True, metavar="DIR",
                       help="the new SavedModel's directory (new or empty)")
    strip.add_argument("--debug", action="store_true", help="show tracebacks")
    strip.set_defaults(run=_run_strip)


def _run_strip(args: argparse.Namespace) -> int:
    from workbench.engines.backends.tftrt_strip import strip_engines

    print(strip_engines(args.model, args.output))
    return 0


def _run_inspect(args: argparse.Namespace) -> int:
    import json

    from workbench.engines.backends.tftrt_graph import inspect_tftrt

    model = inspect_tftrt(args.model, args.signature_key)
    exported = None
    if args.export_engines:
        exported = model.export_engines(args.export_engines)
    if args.json:
        document = model.to_dict()
        if exported is not None:
            document["exported"] = json.loads(exported.to_json(orient="records"))
        print(json.dumps(document))
        return 0
    model.summary()
    for row in [] if exported is None else exported.itertuples():
        print(f"wrote {row.file} ({row.bytes} bytes; input shapes {row.input_shapes})")
    if exported is not None and exported.empty:
        print("no saved engines to export (TF-TRT builds them at run time)")
    return 0


def _run_doctor(args: argparse.Namespace) -> int:
    import json

    from workbench.diagnosis import doctor

    diagnosis = doctor()
    print(json.dumps(diagnosis.to_dict()) if args.json else diagnosis)
    return 0 if diagnosis.can_run else EXIT_INTERNAL


def _run_check(args: argparse.Namespace) -> int:
    import json

    from workbench.checks.conversion_check import (
        check_conversion,
        parse_batch_sizes,
        print_progress,
    )

    params = _conversion_params(args)
    sizes = parse_batch_sizes(args.batch_sizes)
    _check_target_gpu(args)
    session = _open_session(args)
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
        document = {"passed": check.validation.passed, "params": check.params.as_dict(),
                    "tolerances": check.validation.tolerances,
                    "engines": check.engines, "metrics": check.metrics(),
                    "notes": list(check.notes),
                    "latency": json.loads(check.latency.to_json(orient="records"))}
        if check.estimates:  # per batch size, apart from the measured latency
            document["estimates"] = [{k: v for k, v in e.items()
                                      if k not in ("engines", "engine_basis")}
                                     for e in check.estimates]
        if per_engine is not None:
            document["per_engine"] = per_engine.to_json()
        print(json.dumps(document))
    else:
        print(check.summary(outputs=True))
        if per_engine is not None:
            print(per_engine)
    return 0 if check.validation.passed else EXIT_MISMATCH


def _run_tune(args: argparse.Namespace) -> int:
    import json

    from workbench.checks.conversion_check import parse_batch_sizes
    from workbench.tuning import tune
    from workbench.tuning.result import ESTIMATE_COLUMNS

    result = tune(args.model, _tune_grid(args), batch_sizes=parse_batch_sizes(args.batch_sizes),
                  workers=args.workers, scheduler=args.scheduler, store=args.store,
                  timeout=args.timeout, validate=not args.no_validate,
                  signature_key=args.signature_key, tags=_split(args.tags),
                  retry_failed=args.retry_failed, tensorrt=args.tensorrt,
                  target_gpu=args.target_gpu)
    for problem in result.problems:
        print(f"workbench: warning: {problem}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_json(), default=str))
        return 0
    import pandas as pd

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
    return 0


TUNE_COLUMNS = ("trial_id", "precision_mode", "minimum_segment_size", "use_dynamic_shape",
                "dynamic_shape_profile_strategy", "denylist", "max_engines", "status",
                "percent_converted", "engines", "latency_ms", "speedup", "max_abs_error",
                "top1_agreement", "worker")


def _tune_grid(args: argparse.Namespace) -> dict[str, list[Any]]:
    """The grid the options ask for; options not given take TF-TRT's defaults."""
    grid: dict[str, list[Any]] = {}
    if args.precision:
        grid["precision_mode"] = list(_split(args.precision) or ())
    if args.minimum_segment_size:
        grid["minimum_segment_size"] = _integers("--minimum-segment-size",
                                                 args.minimum_segment_size)
    if args.max_engines:
        grid["max_engines"] = _integers("--max-engines", args.max_engines)
    if args.profile_strategy:
        grid["dynamic_shape_profile_strategy"] = list(_split(args.profile_strategy) or ())
    dynamic = args.use_dynamic_shape or ("on" if args.profile_strategy else None)
    if dynamic:
        grid["use_dynamic_shape"] = [_switch(v) for v in _split(dynamic) or ()]
    if args.denylist is not None:
        grid["denylist"] = [list(_split(d) or ()) for d in args.denylist]
    return grid


def _integers(option: str, text: str) -> list[int]:
    try:
        return [int(v) for v in _split(text) or ()]
    except ValueError:
        raise WorkbenchError(f"{option} takes whole numbers separated by commas, "
                             f"got {text!r}") from None


def _switch(text: str) -> bool:
    value = {"on": True, "true": True, "1": True, "yes": True,
             "off": False, "false": False, "0": False, "no": False}.get(text.lower())
    if value is None:
        raise WorkbenchError(f"--use-dynamic-shape takes off, on or off,on; got {text!r}")
    return value


def _npz(path: str) -> dict[str, Any]:
    import numpy as np

    try:
        with np.load(path) as npz:
            return dict(npz)
    except (OSError, ValueError) as exc:
        raise WorkbenchError(f"cannot read --inputs {path}: {exc}") from None


def _batches(converter: Any, arrays: dict[str, Any], key: str | None, size: int,
             whole: bool = False) -> list[dict[str, Any]]:
    """Input sets of `size` rows (`whole`: full batches only): the array `key` for a
    single-input model, else one array per input name."""
    names = converter.session.loaded.input_names
    if key is not None:
        if len(names) != 1 or key not in arrays:
            raise WorkbenchError(f"--input-key/--calibration-key {key!r} needs a single-input "
                                 f"model and an array of that name; inputs: {', '.join(names)}; "
                                 f"arrays: {', '.join(arrays)}")
        feeds = {names[0]: arrays[key]}
    else:
        missing = [n for n in names if n not in arrays]
        if missing:
            raise WorkbenchError(f"--inputs has no array for input(s) {', '.join(missing)} "
                                 f"(arrays: {', '.join(arrays)}); name them or use --input-key")
        feeds = {n: arrays[n] for n in names}
    rows = min(len(a) for a in feeds.values())
    stop = rows - rows % size if whole else rows
    return [{n: a[i:i + size] for n, a in feeds.items()} for i in range(0, stop, size)]


def _split(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _quiet_tensorflow(debug: bool) -> None:
    """TensorFlow's chatter would bury the report (and break --json consumers): stderr is ours
    alone on any CPU, unless --debug, which keeps everything."""
    from workbench import quiet

    if debug:
        quiet.install(level=0)  # nothing filtered; TensorFlow's settings still applied
        return
    quiet.only_fatal_lines()


if __name__ == "__main__":
    sys.exit(main())
