"""What-if: nodes that would join engines if a rejected op type converted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import sample_models
from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession
from workbench.conversion.whatif import COLUMNS, blocking_op_types

RESIZE_REASON = "Cannot Convert Bilinear Resize when align_corners=False"
UINT8_REASON = (
    "Failed to convert at least one input to a TRT_TensorOrWeights: "
    "Unsupported tensorflow data type uint8"
)


@pytest.fixture(scope="module")
def two_convs(tmp_path_factory: pytest.TempPathFactory) -> ConversionSession:
    """uint8 x -> Cast -> Conv2D -> Relu -> ResizeBilinear -> Conv2D -> Relu -> y.

    TF-TRT rejects the Cast (uint8 input) and the resize (align_corners=False), which leaves
    two engines of three nodes each: {filter, Conv2D, Relu} twice. Prepared for the CPU, so
    the graph is this NHWC chain; on a GPU the layout optimizer adds a Transpose on each side
    of each convolution, which join the engines (test_gpu_preparation covers that graph).
    """
    import tensorflow as tf

    class TwoConvs(tf.Module):
        def __init__(self):
            super().__init__()
            rng = np.random.default_rng(0)
            self.f1 = tf.constant(rng.normal(size=(3, 3, 3, 4)).astype("float32"))
            self.f2 = tf.constant(rng.normal(size=(3, 3, 4, 4)).astype("float32"))

        @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 3], tf.uint8, name="x")])
        def serve(self, x):
            h = tf.nn.relu(tf.nn.conv2d(tf.cast(x, tf.float32), self.f1, 1, "SAME"))
            h = tf.raw_ops.ResizeBilinear(images=h, size=[16, 16], align_corners=False)
            return {"y": tf.nn.relu(tf.nn.conv2d(h, self.f2, 1, "SAME"))}

    module = TwoConvs()
    path: Path = tmp_path_factory.mktemp("whatif") / "two_convs"
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    return ConversionSession.open(str(path), prepare_for="cpu")


def rows(table) -> dict[str, dict]:
    return {row["op"]: row for row in table.to_dict("records")}


def test_supporting_the_resize_merges_the_two_engines(two_convs: ConversionSession) -> None:
    table = blocking_op_types(two_convs, ConversionParams())
    assert list(table.columns) == list(COLUMNS)
    # Placeholder and Identity (inputs/outputs) and the NoOps are not blockers.
    assert list(table["op"]) == ["ResizeBilinear", "Cast"]
    resize, cast = table.to_dict("records")
    assert resize == {
        "op": "ResizeBilinear", "rejected": 1, "converted_now": 6,
        # The resize and its size Const join; both convolutions end up in one engine.
        "converted_if_supported": 8, "gained": 2, "engines_now": 2, "engines_if_supported": 1,
        "top_reason": RESIZE_REASON, "rewrites": "",  # no verified rewrite starts there
    }
    # A fake converter still converts the inputs: a uint8 input stays unsupported.
    assert (cast["rejected"], cast["gained"], cast["engines_if_supported"]) == (1, 0, 2)
    assert cast["top_reason"] == UINT8_REASON


def test_skipped_rows_equal_a_real_what_if(two_convs: ConversionSession) -> None:
    params = ConversionParams()
    real = two_convs.convert(params, assume_supported=frozenset({"Cast"}))
    now = two_convs.convert(params)
    assert real.engines == now.engines


def test_a_denylisted_op_is_asked_about_without_its_denylisting(
    two_convs: ConversionSession,
) -> None:
    table = blocking_op_types(two_convs, ConversionParams(denylist=("Relu",)))
    assert list(table["op"]) == ["Relu", "ResizeBilinear", "Cast"]
    by_op = rows(table)
    # Without Relu every segment has 2 effective nodes: nothing converts.
    assert by_op["Relu"]["converted_now"] == 0 and by_op["Relu"]["rejected"] == 2
    assert (by_op["Relu"]["gained"], by_op["Relu"]["engines_if_supported"]) == (6, 2)
    assert by_op["Relu"]["top_reason"] == "Denylisted with the env var TF_TRT_OP_DENYLIST"
    # Relu stays denylisted here: size, resize, the second filter and Conv2D make one engine.
    assert (by_op["ResizeBilinear"]["gained"], by_op["ResizeBilinear"]["engines_if_supported"]) \
        == (4, 1)


def test_top_and_disabled_main_graph(two_convs: ConversionSession) -> None:
    assert list(blocking_op_types(two_convs, ConversionParams(), top=1)["op"]) == [
        "ResizeBilinear"
    ]
    empty = blocking_op_types(two_convs, ConversionParams(minimum_segment_size=-1))
    assert empty.empty and list(empty.columns) == list(COLUMNS)


@pytest.mark.slow
def test_detector_blockers() -> None:
    session = ConversionSession.open(sample_models.build("detector"))
    by_op = rows(blocking_op_types(session, ConversionParams(), top=None))
    assert set(by_op) == {"CombinedNonMaxSuppression", "ResizeBilinear", "Unpack", "Cast"}
    assert by_op["CombinedNonMaxSuppression"]["gained"] > 0
    assert by_op["ResizeBilinear"]["gained"] > 0
    # The resize sits between two of the three engines: supporting it joins them.
    assert by_op["ResizeBilinear"]["engines_now"] == 3
    assert by_op["ResizeBilinear"]["engines_if_supported"] == 2
    # The box decoder's unstack: with an unknown batch its slices have a dynamic size, and
    # TF-TRT's Split/Unpack pass no slice spec.
    assert by_op["Unpack"]["gained"] == 1
    assert by_op["Cast"]["gained"] == 0  # its input is the uint8 image
    # Dynamic shapes convert CombinedNonMaxSuppression already.
    dynamic = rows(blocking_op_types(session, ConversionParams(use_dynamic_shape=True)))
    assert "CombinedNonMaxSuppression" not in dynamic and dynamic["ResizeBilinear"]["gained"] > 0


@pytest.mark.slow
def test_tiny_bert_skipped_rows_equal_real_what_ifs() -> None:
    session = ConversionSession.open(sample_models.build("tiny_bert"))
    params = ConversionParams()
    table = blocking_op_types(session, params, top=None)
    assert list(table["gained"]) == sorted(table["gained"], reverse=True)
    assert table.iloc[0]["op"] == "Einsum"  # 12 attention Einsums, refused in implicit batch
    now = session.convert(params)
    for op in table.loc[table["gained"] == 0, "op"]:
        real = session.convert(params, assume_supported=frozenset({op}))
        assert [e.nodes for e in real.engines] == [e.nodes for e in now.engines], op
