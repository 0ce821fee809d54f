"""Reading TF-TRT converted SavedModels (workbench/engines/tftrt/saved_model.py).

TF-TRT cannot run here, so the tests make its format: our converter's saved model, with each
engine's `PartitionedCall` rewritten into a TRTEngineOp carrying TF-TRT's attributes
(tools-and-formats §1.7) and a `trt-serialized-engine.<engine>` TFRecord of TRTEngineInstance
protos holding fake plans, written here by hand so the reader's decoding is checked
independently.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_cli

from workbench.conversion.params import RecordedParams
from workbench.engines.tftrt.saved_model import TftrtModelError, inspect_tftrt

NATIVE_SUFFIX = "_native_segment"


# --- making TF-TRT's format --------------------------------------------------------------


def _varint(value: int) -> bytes:
    out = b""
    while True:
        byte, value = value & 0x7F, value >> 7
        out += bytes([byte | (0x80 if value else 0)])
        if not value:
            return out


def _engine_instance(shapes: list[list[int]], plan: bytes) -> bytes:
    """TRTEngineInstance in wire format: input_shapes = 1 (TensorShapeProto), plan = 2."""
    from tensorflow.core.framework import tensor_shape_pb2

    out = b""
    for shape in shapes:
        proto = tensor_shape_pb2.TensorShapeProto(
            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in shape]).SerializeToString()
        out += b"\x0a" + _varint(len(proto)) + proto
    return out + b"\x12" + _varint(len(plan)) + plan


def fake_plan(engine: str, index: int) -> bytes:
    return f"ftrt-plan {engine} #{index}\x00\xff".encode("latin-1") * (50 + index)


def to_tftrt_format(model_dir: Path, params: dict, engine_shapes: dict[str, list]) -> None:
    """Rewrites a workbench-saved converted model in place into what TF-TRT's save() wrote."""
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((model_dir / "saved_model.pb").read_bytes())
    for function in proto.meta_graphs[0].graph_def.library.function:
        engines = [n for n in function.node_def
                   if n.op == "PartitionedCall" and n.attr["f"].func.name.endswith(NATIVE_SUFFIX)]
        if not engines:
            continue
        for node in engines:
            _to_engine_op(node, params)
        names = {n.name for n in engines}
        for node in function.node_def:  # TRTEngineOp's output list is `out_tensor`
            node.input[:] = [_out_tensor(i, names) for i in node.input]
        for key, value in function.ret.items():
            function.ret[key] = _out_tensor(value, names)
        # TF-TRT's pruned function takes its feeds as arguments: no Placeholder nodes remain.
        used = {i.lstrip("^").split(":")[0] for n in function.node_def for i in n.input}
        kept = [n for n in function.node_def if n.op != "Placeholder" or n.name in used]
        del function.node_def[:]
        function.node_def.extend(kept)
    (model_dir / "saved_model.pb").write_bytes(proto.SerializeToString())
    assets = model_dir / "assets"
    shutil.rmtree(assets)
    assets.mkdir()
    for engine, shapes_per_engine in engine_shapes.items():
        with tf.io.TFRecordWriter(str(assets / f"trt-serialized-engine.{engine}")) as writer:
            for index, shapes in enumerate(shapes_per_engine):
                writer.write(_engine_instance(shapes, fake_plan(engine, index)))


def _out_tensor(text: str, engines: set[str]) -> str:
    parts = text.split(":")
    if len(parts) == 3 and parts[0] in engines:
        return f"{parts[0]}:out_tensor:{parts[2]}"
    return text


