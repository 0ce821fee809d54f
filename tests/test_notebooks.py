"""Every notebook executes headless on a real kernel, then the checks below run in its kernel
after its last cell: the lessons show, the tests assert."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
pytestmark = pytest.mark.slow


# Notebook 02's text and asserts show tiny_bert's engines under TF 2.21's graph.
TINY_BERT_GELU = pytest.mark.newest_stack(
    reason="TF <= 2.17 writes tiny_bert's GELU with Erf, which converts (2.21 with Erfc, "
    "rejected): other engine counts than the notebook explains")
# Notebook 11 rewrites the Erfc of TF >= 2.18's exact GELU; TF 2.17 writes it with Erf.
KERAS_GELU_ERFC = pytest.mark.newest_stack(
    reason="TF <= 2.17 writes Keras' exact GELU with Erf, which converts: no Erfc to rewrite")
NEWEST_STACK_NOTEBOOKS = {"02_minimum_segment_size": TINY_BERT_GELU,
                          "11_fixing_the_model": KERAS_GELU_ERFC}

# What a lesson shows, checked in its own kernel after it ran (kept out of the lesson's cells).
CHECKS = {
    "00_workbench": """
assert app.error is None and len(app.result.engines) == 13, app.result.engines
assert app.tabs.titles[-2:] == ("Tune", "Export") and len(app.tabs.titles) == 9
""",
    "01_quickstart": """
assert len(converter.result.engines) == 1
reasons = set(converter.report.nonconversion.reason)
assert 'The input "shape" for Reshape must be a constant in implicit batch mode.' in reasons
assert accuracy > 0.85
assert dynamic.result.percent_converted > converter.result.percent_converted
assert difference < 1e-4 and plain_difference < 1e-4
""",
    "02_minimum_segment_size": """
engines = [len(r.engines) for r in sweep]
converted = [r.converted_nodes for r in sweep]
assert all(a >= b for a, b in zip(converted, converted[1:])), converted  # only drops
assert engines[0] == 20 and engines[2] == 13 and engines[5] == 5 and engines[13] == 0
assert [sweep[i].total_nodes for i in (0, 2, 5)] == [256, 254, 251]  # the text's totals
assert (recommendation.fewest_engines, recommendation.moderate) == (6, 8)
assert dynamic.result.percent_converted > converter.result.percent_converted
""",
    "03_precision": """
split = dict(zip(table.precision, table["split casts"]))
assert split["FP16"] >= 1 and split["FP32"] == 0  # FP16 splits the float Casts
assert "calibration_input_fn" in message  # INT8 without one: TF-TRT's ValueError
assert not check.validation.passed  # FP16 overflows inside the middle engine
assert check.validation.outputs[0].nan + check.validation.outputs[0].inf > 0
worst = ranking.engines[0]
assert "Square" in worst.ops and worst.inf > 0
""",
    "04_dynamic_shapes": """
assert dynamic.result.percent_converted > implicit.result.percent_converted
assert dynamic.result.total_nodes != implicit.result.total_nodes  # the text explains why
assert len(batch_reasons) > 0
best = implicit.advice[0]
assert best.setting == "use_dynamic_shape"
assert best.percent_converted == dynamic.result.percent_converted  # measured, not estimated
by_strategy = guide.set_index("strategy")["profiles"]
assert by_strategy["Range"] == "[4-8, 128-384]"
assert by_strategy["ImplicitBatchModeCompatible"] == "[1-8, 128], [1-4, 384]"
accepts = {s: any(p.accepts((request,) * 3) for p in optimization_profiles(shape_sets, s))
           for s in strategies}
assert accepts == {"Range": True, "Optimal": False, "Range+Optimal": True,
                   "ImplicitBatchModeCompatible": False}
""",
    "05_native_fallback": """
inside = (served.batch <= 4) & served.length.between(16, 32)
assert (served["served by"] == "engines").eq(inside).all(), served
assert (served.loc[~inside, "engines that fell back"] == len(converter.result.engines)).all()
assert "no optimization profile" in next(iter(model.native_runs[engine]))
assert "User disallowed engine native segment execution" in refusal
assert (served_fixed["served by"] == "engines").all()
assert (building.builds == 1).all() and (building.native_calls == 0).all()
assert (refusing.cached_engines == 0).all() and (refusing.native_calls == 2).all()
""",
    "06_engines": """
