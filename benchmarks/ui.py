"""Workbench responsiveness: slider change -> updated summary and charts, and graph drawing.

Prints, for ResNet-50, the time from a `minimum_segment_size` slider change to updated summary
and charts (target <= 150 ms), the advice on every knob beside it (target: no more than the
slider move; the first advice of a session clusters the other modes once, later ones reuse
them), and for ResNet-50 and tiny_bert the time to draw each graph view
as SVG with Graphviz (targets: converted view <= 0.5 s, full view <= 3 s).

    .venv/bin/python benchmarks/ui.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import record  # noqa: E402

import sample_models  # noqa: E402
from workbench.conversion.advice import advise  # noqa: E402
from workbench.conversion.params import ConversionParams  # noqa: E402
from workbench.conversion.session import ConversionSession  # noqa: E402
from workbench.ui import Workbench  # noqa: E402
from workbench.viz import graphs  # noqa: E402


def slider_latency(repeat: int) -> dict[str, float]:
    """Moves the slider back and forth; reports the app's own per-step timings (medians)."""
    with tempfile.TemporaryDirectory() as store:
        app = Workbench(sample_models.build("resnet50"), store=store, background=False)
        samples: dict[str, list[float]] = {}
        for i in range(repeat * 2):
            start = time.perf_counter()
            app.controls.minimum_segment_size.value = 5 if i % 2 == 0 else 3
            total = (time.perf_counter() - start) * 1000
            for key, value in {**app.timings, "total_ms": total}.items():
                samples.setdefault(key, []).append(value)
    return {key: statistics.median(values) for key, values in samples.items()}


def advice_times(repeat: int) -> dict[str, float]:
    """`advise` on ResNet-50 (ms): the first of a session (the default clustering already
    made, as after opening the app), then at each slider position (medians)."""
    session = ConversionSession.open(sample_models.build("resnet50"))
    session.convert(ConversionParams())
    start = time.perf_counter()
    advise(session, ConversionParams())
    first = (time.perf_counter() - start) * 1000
    runs = []
    for i in range(repeat * 2):
        start = time.perf_counter()
        advise(session, ConversionParams(minimum_segment_size=5 if i % 2 == 0 else 3))
        runs.append((time.perf_counter() - start) * 1000)
    return {"first_ms": first, "slider_ms": statistics.median(runs)}


def draw_times(name: str, repeat: int) -> dict[str, float]:
    session = ConversionSession.open(sample_models.build(name))
    result = session.convert(ConversionParams())
    graph = session.prepared().graph
    views = {
        "converted": lambda: graphs.converted_graph(graph, result),
        "full": lambda: graphs.full_graph(graph, result),
        "one engine": lambda: graphs.engine_graph(graph, result, result.engines[0].name),
    }
    times = {}
    for view, build in views.items():
        runs = []
        for _ in range(repeat):
            start = time.perf_counter()
            graphs.to_svg(build())
            runs.append(time.perf_counter() - start)
        times[view] = statistics.median(runs)
    print(f"\n{name}: {len(graph.real_nodes)} nodes, {len(result.engines)} engines")
    for view, seconds in times.items():
        print(f"  draw {view:11s} {seconds:7.2f} s")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    latency = slider_latency(args.repeat)
    print("resnet50 slider change (median ms):")
    for key, value in latency.items():
        print(f"  {key:24s} {value:8.1f}")
    advice = advice_times(args.repeat)
    print("resnet50 advice on every knob (ms; part of view_ms above):")
    print(f"  {'first of a session':24s} {advice['first_ms']:8.1f}")
    print(f"  {'per slider move':24s} {advice['slider_ms']:8.1f}")
    draws = {name: draw_times(name, args.repeat) for name in ("resnet50", "tiny_bert")}
    print("\ntargets:")
    ok = latency["summary_and_charts_ms"] <= 150
    print(f"  slider -> summary and charts: {latency['summary_and_charts_ms']:.0f} ms "
          f"(<= 150 ms) {'OK' if ok else 'MISSED'}")
    slider = latency["summary_and_charts_ms"]
    for label, value in (("first", advice["first_ms"]), ("per move", advice["slider_ms"])):
        verdict = "OK" if value <= slider else "MISSED"
        print(f"  advice ({label}): {value:.0f} ms (<= slider move {slider:.0f} ms) {verdict}")
    for name, times in draws.items():
        for view, limit in (("converted", 0.5), ("full", 3.0)):
            verdict = "OK" if times[view] <= limit else "MISSED"
            print(f"  {name} {view} view: {times[view]:.2f} s (<= {limit} s) {verdict}")
    figures = [record.figure(
        "ResNet-50: slider change -> updated summary and charts",
        f"{latency['summary_and_charts_ms']:.0f} ms", "<= 150 ms", ok)]
    for name, times in draws.items():
        figures.append(record.figure(
            f"{name}: converted / full graph view drawn as SVG",
            f"{times['converted']:.2f} s / {times['full']:.2f} s", "<= 0.5 s / <= 3 s",
            times["converted"] <= 0.5 and times["full"] <= 3.0))
    figures += [record.figure(f"ResNet-50: advice on the knobs ({label})", f"{value:.0f} ms",
                              "<= a slider move", value <= slider)
                for label, value in (("first", advice["first_ms"]),
                                     ("per move", advice["slider_ms"]))]
    record.write("ui", figures)


if __name__ == "__main__":
    main()
