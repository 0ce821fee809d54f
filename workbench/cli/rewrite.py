"""write the model with the verified rewrites that let TF-TRT convert more, as a SavedModel with
the same signature; checked against the original on generated inputs, with TF-TRT's engines
before and after
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from workbench.cli import options
from workbench.errors import WorkbenchError
from workbench.words import counted


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_model_arguments(parser)
    options.add_output_argument(parser, "the SavedModel directory to write (must not exist)",
                                required=True, metavar="DIR")
    parser.add_argument("--only", default=None, metavar="NAME,...",
                        help="the rewrites to apply, comma-separated (default: all of them: "
                             "erfc_as_erf, cast_before_broadcast, broadcast_to_dropped, "
                             "broadcast_to_as_select, cast_chain_fused, "
                             "bool_expand_dims_before_cast, cast_to_bool_as_comparison, "
                             "cast_from_bool_as_select, bool_fill_as_comparison, "
                             "band_part_as_select, leading_axes_dropped, new_axes_as_expand_dims, "
                             "split_as_slices)")
    parser.add_argument("--use-dynamic-shape", action="store_true",
                        help="count engines before/after in explicit batch mode")
    options.add_prepare_for_argument(parser)
    options.add_json_argument(parser)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from workbench.checks.rewritten import compare_rewritten
    from workbench.conversion.params import ConversionParams
    from workbench.conversion.rewrites import REWRITES, select
    from workbench.conversion.rewrites.model import save_rewritten
    from workbench.conversion.session import ConversionSession
    from workbench.graph.loading import load_model

    only = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    select(only)  # an unknown name fails before the slow load
    output = Path(args.output)
    if output.exists():
        raise WorkbenchError(f"{output} exists: give a new directory for the rewritten model")
    tags = options.split(args.tags)
    session = options.open_session(args)
    rewritten_session = session.rewritten(only)
    counts = rewritten_session.rewrite_counts
    if not counts:
        raise WorkbenchError(f"nothing to rewrite in {args.model}: none of the rewrites "
                             f"({', '.join(r.name for r in select(only))}) matches")
    save_rewritten(rewritten_session.loaded, output)
    saved = load_model(output, args.signature_key, tags)
    differences = compare_rewritten(session, saved)
    dynamic = args.use_dynamic_shape
    params = ConversionParams(use_dynamic_shape=dynamic,
                              dynamic_shape_profile_strategy="Range" if dynamic else None)
    before = session.convert(params)
    after = ConversionSession.open(output, prepare_for=args.prepare_for).convert(params)
    document = {
        "model": args.model, "output": str(output), "signature_key": saved.signature_key,
        "rewrites": [{**REWRITES[name].to_json(), "matches": count}
                     for name, count in counts.items()],
        "outputs_checked": [d.to_json() for d in differences],
        "checked_on": "2 generated input batches of 4 (seed 0)",
        "conversion": {"use_dynamic_shape": dynamic,
                       "before": _conversion(before), "after": _conversion(after)},
    }
    print(json.dumps(document, indent=2) if args.json else "\n".join(_lines(document)))
    return 0


def estimate_line(session: Any, params: Any, advice: list[Any], gpu: str,
                  batch_size: int) -> str | None:
    """`convert --target-gpu`'s line for the rewrites advice: the rewritten model's estimate on
    that GPU (None when the advice has no rewrites entry)."""
    if not any(entry.setting == "rewrites" for entry in advice):
        return None
    from workbench.profiling.estimate.conversion import conversion_estimate
    from workbench.profiling.estimate.conversion import estimate_line as line

    return "with the rewrites: " + line(conversion_estimate(session.rewritten(), params, gpu,
                                                            batch_size), label=False)


def _conversion(result: Any) -> dict[str, Any]:
    return {"engines": len(result.engines), "percent_converted": result.percent_converted,
            "native_nodes": result.not_converted_top_level}


def _lines(document: dict[str, Any]) -> list[str]:
    lines = [f"Wrote {document['output']} (signature {document['signature_key']!r}):"]
    lines += [f"  {r['name']}: {r['matches']} x {r['pattern']} -> {r['replacement']} "
              f"({r['bound']})" for r in document["rewrites"]]
    lines.append(f"Outputs beside the original's ({document['checked_on']}):")
    lines += [f"  {d['output']}: max abs error {d['max_abs_error']:.3g}, max relative error "
              f"{d['max_rel_error']:.3g}" for d in document["outputs_checked"]]
    conversion = document["conversion"]
    mode = "dynamic shape" if conversion["use_dynamic_shape"] else "implicit batch"
    before, after = conversion["before"], conversion["after"]
    lines.append(f"TF-TRT ({mode}): {counted(before['engines'], 'engine')}, "
                 f"{before['percent_converted']:.2f}% converted -> "
                 f"{counted(after['engines'], 'engine')}, {after['percent_converted']:.2f}% "
                 "converted")
    return lines
