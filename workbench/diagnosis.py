"""`workbench doctor` / `workbench.doctor()`: what this machine can run, one line per fact.

Every fact comes from the module that acts on it (the engine backends' own status checks,
TF-TRT's detection, the Graphviz renderer), so the doctor and the workbench never disagree.
TensorFlow and an ONNX Runtime engine that really runs are required; the rest only adds
(TensorRT, TF-TRT, GPUs) or serves one view (`dot`: the graph tab; Chromium: the browser test).
"""

from __future__ import annotations

import html
import platform
import shutil
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import Any

import numpy as np

from workbench.engines.backends import tensorrt_backend
from workbench.engines.backends.base import backend_status, get_backend
from workbench.engines.runtime.native_op import library as native_library
from workbench.engines.runtime.native_op import trt_engine_op as tftrt_ops
from workbench.engines.settings import EngineSettings
from workbench.engines.tftrt import native as tftrt_native
from workbench.errors import WorkbenchError, first_line
from workbench.hardware import cpu_device_name
from workbench.lazy import tf
from workbench.tf_compat import tensorflow_version
from workbench.viz.graphs import dot_version, to_svg
from workbench.words import counted

OK, ABSENT, WARNING, FAILED = "ok", "absent", "warning", "FAILED"
REQUIRED_BACKEND = "onnxruntime"
_CHROMIUM_NAMES = ("chromium", "chromium-browser")


@dataclass(frozen=True)
class Finding:
    """One fact: what was checked, its state (ok, absent, warning, FAILED) and the detail."""

    name: str
    state: str
    detail: str

    def line(self) -> str:
        return f"{self.name:<22} {self.state:<8} {self.detail}"


@dataclass(frozen=True)
class Diagnosis:
    """The findings, and whether the workbench can run here (no FAILED finding)."""

    findings: tuple[Finding, ...]

    @property
    def can_run(self) -> bool:
        return all(f.state != FAILED for f in self.findings)

    def verdict(self) -> str:
        failed = [f for f in self.findings if f.state == FAILED]
        if failed:
            return (f"the workbench cannot run here: fix the "
                    f"{counted(len(failed), 'FAILED line')} above "
                    f"({', '.join(f.name for f in failed)})")
        backend = self.get("engine backend")
        return f"the workbench can run here (engines: {backend.detail if backend else '?'})"

    def get(self, name: str) -> Finding | None:
        return next((f for f in self.findings if f.name == name), None)

    def lines(self) -> list[str]:
        return [f.line() for f in self.findings] + [self.verdict()]

    def to_dict(self) -> dict[str, Any]:
        return {"can_run": self.can_run, "verdict": self.verdict(),
                "findings": [asdict(f) for f in self.findings]}

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        colours = {OK: "#1b7f3b", ABSENT: "#5f6b7a", WARNING: "#a15c00", FAILED: "#b3261e"}
        rows = "".join(
            f"<tr><td>{html.escape(f.name)}</td>"
            f'<td style="color:{colours[f.state]};font-weight:600">{f.state}</td>'
            f"<td style='text-align:left'>{html.escape(f.detail)}</td></tr>"
            for f in self.findings)
        colour = colours[OK if self.can_run else FAILED]
        return (f"<table><tr><th>check</th><th>state</th><th>detail</th></tr>{rows}</table>"
                f'<p style="color:{colour}">{html.escape(self.verdict())}</p>')


def doctor(smoke: bool = True) -> Diagnosis:
    """Checks this machine; `smoke=False` skips running an engine and `dot` (the app's footer
    asks for the facts only)."""
    checks: list[Callable[[], Finding | list[Finding]]] = [
        _python, _cpu, _tensorflow, _tftrt, _tensorrt, lambda: _tensorrt_rtx(smoke), _gpus,
        lambda: _backends(smoke), _engine_calls, _tftrt_ops, lambda: _graphviz(smoke),
        _chromium]
    findings: list[Finding] = []
    for check in checks:
        found = check()
        findings.extend(found if isinstance(found, list) else [found])
    return Diagnosis(tuple(findings))


