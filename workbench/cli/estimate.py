"""estimate an engine's per-layer GPU latency on a named GPU from its trtexec --exportLayerInfo
file (no GPU needed)
"""

from __future__ import annotations

import argparse

from workbench.cli import options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trtexec-graph", required=True, metavar="FILE",
                        help="trtexec --exportLayerInfo JSON written with "
                             "--profilingVerbosity=detailed (batch as in its shapes)")
    parser.add_argument("--gpu", required=True, metavar="NAME",
                        help="the GPU: a short name (T4, A100, RTX 3090) or as trtexec "
                             "prints it ('NVIDIA A100 80GB PCIe')")
    options.add_json_argument(parser)
    options.add_debug_argument(parser)


def run(args: argparse.Namespace) -> int:
    import json

    from workbench.graph.gpu_facts import gpu_facts
    from workbench.profiling.estimate import estimate_engine, estimate_text
    from workbench.profiling.trtexec import read_trtexec_kernels

    gpu = gpu_facts(args.gpu)  # an unknown name fails before the file is read
    document = estimate_engine(read_trtexec_kernels(args.trtexec_graph), gpu)
    print(json.dumps(document) if args.json else estimate_text(document))
    return 0
