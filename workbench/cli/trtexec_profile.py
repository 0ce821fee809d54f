"""print the per-layer timings of a trtexec --exportProfile file"""

from __future__ import annotations

import argparse
import sys

from workbench.cli import options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trtexec-profile", required=True, metavar="FILE",
                        help="trtexec --exportProfile JSON")
    parser.add_argument("--layer-info", default=None, metavar="FILE",
                        help="trtexec --exportLayerInfo JSON (layer type, precision, tactic)")
    options.add_json_argument(parser)
    options.add_debug_argument(parser)


def run(args: argparse.Namespace) -> int:
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