def footer(diagnosis: Diagnosis) -> str:
    """The app's footer: TensorFlow, TF-TRT, the engine backend and its device, `dot`."""
    def fact(name: str, short: Callable[[Finding], str]) -> list[str]:
        finding = diagnosis.get(name)
        return [short(finding)] if finding else []

    return " · ".join(
        fact("TensorFlow", lambda f: f"TensorFlow {f.detail}")
        + fact("TF-TRT", lambda f: f"TF-TRT {'usable' if f.state == OK else 'absent'}")
        + fact("engine backend", lambda f: f"engines: {f.detail}")
        + fact("Graphviz dot", lambda f: f"dot {f.detail if f.state == OK else 'missing'}"))


def chromium_path() -> str | None:
    """Chromium, as the browser test drives it (Debian's package), or None."""
    return next((p for p in map(shutil.which, _CHROMIUM_NAMES) if p), None)


# --- the checks ----------------------------------------------------------------------------

def _python() -> Finding:
    try:
        version = metadata.version("tftrt-workbench")
    except metadata.PackageNotFoundError:
        version = "not installed as a package"
    return Finding("workbench", OK, f"{version}, Python {platform.python_version()} "
                                    f"({sys.executable})")


def _cpu() -> Finding:
    return Finding("CPU", OK, cpu_device_name())


def _tensorflow() -> Finding:
    try:
        build = tf.sysconfig.get_build_info()
    except Exception as exc:  # ImportError, or a broken native library
        return Finding("TensorFlow", FAILED, f"does not import ({first_line(exc)}): install "
                       "it with the workbench: pip install 'tftrt-workbench[cpu]' (in a "
                       "clone: make install)")
    kind = "GPU (CUDA) build" if build.get("is_cuda_build") else "CPU build"
    return Finding("TensorFlow", OK, f"{tensorflow_version()}, {kind}")


def _tftrt() -> Finding:
    usable, reason = tftrt_native.status()
    return Finding("TF-TRT", OK if usable else ABSENT,
                   "usable (TensorFlow built with TensorRT)" if usable
                   else reason.removeprefix("not available here: "))


def _tensorrt() -> Finding:
    version = tensorrt_backend.version()
    if version is None:
        return Finding("TensorRT", ABSENT, "the tensorrt Python package is not installed "
                                           "(only useful on an NVIDIA GPU)")
    return Finding("TensorRT", OK, version)


def _tensorrt_rtx(smoke: bool) -> Finding:
    """TensorRT for RTX: its builder (TensorRT's verdict on every engine) runs everywhere it
    installs; running engines needs a supported GPU."""
    from workbench.engines.backends.tensorrt_api import TENSORRT_RTX

    version = TENSORRT_RTX.version()
    if version is None:
        return Finding("TensorRT-RTX", ABSENT, f"not installed (TensorRT's verdicts need it): "
                                               f"{TENSORRT_RTX.install}")
    builds = f"{version}: builds plans here"
    if smoke:
        builds += f" ({_tiny_plan()})"
    runs, _reason = tensorrt_backend.rtx_status()
    run = ("runs engines on this GPU (untested on the workbench's own machines)" if runs else
           "cannot run engines here: no NVIDIA GPU (needs compute capability 8.0, 8.6, 8.9 or "
           "12.x); the GPU run path is untested on the workbench's own machines")
    return Finding("TensorRT-RTX", OK, f"{builds}; {run}")


def _tiny_plan() -> str:
    """A one-MatMul ONNX model built by TensorRT-RTX: proof the builder works here."""
    from onnx import TensorProto, helper

    from workbench.engines.inspection.tensorrt_verdict import tensorrt_verdict
    from workbench.engines.profiles import Profile
    from workbench.engines.settings import BuildRequest

    weight = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], [0.5] * 16)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "doctor",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    request = BuildRequest(profiles=(Profile(((1, 4),), ((2, 4),), ((2, 4),)),))
    try:
        verdict = tensorrt_verdict(model, request=request, name="doctor", use_cache=False)
    except Exception as exc:  # a broken install: say so, the rest still runs
        return f"the builder fails: {first_line(exc)}"
    if not verdict.built:
        return f"a test plan failed: {verdict.error}"
    return f"a test plan built in {verdict.build_s:.2f} s"


