"""Draws the Concepts pages' diagrams into docs/images/concepts/ with the workbench itself, from
the sample models: `make docs-diagrams`, or `python tools/draw_concept_diagrams.py [FILE...]`.

Most are `workbench graph` commands, run as written in the pages' captions; the kernels of an
engine and the engines coloured by their error come from the Python API the captions name; the
estimate page's diagrams of ideas are Graphviz sources in tools/diagrams/.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "images" / "concepts"

# File: the `workbench graph` command that draws it (model first, relative to the repository).
GRAPH_COMMANDS = {
    "segments-detector.svg": "sample_models/build/detector --view full",
    "segments-detector-mss20.svg":
        "sample_models/build/detector --view full --minimum-segment-size 20",
    "shapes-tiny-bert-implicit.svg": "sample_models/build/tiny_bert",
    "shapes-tiny-bert-dynamic.svg": "sample_models/build/tiny_bert --use-dynamic-shape",
    "runtime-digits-cnn.svg": "sample_models/build/digits_cnn",
}
SAMPLES = ("detector", "tiny_bert", "digits_cnn")


def draw_graph(name: str) -> None:
    from workbench.cli import main

    argv = ["graph", *GRAPH_COMMANDS[name].split(), "-o", str(OUT / name)]
    if main(argv) != 0:
        raise SystemExit(f"workbench {' '.join(argv)} failed")


def draw_kernels(name: str) -> None:
    """digits_cnn's engine as TensorRT-RTX's builder made it: kernels holding TF nodes."""
    from workbench import trt_convert as trt
    from workbench.viz.graphs import render
    from workbench.viz.kernel_graph import kernel_graph

    converter = trt.TrtGraphConverterV2(input_saved_model_dir="sample_models/build/digits_cnn")
    converter.convert()
    engine, verdict = max(converter.tensorrt_verdicts().items(),
                          key=lambda item: len(item[1].kernels))
    digraph = kernel_graph(verdict.kernels, converter.session.prepared("FP32").graph, engine,
                           verdict.removed_nodes)
    (OUT / name).write_bytes(render(digraph, "svg"))


def draw_errors(name: str) -> None:
    """digits_cnn's engines in the precision the file names (...-fp16.svg), each coloured by
    its error on the model's outputs (`per_engine_accuracy`)."""
    import sample_models
    from workbench.checks.per_engine import per_engine_accuracy
    from workbench.conversion.params import ConversionParams
    from workbench.conversion.session import ConversionSession
    from workbench.viz.graphs import draw, render

    session = ConversionSession.open(sample_models.build("digits_cnn"))
    precision = name.removesuffix(".svg").rpartition("-")[2].upper()
    params = ConversionParams(precision_mode=precision)
    ranking = per_engine_accuracy(session, params, remedies_for=0)
    errors = {e.engine: e.output_max_abs_error for e in ranking.engines}
    digraph = draw(session.prepared(precision).graph, session.convert(params), "converted",
                   errors=errors)
    (OUT / name).write_bytes(render(digraph, "svg"))


def draw_dot(name: str) -> None:
    """A diagram of an idea rather than of a model, written in Graphviz's language in
    tools/diagrams/ (the estimate page's)."""
    import graphviz

    source = (ROOT / "tools" / "diagrams" / name).with_suffix(".dot").read_text()
    (OUT / name).write_bytes(graphviz.Source(source).pipe(format="svg"))


DRAWERS: dict[str, Callable[[str], None]] = {
    **dict.fromkeys(GRAPH_COMMANDS, draw_graph),
    **dict.fromkeys(("estimate-kernel-time.svg", "estimate-weakest.svg"), draw_dot),
    "runtime-digits-cnn-kernels.svg": draw_kernels,
    **dict.fromkeys(("precision-digits-cnn-fp16.svg", "precision-digits-cnn-int8.svg"),
                    draw_errors),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", metavar="FILE",
                        help=f"the diagrams to draw (default: all): {', '.join(DRAWERS)}")
    names = parser.parse_args(argv).files or list(DRAWERS)
    if unknown := set(names) - set(DRAWERS):
        parser.error(f"no diagram {', '.join(sorted(unknown))}: choose from {', '.join(DRAWERS)}")
    os.chdir(ROOT)  # the commands name the models as the pages do
    sys.path.insert(0, str(ROOT))  # this checkout's workbench, not an installed one
    import sample_models

    for sample in SAMPLES:
        sample_models.build(sample)
    OUT.mkdir(parents=True, exist_ok=True)
    for name in names:
        DRAWERS[name](name)
        print(f"wrote {(OUT / name).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