by_precision = accuracy.set_index("precision")
assert by_precision.loc["FP32", "largest difference from native"] < 1e-4
top1_fp32, top1_int8 = by_precision.loc[["FP32", "INT8"], "top-1 accuracy"]
assert top1_fp32 - top1_int8 <= 0.01, "INT8 may lose at most one point of top-1 accuracy"
assert (accuracy["same top-1 as native"] >= 0.97).all()
assert check.validation.passed
assert set(check.latency["model"]) == {"native TF", "converted", "whole model"}
assert check.latency["device"].str.len().gt(0).all()  # every figure says where it ran
assert np.abs(reloaded_logits - native_logits[:8]).max() < 1e-4
assert np.abs(plain_logits - native_logits[:8]).max() < 1e-4
assert reloaded.engine_table()["builds"].sum() == 0  # nothing rebuilt
assert sum(name.endswith(".onnx") for name in exported) == len(fp32.result.engines)
""",
    "07_inside_an_engine": """
assert verdict.built and len(held) > 250 and len(kernels) < len(held) / 3
assert {"runtime_fusion", "correlation", "gemm", "maxpool"} <= set(kernels["type"])
assert {f"{scope}conv_1/BiasAdd", f"{scope}bn_1/batchnorm/mul_1", f"{scope}bn_1/batchnorm/add_1",
        f"{scope}relu_1/Relu"} <= set(conv.nodes)
assert conv.outputs[0].shape == (-1, 64, 56, 56)
assert "StatefulPartitionedCall/resnet50_1/conv2_block1_out_1/Relu" in block_end.nodes
assert len(block_end.inputs) == 2  # the main path and the shortcut
assert folded[f"{scope}bn_1/batchnorm/mul_1"] == conv16.name
assert conv16.outputs[0].dtype == "FP16" and "Channel major" in conv16.outputs[0].format
assert {n for k in verdict16.kernels for n in k.nodes} >= held  # every node still in a kernel
assert len(fused) == 2  # one per transformer layer
for _, k in fused:
    assert {n.split("/")[-3] for n in k.nodes} == {"query_1", "key_1"}
    assert k.constants[0].shape == (128, 256) and k.outputs[0].shape == (-1, 256)
assert set(removed["op"]) <= {"Shape", "GatherV2", "Prod", "Pack", "StridedSlice", "ConcatV2",
                              "Reshape", "ExpandDims", "Identity", "OnesLike", "Fill"}
assert {"Reshape", "Identity"} <= set(removed["op"])
gpu_conv = table.set_index("kernel").loc[
    "resnet50/conv2_block1_1_conv/Conv2D + resnet50/conv2_block1_1_relu/Relu"]
assert gpu_conv["type"] == "CaskConvolution" and gpu_conv["output_dtypes"] == ["FP16"]
assert list(table.columns) == list(kernels.columns)
""",
    "08_profiling": """
assert [len(t) for t in runs.values()] == [103, 86, 63]  # the text's layer counts
assert set(table["device"]) == {"NVIDIA GeForce RTX 3090"} and set(table["source"]) == {"trtexec"}
first_conv = runs["FP16"].set_index("layer").loc["Conv__435 + resnet50/conv1_relu/Relu"]
assert first_conv["tf_nodes"] == ["resnet50/conv1_relu/Relu"]
assert first_conv["layer_type"] == "CaskConvolution" and first_conv["precision"] == "FP16"
assert (summary.layers_sum_ms > summary.end_to_end_mean_ms).all()
assert summary.throughput_qps.is_monotonic_increasing  # FP32 < FP16 < INT8
counts = pd.crosstab(table["run"], table["precision"])
assert counts.loc["FP32"].to_dict().get("FP32") == 103
assert counts.loc["FP16", "FP16"] == 83 and counts.loc["INT8", "INT8"] == 58
assert tf32.sum() > 20
by_type = runs["FP16"].groupby("layer_type")["pct"].sum().sort_values(ascending=False)
assert by_type.index[0] == "CaskConvolution" and by_type.iloc[0] > 85
assert conv["FP32"] > conv["FP16"] > conv["INT8"]
assert "quant_conv2_block1_2_conv" in conv["INT8:layer"]
assert (matched["status"] == "one layer").sum() >= 50
assert block["layers"].iloc[0][0].endswith("conv2_block1_add/add + resnet50/conv2_block1_out/Relu")
assert len(groups) >= 50 and len(fused["first_layers"].iloc[0]) >= 2
""",
    "09_tuning": """