def _gpus() -> Finding:
    names = tensorrt_backend.gpu_names()
    if not names:
        return Finding("GPUs", ABSENT, "none: no NVIDIA driver exposes a GPU")
    return Finding("GPUs", OK, ", ".join(names))


def _backends(smoke: bool) -> list[Finding]:
    """One line per registered backend, then the one engines are built on."""
    findings, default = [], None
    for name, (usable, reason) in backend_status().items():
        detail = reason
        if usable:
            try:
                detail = _backend_detail(name, smoke)
                default = default or f"{name} on {get_backend(name).device}"
            except Exception as exc:  # the library imports but cannot build or run
                usable, detail = False, f"cannot run an engine: {first_line(exc)}"
        state = OK if usable else FAILED if name == REQUIRED_BACKEND else ABSENT
        if state == FAILED:
            detail += f" (reinstall it: pip install {name})"
        findings.append(Finding(f"backend {name}", state, detail))
    findings.append(Finding("engine backend", OK if default else FAILED,
                            default or "none can run here"))
    return findings


def _engine_calls() -> Finding:
    """Whether built ONNX Runtime engines are called by the compiled engine op or through
    Python (each call then costs ~0.05 ms more); nothing is compiled to find out."""
    try:
        path, detail = native_library.status()
    except Exception as exc:  # TensorFlow or onnxruntime broken: reported above
        path, detail = "python", first_line(exc)
    if path == "python":
        return Finding("engine calls", WARNING, f"through Python: {detail}")
    return Finding("engine calls", OK, f"{path}: {detail}")


def _tftrt_ops() -> Finding:
    """Whether TF-TRT's TRTEngineOp can be registered here (saved models hold it; plain
    `tf.saved_model.load` then loads them and TF-TRT's); nothing is compiled to find out."""
    try:
        usable, detail = tftrt_ops.status()
    except Exception as exc:  # TensorFlow broken: reported above
        usable, detail = False, first_line(exc)
    return Finding("TF-TRT ops", OK if usable else WARNING, detail)


def _backend_detail(name: str, smoke: bool) -> str:
    backend = get_backend(name)
    if smoke:
        x = np.array([[-1.0, 2.0]], dtype=np.float32)
        out = backend.build(_relu_model(), EngineSettings(), "doctor").run([x])[0]
        if not np.array_equal(out, np.maximum(x, 0)):
            raise WorkbenchError(f"a Relu engine returned {out.tolist()}")
    return f"{_library_version(name)}on {backend.device}" + (", ran an engine" if smoke else "")


def _library_version(name: str) -> str:
    try:
        module = __import__(name)
    except ImportError:
        return ""
    return f"{getattr(module, '__version__', '')} "


def _relu_model() -> Any:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "doctor", [x], [y])
    opsets = [helper.make_opsetid("", 17)]
    return helper.make_model(graph, opset_imports=opsets,
                             ir_version=helper.find_min_ir_version_for(opsets))


def _graphviz(smoke: bool) -> Finding:
    try:
        version = dot_version()
        if smoke:
            from graphviz import Digraph

            to_svg(Digraph(body=["a -> b"]), timeout_s=30)
    except WorkbenchError as exc:
        return Finding("Graphviz dot", WARNING, f"{exc} (the Segment graph tab cannot draw)")
    return Finding("Graphviz dot", OK, version)


def _chromium() -> Finding:
    path = chromium_path()
    if path is None:
        return Finding("Chromium", WARNING, "not on PATH: the browser test cannot run "
                                            "(apt-get install chromium)")
    return Finding("Chromium", OK, path)