def _to_engine_op(node, params: dict) -> None:
    """A PartitionedCall of `<engine>_native_segment` -> TRTEngineOp with convert_graph.cc's
    attributes (spec tftrt-segmentation §2.11)."""
    func, tin, tout = node.attr["f"].func.name, node.attr["Tin"], node.attr["Tout"]
    shapes = node.attr["_output_shapes"]
    node.op, node.device = "TRTEngineOp", "/device:GPU:0"
    node.attr.clear()
    node.attr["InT"].CopyFrom(tin)
    node.attr["OutT"].CopyFrom(tout)
    node.attr["segment_func"].func.name = func
    node.attr["_output_shapes"].CopyFrom(shapes)
    node.attr["output_shapes"].CopyFrom(shapes)
    for shape in params["input_shapes"][node.name]:
        proto = node.attr["input_shapes"].list.shape.add()
        for dim in shape:
            proto.dim.add(size=dim)
    implicit = not params["use_dynamic_shape"]
    node.attr["precision_mode"].s = params["precision_mode"].encode()
    node.attr["max_cached_engines_count"].i = params["maximum_cached_engines"]
    node.attr["workspace_size_bytes"].i = 1 << 30
    node.attr["max_batch_size"].i = 1
    node.attr["static_engine"].b = False
    node.attr["serialized_segment"].s = b""
    node.attr["calibration_data"].s = b""
    node.attr["use_calibration"].b = False
    node.attr["use_explicit_precision"].b = False
    node.attr["_use_implicit_batch"].b = implicit
    node.attr["_allow_build_at_runtime"].b = True
    if not implicit:
        node.attr["profile_strategy"].s = b"Range"


# --- fixtures ------------------------------------------------------------------------------

CASES = {
    "fp32_implicit": {"precision_mode": "FP32", "use_dynamic_shape": False,
                      "maximum_cached_engines": 2},
    "fp16_dynamic": {"precision_mode": "FP16", "use_dynamic_shape": True,
                     "maximum_cached_engines": 1},
}


@pytest.fixture(scope="module", params=sorted(CASES))
def converted(request, tmp_path_factory):
    """(our converter, TF-TRT format dir, params, the engine shapes written)."""
    import sample_models
    from workbench import trt_convert as trt

    params = CASES[request.param]
    converter = trt.TrtGraphConverterV2(
        input_saved_model_dir=str(sample_models.build("digits_cnn")),
        precision_mode=params["precision_mode"], use_dynamic_shape=params["use_dynamic_shape"],
        maximum_cached_engines=params["maximum_cached_engines"])
    converter.convert()
    path = tmp_path_factory.mktemp(request.param) / "tftrt"
    # TF-TRT's native segment functions hold their weights as Consts; ours take them as
    # arguments fed from variables unless no Const counts as a weight.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("workbench.engines.weights.stored_weight",
                      lambda node, inputs=None: None)
        patch.setattr("workbench.engines.runtime.saved_weights.is_stored", lambda tensor: False)
        # Engines as calls of their native segments, which to_tftrt_format rewrites itself.
        patch.setattr("workbench.engines.runtime.native_op.trt_engine_op.register_engine_op",
                      lambda: False)
        converter.save(str(path))
    engines = converter.result.engines
    input_shapes = {e.name: [[4 if d < 0 else d for d in s] for s in e.input_shapes]
                    for e in engines}
    # The first engine cached one engine per batch size; the others none (built at run time).
    saved = {engines[0].name: [[[1, *s[1:]] for s in input_shapes[engines[0].name]],
                               input_shapes[engines[0].name]]}
    to_tftrt_format(path, {**params, "input_shapes": input_shapes}, saved)
    return converter, path, params, saved