assert len(result.trials) == 4 and all(t.status == "ok" for t in result.trials)
table = result.table.set_index(["precision_mode", "minimum_segment_size"])
assert table.loc[("FP32", 3), "percent_converted"] == table.loc[("FP16", 3), "percent_converted"]
assert table.loc[("FP32", 10), "engines"] < table.loc[("FP32", 3), "engines"]
assert table.loc[("FP16", 3), "max_abs_error"] > table.loc[("FP32", 3), "max_abs_error"]
front = result.pareto
assert not front.empty and front["status"].eq("ok").all()
assert result.table.set_index("trial_id").loc[chosen["trial_id"], "pareto"]
assert all(t.reused for t in again.trials)
assert again.recommended["trial_id"] == chosen["trial_id"]
""",
    "10_after_tftrt": """
from workbench.checks.export_formats import TFTRT_IMPORT
from workbench.engines.backends import tensorrt_rtx_onnx

assert TFTRT_IMPORT in text and "TF_TRT_MAX_ALLOWED_ENGINES\\"] = '5'" in text
assert "dynamic_shape_profile_strategy='Optimal'" in text and "[(4, 16), (4, 16), (4, 16)]" in text
assert [i.name for i in model.graph.input] == bert.session.loaded.input_names
assert shell.count("trtexec ") == 2  # Optimal: one profile per shape
assert "--minShapes=input_mask:4x16,input_type_ids:4x16,input_word_ids:4x16" in shell
assert "--exportProfile=tiny_bert_p0/tiny_bert.profile.json" in shell and "--fp16" in shell
if tensorrt_rtx_onnx.available()[0]:
    resnet, bert_view = views["resnet50"], views["tiny_bert"]
    # ResNet-50: one TF-TRT engine of nearly everything; TensorRT parses it whole and builds.
    assert len(resnet.result.engines) == 1 and resnet.plan_bytes
    assert resnet.table().loc[1, "% of nodes"] >= resnet.result.percent_converted
    # tiny_bert: many TF-TRT engines in implicit batch mode; TensorRT takes it in one network.
    assert len(bert_view.result.engines) > 5 and bert_view.tensorrt_subgraphs == 1
    assert bert_view.plan_bytes
    # detector: TensorRT's parser rejects a node, so no whole-model plan.
    assert detector.rejections and detector.plan_bytes is None
    assert {"taken", "in an unsupported subgraph"} <= set(detector.nodes["tensorrt"])
    assert "#1a7f37" in svg and "outline: TensorRT" in svg
assert "TensorListReserve" in message and not (OUT / "lstm.onnx").exists()
""",
    "11_fixing_the_model": """
assert set(rejected.op) >= {"Erfc", "Cast", "ExpandDims", "Fill"}
assert len(before.engines) == 6 and len(after.engines) == 1, (before.engines, after.engines)
(entry,) = [a for a in advice if a.setting == "rewrites"]
assert (entry.engines, entry.percent_converted) == (1, after.percent_converted)  # as measured
assert rewritten.rewrite_counts["erfc_as_erf"] == 2
assert estimates["rewritten"]["converted_ms"] < estimates["original"]["converted_ms"]
assert max(errors.values()) < 1e-5
assert any(n.op == "Erfc" for n in converter.result.unconverted)  # convert() never rewrites
""",
}


@pytest.mark.parametrize("path", [
    pytest.param(p, marks=NEWEST_STACK_NOTEBOOKS.get(p.stem, ())) for p in NOTEBOOKS
], ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path: Path, tmp_path: Path) -> None:
    # Run from a scratch copy so experiment stores and outputs never land in the repo.
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    notebook = nbformat.read(copy, as_version=4)
    if path.stem in CHECKS:
        notebook.cells.append(nbformat.v4.new_code_cell(CHECKS[path.stem]))
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [out for cell in notebook.cells for out in cell.get("outputs", [])
              if out.get("output_type") == "error"]
    assert not errors, errors


def test_the_course_keeps_its_names() -> None:
    # README, docs/index.md, docs/workbench.md, notebook 00 and the site link these names.
    assert [p.stem for p in NOTEBOOKS] == [
        "00_workbench", "01_quickstart", "02_minimum_segment_size", "03_precision",
        "04_dynamic_shapes", "05_native_fallback", "06_engines", "07_inside_an_engine",
        "08_profiling", "09_tuning", "10_after_tftrt", "11_fixing_the_model"]
