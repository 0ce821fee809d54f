"""The prepared-graph cache: real SavedModels, reopened in fresh processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench import environment
from workbench.conversion.session import ConversionSession
from workbench.graph import cache, wire

# Opens a model, converts it with default parameters and prints what a reopen must reproduce.
OPEN_SCRIPT = """
import json, sys
import numpy as np
from workbench.conversion.params import ConversionParams
from workbench.conversion.conversion_report import ConversionReport
from workbench.conversion.session import ConversionSession
session = ConversionSession.open(sys.argv[1])
report = ConversionReport(session.convert(ConversionParams(minimum_segment_size=1))).to_dict()
x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
outputs = {k: v.numpy().tolist() for k, v in session.loaded(x).items()}
print(json.dumps({"from_cache": session.optimized.from_cache, "timings": session.timings,
                  "report": report, "outputs": outputs}))
"""


def _open_in_fresh_process(model: Path, cache_dir: Path) -> dict:
    env = {**os.environ, environment.CACHE_DIR.name: str(cache_dir)}
    done = subprocess.run([sys.executable, "-c", OPEN_SCRIPT, str(model)], env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _save_tiny(path: Path, seed: int) -> Path:
    import tensorflow as tf

    class Tiny(tf.Module):
        def __init__(self):
            super().__init__()
            self.w = tf.Variable(tf.random.Generator.from_seed(seed).normal([4, 3]))

        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def serve(self, x):
            return {"y": tf.nn.relu(tf.matmul(x, self.w))}

    module = Tiny()
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    return path


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(environment.CACHE_DIR.name, str(tmp_path / "cache"))
    monkeypatch.delenv(environment.CACHE_MAX_BYTES.name, raising=False)
    return tmp_path / "cache"


def _entries(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.exists() else []


def test_reopen_in_a_fresh_process_skips_freezing_and_grappler(
        tiny_saved_model: Path, tmp_path: Path) -> None:
    root = tmp_path / "cache"
    cold = _open_in_fresh_process(tiny_saved_model, root)
    warm = _open_in_fresh_process(tiny_saved_model, root)
    assert not cold["from_cache"] and "grappler_s" in cold["timings"]
    assert warm["from_cache"]
    assert "freeze_s" not in warm["timings"] and "grappler_s" not in warm["timings"]
    assert "cache_read_s" in warm["timings"]
    assert warm["report"] == cold["report"]
    assert warm["report"]["engines"], "the tiny model converts, so the comparison means something"
    assert warm["outputs"] == cold["outputs"]


def test_cached_graph_equals_a_fresh_preparation(tiny_saved_model: Path, cache_dir: Path
                                                 ) -> None:
    cold = ConversionSession.open(tiny_saved_model).optimized
    warm = ConversionSession.open(tiny_saved_model).optimized
    assert warm.from_cache and not cold.from_cache
    assert warm.graph_def == cold.graph_def
    assert (warm.fetches, warm.input_nodes, warm.output_nodes) == (
        cold.fetches, cold.input_nodes, cold.output_nodes)
    assert [(s.shape.as_list(), s.dtype) for s in warm.input_specs] == [([None, 4], "float32")]


def test_changed_weights_miss(tmp_path: Path, cache_dir: Path) -> None:
    model = _save_tiny(tmp_path / "m", seed=1)
    first = ConversionSession.open(model).optimized
    _save_tiny(model, seed=2)  # same path, same graph, other weights
    second = ConversionSession.open(model).optimized
    assert not second.from_cache
    assert second.graph_def != first.graph_def
    assert len(_entries(cache_dir)) == 2


def test_other_signature_and_settings_miss(tiny_saved_model: Path, cache_dir: Path) -> None:
    ConversionSession.open(tiny_saved_model).optimized  # noqa: B018 - fills the cache
    assert not ConversionSession.open(tiny_saved_model, "other").optimized.from_cache
    assert not ConversionSession.open(
        tiny_saved_model, disable_non_trt_optimizers=True).optimized.from_cache
    assert len(_entries(cache_dir)) == 3


def test_concurrent_readers_of_one_entry_all_hit(tiny_saved_model: Path,
                                                 cache_dir: Path) -> None:
    """Two tuning workers open the same cached model at once: each read also records when the
    entry was last used, and a reader losing that race must still get the graph."""
    from concurrent.futures import ThreadPoolExecutor

    ConversionSession.open(tiny_saved_model).optimized  # noqa: B018 - fills the cache
    (entry,) = _entries(cache_dir)
    with ThreadPoolExecutor(8) as pool:
        found = list(pool.map(lambda _: cache.read_entry(cache_dir, entry.name), range(200)))
    assert all(graph is not None for graph in found)
    assert _entries(cache_dir) == [entry]


@pytest.mark.parametrize("damage", ["flip_byte", "truncate", "foreign_key", "no_json",
                                    "other_shapes"])
def test_damaged_entry_is_removed_and_rebuilt(tiny_saved_model: Path, cache_dir: Path,
                                              damage: str) -> None:
    cold = ConversionSession.open(tiny_saved_model).optimized
    (entry,) = _entries(cache_dir)
    graph, meta = entry / cache.GRAPH_FILE, entry / cache.ENTRY_FILE
    data = graph.read_bytes()
    if damage == "flip_byte":
        graph.write_bytes(data[:40] + bytes([data[40] ^ 0xFF]) + data[41:])
    elif damage == "truncate":
        graph.write_bytes(data[: len(data) // 2])
    elif damage == "other_shapes":
        shapes = entry / cache.SHAPES_FILE
        shapes.write_text(shapes.read_text().replace('"float"', '"half"'))
    elif damage == "foreign_key":
        meta.write_text(meta.read_text().replace(entry.name, "0" * len(entry.name)))
    else:
        meta.unlink()
    rebuilt = ConversionSession.open(tiny_saved_model).optimized
    assert not rebuilt.from_cache
    assert rebuilt.graph_def == cold.graph_def
    assert ConversionSession.open(tiny_saved_model).optimized.from_cache  # stored again


def test_least_recently_used_entries_are_evicted(tmp_path: Path, cache_dir: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    models = [_save_tiny(tmp_path / f"m{i}", seed=i) for i in range(3)]
    ConversionSession.open(models[0]).optimized  # noqa: B018
    (entry,) = _entries(cache_dir)
    size = sum(f.stat().st_size for f in entry.iterdir())
    room_for_two = str(int(size * 2.5))
    monkeypatch.setenv(environment.CACHE_MAX_BYTES.name, room_for_two)
    ConversionSession.open(models[1]).optimized  # noqa: B018
    assert ConversionSession.open(models[0]).optimized.from_cache  # m0 now most recent
    ConversionSession.open(models[2]).optimized  # noqa: B018 - evicts m1
    assert len(_entries(cache_dir)) == 2
    assert ConversionSession.open(models[0]).optimized.from_cache
    assert ConversionSession.open(models[2]).optimized.from_cache
    assert not ConversionSession.open(models[1]).optimized.from_cache


def test_opting_out(tiny_saved_model: Path, cache_dir: Path,
                    monkeypatch: pytest.MonkeyPatch) -> None:
    ConversionSession.open(tiny_saved_model, cache=False).optimized  # noqa: B018
    assert not cache_dir.exists()
    monkeypatch.setenv(environment.CACHE_DIR.name, "off")
    assert cache.cache_dir() is None
    assert not ConversionSession.open(tiny_saved_model).optimized.from_cache
    assert not cache_dir.exists()


def test_keras_objects_are_not_cached_but_pb_files_are(tiny_frozen_pb: Path, cache_dir: Path
                                                       ) -> None:
    import keras

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    ConversionSession.open(model).optimized  # noqa: B018
    assert not _entries(cache_dir)
    ConversionSession.open(tiny_frozen_pb, output_node_names=["y"]).optimized  # noqa: B018
    assert ConversionSession.open(tiny_frozen_pb, output_node_names=["y"]).optimized.from_cache


def test_default_directory_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(environment.CACHE_DIR.name)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / "tftrt-workbench"


def test_a_graph_written_in_pieces_parses_as_itself_and_reads_back(tmp_path: Path) -> None:
    """The cache writes a large Const's bytes apart from its node; the file is the GraphDef."""
    import zlib

    import numpy as np
    from tensorflow.core.framework import graph_pb2, types_pb2

    graph_def = graph_pb2.GraphDef()
    graph_def.versions.producer = 1994
    weight = np.random.default_rng(0).normal(size=(512, 1024)).astype(np.float32)
    node = graph_def.node.add(name="w", op="Const", device="/device:GPU:0")
    node.attr["dtype"].type = types_pb2.DT_FLOAT
    node.attr["_class"].list.s.append(b"loc:@w")
    tensor = node.attr["value"].tensor
    tensor.dtype = types_pb2.DT_FLOAT
    tensor.tensor_shape.dim.add(size=512)
    tensor.tensor_shape.dim.add(size=1024)
    tensor.tensor_content = weight.tobytes()
    graph_def.node.add(name="y", op="Identity", input=["w"]).attr["T"].type = types_pb2.DT_FLOAT
    graph_def.library.function.add().signature.name = "f"

    with (tmp_path / "graph.pb").open("wb") as out:
        size, crc32 = wire.write_graph_def(graph_def, out)
    data = (tmp_path / "graph.pb").read_bytes()
    assert (size, crc32) == (len(data), zlib.crc32(data))
    assert len(data) == len(graph_def.SerializeToString())
    parsed = graph_pb2.GraphDef.FromString(data)
    assert parsed == graph_def
    assert parsed.node[0].attr["value"].tensor.tensor_content == weight.tobytes()

    # A lifted graph (its weight a Placeholder) is written with the weight as its Const.
    lifted = graph_pb2.GraphDef()
    lifted.CopyFrom(graph_def)
    del lifted.node[0].attr["value"]
    del lifted.node[0].attr["_class"]
    lifted.node[0].op = "Placeholder"
    placed: dict[str, int] = {}
    with (tmp_path / "lifted.pb").open("wb") as out:
        wire.write_graph_def(lifted, out, {"w": tensor}, placed)
    written = (tmp_path / "lifted.pb").read_bytes()
    assert list(placed) == ["w"]  # where its bytes are, to be read back a slice at a time
    assert written[placed["w"]:placed["w"] + weight.nbytes] == weight.tobytes()
    const = graph_pb2.GraphDef.FromString((tmp_path / "lifted.pb").read_bytes()).node[0]
    assert const.op == "Const" and const.device == "/device:GPU:0"
    assert const.attr["value"].tensor == tensor

    # Read back a field at a time, as written; a node may be put in another's place.
    with (tmp_path / "graph.pb").open("rb") as file:
        assert wire.read_graph_def(file) == graph_def
    with (tmp_path / "graph.pb").open("rb") as file:
        read = wire.read_graph_def(file, lambda n: lifted.node[0] if n.op == "Const" else None)
    assert read == lifted
    (tmp_path / "cut.pb").write_bytes(data[: len(data) // 2])
    with (tmp_path / "cut.pb").open("rb") as file, pytest.raises(ValueError, match="truncated"):
        wire.read_graph_def(file)
