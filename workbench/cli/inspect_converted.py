"""read a model TF-TRT already converted: its summary and saved engines"""

from __future__ import annotations

import argparse

from workbench.cli import options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="the SavedModel directory TF-TRT's save() wrote")
    parser.add_argument("--signature-key", default="serving_default",
                        help="default: serving_default")
    options.add_json_argument(parser)
    parser.add_argument("--export-engines", default=None, metavar="DIR",
                        help="write each saved engine's TensorRT plan as <engine>.<n>.plan")
    options.add_debug_argument(parser)


def run(args: argparse.Namespace) -> int:
    import json

    from workbench.engines.tftrt.saved_model import inspect_tftrt

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