def _copy(path: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(path, copy)
    return copy


# --- reading -------------------------------------------------------------------------------


def test_engines_read_back_equal_our_conversion(converted) -> None:
    converter, path, params, _saved = converted
    model = inspect_tftrt(path)
    ours = {e.name: e for e in converter.result.engines}
    read = {e.name: e for e in model.result.engines}
    assert sorted(read) == sorted(ours) and read
    for name, engine in read.items():
        mine = ours[name]
        assert engine.native_node_count == mine.native_node_count
        assert engine.native_ops == mine.native_ops
        assert engine.input_dtypes == mine.input_dtypes
        assert engine.output_dtypes == mine.output_dtypes
        assert engine.output_shapes == mine.output_shapes
        assert set(mine.nodes) <= set(engine.nodes)  # plus the Consts copied in
        assert engine.device == "/device:GPU:0"
    assert model.result.converted_nodes == converter.result.converted_nodes
    assert model.result.total_nodes == converter.result.total_nodes
    assert model.result.percent_converted == converter.result.percent_converted
    assert model.result.params.precision_mode == params["precision_mode"]
    assert model.result.params.use_dynamic_shape == params["use_dynamic_shape"]
    assert isinstance(model.result.params, RecordedParams)
    assert model.result.params.minimum_segment_size is None  # not recorded by TF-TRT


def test_engine_table_has_tftrt_attributes(converted) -> None:
    _converter, path, params, saved = converted
    table = inspect_tftrt(path).engines
    count = len(table)
    assert list(table["precision"]) == [params["precision_mode"]] * count
    assert list(table["implicit_batch"]) == [not params["use_dynamic_shape"]] * count
    strategy = "Range" if params["use_dynamic_shape"] else ""
    assert list(table["profile_strategy"]) == [strategy] * count
    assert list(table["max_cached_engines"]) == [params["maximum_cached_engines"]] * count
    assert list(table["cached_engines_saved"]) == [len(saved.get(n, [])) for n in table["name"]]


def test_notebook_view_shows_engines_and_summary(converted) -> None:
    _converter, path, _params, _saved = converted
    page = inspect_tftrt(path)._repr_html_()
    assert "Converted by TF-TRT" in page and "<table" in page
    assert "TRTEngineOp_000_000" in page and "Total number of TensorRT engines" in page


def test_summary_text_equals_ours(converted) -> None:
    converter, path, _params, _saved = converted
    ours, read = [], []
    converter.summary(print_fn=ours.append)
    inspect_tftrt(path).summary(print_fn=read.append)
    # Input shapes are the engines' attribute (what TF-TRT printed); the test wrote the ones
    # it built for, with the batch dim set, where our converter prints -1 before any build.
    assert [_no_input_shapes(x) for x in read] == [_no_input_shapes(x) for x in ours]
    assert any("TRTEngineOp_000_000" in line for line in read)
    assert read[-1] == ours[-1] and "[*] % of OPs Converted" in read[-1]


def _no_input_shapes(line: str) -> str:
    # The Input Shapes cell spans columns 120-139 at line_length 160.
    return line[:120] + line[139:] if line.startswith("TRTEngineOp_") else line


def test_plans_export_byte_exact(converted, tmp_path: Path) -> None:
    _converter, path, _params, saved = converted
    table = inspect_tftrt(path).export_engines(tmp_path / "plans")
    (engine, shapes_list), = saved.items()
    assert list(table["file"]) == [str(tmp_path / "plans" / f"{engine}.{i}.plan")
                                   for i in range(len(shapes_list))]
    for index, shapes in enumerate(shapes_list):
        file = tmp_path / "plans" / f"{engine}.{index}.plan"
        assert file.read_bytes() == fake_plan(engine, index)
        assert table["input_shapes"][index] == shapes


def test_json_document(converted) -> None:
    converter, path, params, saved = converted
    document = json.loads(json.dumps(inspect_tftrt(path).to_dict()))
    precisions = [a["precision_mode"] for a in document["engine_attrs"]]
    assert precisions == [params["precision_mode"]] * len(converter.result.engines)
    assert len(document["saved_engines"]) == sum(len(v) for v in saved.values())
    assert document["total_nodes"] == converter.result.total_nodes
    # DESIGN.md's params keys; what a converted model does not record is null.
    assert document["params"] == {
        "precision_mode": params["precision_mode"], "minimum_segment_size": None,
        "use_dynamic_shape": params["use_dynamic_shape"],
        "dynamic_shape_profile_strategy": "Range" if params["use_dynamic_shape"] else None,
        "denylist": None, "max_engines": None}


# --- damaged input -------------------------------------------------------------------------


def test_missing_saved_model_pb(converted, tmp_path: Path) -> None:
    copy = _copy(converted[1], tmp_path)
    (copy / "saved_model.pb").unlink()
    with pytest.raises(TftrtModelError, match="has no saved_model.pb"):
        inspect_tftrt(copy)


def test_corrupt_saved_model_pb(converted, tmp_path: Path) -> None:
    copy = _copy(converted[1], tmp_path)
    (copy / "saved_model.pb").write_bytes(b"\x0a\xff\xff\xff\x0f garbage")
    with pytest.raises(TftrtModelError, match="is corrupt"):
        inspect_tftrt(copy)


def test_corrupt_engine_asset(converted, tmp_path: Path) -> None:
    copy = _copy(converted[1], tmp_path)
    (asset,) = (copy / "assets").iterdir()
    data = bytearray(asset.read_bytes())
    data[40] ^= 0xFF  # inside the first record's data: its CRC no longer matches
    asset.write_bytes(bytes(data))
    with pytest.raises(TftrtModelError, match=f"{asset.name} is corrupt"):
        inspect_tftrt(copy)


def test_truncated_engine_asset(converted, tmp_path: Path) -> None:
    copy = _copy(converted[1], tmp_path)
    (asset,) = (copy / "assets").iterdir()
    asset.write_bytes(asset.read_bytes()[:-7])
    with pytest.raises(TftrtModelError, match="is corrupt"):
        inspect_tftrt(copy)


def test_missing_segment_function(converted, tmp_path: Path) -> None:
    from tensorflow.core.protobuf import saved_model_pb2

    converter, path, _params, _saved = converted
    engine = converter.result.engines[-1].name
    copy = _copy(path, tmp_path)
    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((copy / "saved_model.pb").read_bytes())
    library = proto.meta_graphs[0].graph_def.library
    gone = engine + NATIVE_SUFFIX
    kept = [f for f in library.function if f.signature.name != gone]
    del library.function[:]
    library.function.extend(kept)
    (copy / "saved_model.pb").write_bytes(proto.SerializeToString())
    with pytest.raises(TftrtModelError, match=f"{engine}.*remove_native_segments"):
        inspect_tftrt(copy)


def test_model_without_engines(tiny_saved_model: Path) -> None:
    with pytest.raises(TftrtModelError, match="has no TRTEngineOp: it is not converted"):
        inspect_tftrt(tiny_saved_model)


def test_workbench_saved_model_points_to_load(tmp_path: Path) -> None:
    import sample_models
    from workbench import trt_convert as trt

    converter = trt.TrtGraphConverterV2(
        input_saved_model_dir=str(sample_models.build("quickstart_mlp")))
    converter.convert()
    converter.save(str(tmp_path / "ours"))
    with pytest.raises(TftrtModelError, match=r"workbench\.load"):
        inspect_tftrt(tmp_path / "ours")


def test_unknown_signature_and_path(converted, tmp_path: Path) -> None:
    with pytest.raises(TftrtModelError, match="Signature key 'nope' not found.*serving_default"):
        inspect_tftrt(converted[1], signature_key="nope")
    with pytest.raises(TftrtModelError, match="No such path"):
        inspect_tftrt(tmp_path / "absent")
    (tmp_path / "junk.pb").write_bytes(b"\x07 junk")
    with pytest.raises(TftrtModelError, match="junk.pb is not a valid GraphDef .*converted "
                                              "GraphDef .pb.$"):
        inspect_tftrt(tmp_path / "junk.pb")


def test_lazy_entry_point() -> None:
    import workbench

    assert workbench.inspect_tftrt is inspect_tftrt


# --- CLI -----------------------------------------------------------------------------------


def test_cli_inspect(converted, tmp_path: Path) -> None:
    converter, path, _params, saved = converted
    done = run_cli("inspect", str(path))
    assert done.returncode == 0, done.stderr
    ours = []
    converter.summary(print_fn=ours.append)
    assert ours[-1] in done.stdout
    done = run_cli("inspect", str(path), "--json", "--export-engines", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert [e["file"] for e in document["exported"]] == [
        str(tmp_path / "out" / f"{name}.{i}.plan")
        for name, shapes in saved.items() for i in range(len(shapes))]
    assert all(Path(e["file"]).is_file() for e in document["exported"])
