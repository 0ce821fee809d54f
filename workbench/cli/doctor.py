"""what this machine can run: TensorFlow, TF-TRT, TensorRT, GPUs, engine backends, Graphviz,
Chromium (exit 1 when the workbench cannot run)
"""

from __future__ import annotations

import argparse

from workbench.cli import options
from workbench.cli.options import EXIT_INTERNAL


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_json_argument(parser)
    options.add_debug_argument(parser)


def run(args: argparse.Namespace) -> int:
    import json

    from workbench.diagnosis import doctor

    diagnosis = doctor()
    print(json.dumps(diagnosis.to_dict()) if args.json else diagnosis)
    return 0 if diagnosis.can_run else EXIT_INTERNAL
