"""The graph prepared as TF-TRT's Grappler run saw it on a GPU (graph/gpu.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.graph.gpu import UnknownTargetError, preparation_target

RESNET50 = Path(__file__).parents[2] / "sample_models" / "build" / "resnet50"


def test_targets_by_name_and_compute_capability():
    assert preparation_target().label == "NVIDIA T4 (sm_75)"
    assert preparation_target("rtx3090").label == "NVIDIA RTX 3090 (sm_86)"
    assert preparation_target("Tesla V100").compute_capability == "7.0"
    assert preparation_target("sm_80").label == "GPU (sm_80)"
    assert preparation_target("6.1").key == "sm_61"
    assert preparation_target("CPU").label == "CPU" and not preparation_target("cpu").is_gpu
    with pytest.raises(UnknownTargetError, match="compute capability"):
        preparation_target("Voodoo 5")


@pytest.fixture(scope="module")
def sessions() -> dict[str, ConversionSession]:
    if not RESNET50.exists():
        pytest.skip("sample model resnet50 not built")
    return {t: ConversionSession.open(str(RESNET50), cache=False, prepare_for=t)
            for t in ("T4", "cpu")}


def test_resnet50_on_a_gpu_is_nchw_with_one_input_transpose(sessions):
    gpu = sessions["T4"].prepared().graph_def
    cpu = sessions["cpu"].prepared().graph_def
    convs = [n for n in gpu.node if n.op == "Conv2D"]
    assert convs and all(n.attr["data_format"].s == b"NCHW" for n in convs)
    assert all(n.attr["data_format"].s == b"NHWC" for n in cpu.node if n.op == "Conv2D")
    transposes = [n for n in gpu.node if n.op == "Transpose"]
    assert len(transposes) == 1 and "NHWCToNCHW" in transposes[0].name
    # The Transpose and its permutation Const are the only new nodes.
    assert len(gpu.node) == len(cpu.node) + 2
    assert all(not n.device for n in gpu.node)  # cleared: the graph imports anywhere


def test_resnet50_converts_the_transpose_into_its_engine(sessions):
    gpu = sessions["T4"].convert(ConversionParams())
    cpu = sessions["cpu"].convert(ConversionParams())
    assert gpu.prepared_for == "NVIDIA T4 (sm_75)" and cpu.prepared_for == "CPU"
    assert [len(e.nodes) for e in gpu.engines] == [len(e.nodes) + 2 for e in cpu.engines]
    assert gpu.engines[0].native_ops["Transpose"] == 1
    assert gpu.total_nodes == cpu.total_nodes + 2


def test_cli_json_says_what_the_graph_was_prepared_for():
    if not RESNET50.exists():
        pytest.skip("sample model resnet50 not built")
    out = subprocess.run([sys.executable, "-m", "workbench.cli", "convert", str(RESNET50),
                          "--json", "--prepare-for", "A100"],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out)["prepared_for"] == "NVIDIA A100 (sm_80)"
    bad = subprocess.run([sys.executable, "-m", "workbench.cli", "convert", str(RESNET50),
                          "--prepare-for", "Voodoo"], capture_output=True, text=True)
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.parametrize("denylist", ["Conv2D,MaxPool", ""])
def test_nchw_nodes_left_to_tensorflow_run_without_onednn(denylist: str) -> None:
    """digits_cnn prepared for the T4: NCHW convolutions, batch norms and pools. Denylisted,
    they run in TensorFlow (the converted graph's native part) on a TensorFlow whose CPU
    kernels refuse NCHW (oneDNN off); converted, they run in ONNX engines. Either way the
    outputs match native TensorFlow's."""
    import sample_models

    path = str(sample_models.build("digits_cnn"))
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "WORKBENCH_CACHE_DIR": "off"}
    args = [sys.executable, "-m", "workbench.cli", "check", path, "--batch-sizes", "1",
            "--batches", "1", "--iterations", "1", "--json"]
    done = subprocess.run(args + (["--denylist", denylist] if denylist else []),
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["passed"] and report["metrics"]["validation_passed"], report["metrics"]
    assert report["engines"] == (3 if denylist else 2)
