"""The graph rewrites: each is equivalent to the original on native TensorFlow (exactly, or
within its stated bound), each turns a node TF-TRT's rules reject into nodes they accept, and
each leaves alone the near misses where it would not be equivalent."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import tensorflow as tf

from workbench.conversion.params import ConversionParams
from workbench.conversion.rewrites import REWRITES, select
from workbench.conversion.rewrites.model import rewrite_model, save_rewritten
from workbench.conversion.session import ConversionSession
from workbench.errors import WorkbenchError
from workbench.graph.loading import LoadedModel

DYNAMIC = ConversionParams(use_dynamic_shape=True, dynamic_shape_profile_strategy="Range",
                           minimum_segment_size=1)
IMPLICIT = ConversionParams(minimum_segment_size=1)
ERFC_BOUND = 4.8e-7  # erfc_as_erf's stated float32 bound


def model(body: Callable[[tf.Tensor], dict], shape: tuple = (None, 8)) -> LoadedModel:
    """A one-input model: `body(x)` returns the named outputs."""
    function = tf.function(body, input_signature=[tf.TensorSpec(shape, tf.float32, name="x")])
    concrete = function.get_concrete_function()
    return LoadedModel(body.__name__, "keras", concrete, input_names=["x"],
                       output_names=sorted(concrete.structured_outputs))


def special_values(columns: int = 8) -> np.ndarray:
    """Rows of ordinary and awkward floats: zeros of both signs, NaN, infinities, huge and
    tiny values, and a sweep across erfc's range."""
    awkward = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e30, -1e30, 1e-40, 3.0, -2.5, 65504.0,
               7e4, 0.5, 1.0, -1.0, 2.0]
    sweep = np.linspace(-6, 6, 8 * columns)
    values = np.concatenate([awkward, sweep]).astype(np.float32)
    return values[: len(values) // columns * columns].reshape(-1, columns)


def outputs(loaded: LoadedModel, x: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in loaded(x).items()}


# --- the pattern models -----------------------------------------------------------------------

def exact_gelu(x):
    """The exact GELU as TensorFlow >= 2.18 writes it (through Erfc; 2.17 uses Erf)."""
    return 0.5 * x * tf.math.erfc(-x * 0.7071067811865476)


def gelu(x):
    return {"y": exact_gelu(x) * 2.0, "z": tf.math.erfc(x) + 1.0}


def broadcast(x):
    w = tf.constant(np.arange(8, dtype=np.float32).reshape(1, 8))
    wide = tf.broadcast_to(w, tf.shape(x))
    return {"y": (x + wide) * wide}


def cast_chain(x):
    through_double = tf.cast(x * 3.0, tf.float64)
    return {"y": tf.cast(through_double, tf.float32) + 1.0,
            "z": tf.cast(tf.cast(x, tf.float64), tf.float16) * tf.constant(2.0, tf.float16)}


def bool_cast(x):
    return {"y": tf.where(tf.cast(x * 2.0, tf.bool), x, 7.0)}


def bool_expand_dims(x):
    cond = tf.expand_dims(tf.cast(x * 2.0, tf.bool), 2)
    return {"y": tf.where(cond, tf.expand_dims(x, 2), 7.0) + 1.0}


def bool_fill(x):
    everywhere = tf.fill(tf.shape(x), True)
    nowhere = tf.fill(tf.shape(x), False)
    positive = tf.logical_and(everywhere, x > 0.0)
    return {"y": tf.where(tf.logical_or(nowhere, positive), x, 7.0) * 2.0}


def causal_mask(x):
    """Keras' TensorFlow attention: band_part(ones((T, S), bool), -1, 0)[None, None]."""
    scores = tf.reshape(x, (-1, 2, 4, 4))
    shape = tf.shape(scores)
    band = tf.linalg.band_part(tf.ones(tf.stack([shape[2], shape[3]]), tf.bool), -1, 0)
    keep = tf.logical_and(tf.ones_like(scores, tf.bool), band[None, None, :, :])
    return {"y": tf.where(keep, scores, -1e9) * 2.0}


def bands(x):
    """Bands of data: bool (causal), float (one above, two below the diagonal, 4 x 3), int32
    (upper triangle)."""
    scores = tf.reshape(x, (-1, 4, 4))
    square = scores[..., :3]
    ints = tf.cast(scores, tf.int32)
    return {"w": tf.where(tf.linalg.band_part(scores > 0.0, -1, 0), scores, 7.0) * 2.0,
            "y": tf.linalg.band_part(square * 3.0, 2, 1) + 1.0,
            "z": tf.linalg.band_part(ints * 2, 0, -1) + 1}


def leading_axes(x):
    """x[None, None] of a bool (Keras' causal mask) and of a float, into broadcasting ops."""
    first = tf.reshape(x, (-1, 2, 4))[0]
    scores = tf.reshape(x, (-1, 1, 2, 4))
    keep = tf.logical_and(scores > -1.0, (first > 0.0)[None, None, :, :])
    return {"y": tf.where(keep, scores, 7.0), "z": scores * (first * 2.0)[None, None, ...]}


def broadcast_cast(x):
    """keras-hub's causal mask: a constant bool broadcast to the batch, then cast."""
    keep = tf.constant(np.arange(8) % 3 != 0)[None, :]
    return {"y": tf.cast(tf.broadcast_to(keep, tf.shape(x)), tf.float32) * x}


def broadcast_select(x):
    """BroadcastTo into ops that do not broadcast: a float row, x's first column (its awkward
    values repeated), an int32 row."""
    row = tf.constant(np.arange(8, dtype=np.float32)[None, :])
    ints = tf.broadcast_to(tf.range(8)[None, :], tf.shape(x))
    return {"y": tf.broadcast_to(row, tf.shape(x)), "w": tf.broadcast_to(x[:, :1], tf.shape(x)),
            "z": tf.transpose(ints)}


def bool_to_number(x):
    return {"y": tf.cast(x > 0.0, tf.float32) * x, "z": tf.cast(x < 1.0, tf.int32) * 3,
            "w": tf.cast(x >= 2.0, tf.float16) + tf.constant(1.0, tf.float16)}


def new_axes(x):
    """x[:, None] of a float (keras-hub Llama's mask) and x[:, None, :, None]."""
    scores = tf.reshape(x, (-1, 2, 4))
    return {"y": scores[:, None, :, :] * 2.0, "z": x[:, None, :, None] + 1.0}


def split_pieces(x):
    """keras-hub Llama's rotary halves (a dynamic batch split along a static axis), and an
    unstack along a static axis."""
    pieces = tf.reshape(x, (-1, 2, 4))
    first, second = tf.split(pieces, 2, axis=-1)
    a, b = tf.unstack(pieces, axis=1)
    return {"y": first * 2.0 + second, "z": a - b * 3.0, "w": tf.concat([-second, first], -1)}


# name -> (pattern model, pattern op, params under which the replacement converts)
CASES = {
    "erfc_as_erf": (gelu, "Erfc", IMPLICIT),
    "cast_before_broadcast": (broadcast_cast, "Cast", DYNAMIC),
    "broadcast_to_dropped": (broadcast, "BroadcastTo", DYNAMIC),
    "broadcast_to_as_select": (broadcast_select, "BroadcastTo", DYNAMIC),
    "cast_chain_fused": (cast_chain, "Cast", IMPLICIT),
    "bool_expand_dims_before_cast": (bool_expand_dims, "ExpandDims", DYNAMIC),
    "cast_to_bool_as_comparison": (bool_cast, "Cast", DYNAMIC),
    "cast_from_bool_as_select": (bool_to_number, "Cast", DYNAMIC),
    "bool_fill_as_comparison": (bool_fill, "Fill", DYNAMIC),
    "band_part_as_select": (bands, "MatrixBandPart", DYNAMIC),
    "leading_axes_dropped": (leading_axes, "StridedSlice", DYNAMIC),
    "new_axes_as_expand_dims": (new_axes, "StridedSlice", DYNAMIC),
    "split_as_slices": (split_pieces, "Split", DYNAMIC),
}


def test_every_rewrite_has_a_case():
    assert set(CASES) == set(REWRITES)


@pytest.mark.parametrize("name", list(CASES))
def test_rewrite_equals_native(name):
    """The rewritten model's outputs equal the original's on native TensorFlow: bit for bit
    where the rewrite is exact (NaN where NaN), within the stated bound otherwise."""
    body = CASES[name][0]
    original = model(body)
    rewritten = rewrite_model(original, only=[name])
    assert rewritten.counts.get(name, 0) >= 1
    x = special_values()
    expected, got = outputs(original, x), outputs(rewritten.model, x)
    assert expected.keys() == got.keys()
    for key in expected:
        assert got[key].dtype == expected[key].dtype and got[key].shape == expected[key].shape
        if REWRITES[name].bound == "exact":
            np.testing.assert_array_equal(got[key], expected[key])
        else:
            # gelu's x * erfc(...) scales the bound by |x| <= 6 where erfc is not 0 or 2,
            # and 1 + erfc rounds once more.
            np.testing.assert_allclose(got[key], expected[key], rtol=0, atol=ERFC_BOUND * 8,
                                       err_msg=f"{name}: output {key}")


def test_erfc_rewrite_within_its_bound():
    """erfc_as_erf's stated bound, element by element over erfc's range."""
    x = np.linspace(-10, 10, 20001, dtype=np.float32).reshape(1, -1)
    original = model(lambda x: {"y": tf.math.erfc(x)}, shape=(None, x.shape[1]))
    rewritten = rewrite_model(original, only=["erfc_as_erf"])
    error = np.abs(outputs(rewritten.model, x)["y"] - outputs(original, x)["y"])
    assert error.max() <= ERFC_BOUND


@pytest.mark.parametrize("name", list(CASES))
def test_rules_reject_the_pattern_and_accept_the_replacement(name):
    """Our op rules give the reason the registry states for the pattern node; after the
    rewrite no node fails for it, and more nodes are converted."""
    body, op, params = CASES[name]
    rewrite = REWRITES[name]
    before = ConversionSession(model(body), cache=False).convert(params)
    after = ConversionSession(rewrite_model(model(body), only=[name]).model,
                              cache=False).convert(params)
    assert rewrite.rejects in {n.reason for n in before.unconverted if n.op == op}
    assert rewrite.rejects not in {n.reason for n in after.unconverted}
    assert after.not_converted_top_level < before.not_converted_top_level


def test_broadcast_kept_when_it_widens_the_result():
    """x[B,1] + broadcast_to(c, [B,8]) is [B,8]; without the BroadcastTo it would be [B,1]."""
    def widening(x):
        wide = tf.broadcast_to(tf.constant([[2.0]]), tf.stack([tf.shape(x)[0], 8]))
        return {"y": x + wide}

    assert rewrite_model(model(widening, shape=(None, 1)), ["broadcast_to_dropped"]).counts == {}


def test_broadcast_kept_for_an_unknown_dimension():
    """A target shape Grappler cannot relate to the other operand's proves nothing."""
    def unknown(x):
        wide = tf.broadcast_to(tf.constant([[2.0]]), tf.shape(tf.transpose(x)))
        return {"y": x * tf.transpose(wide)}

    assert rewrite_model(model(unknown), ["broadcast_to_dropped"]).counts == {}


def test_broadcast_select_kept_where_tftrt_would_not_convert_it():
    """A bool BroadcastTo (TF-TRT selects no bools), and one of a static shape (its all-true
    condition would be folded into a constant, which TF-TRT refuses as a condition)."""
    def unconvertible(x):
        return {"y": tf.where(tf.broadcast_to(x[:, :1] > 0.0, tf.shape(x)), x, 1.0),
                "z": tf.transpose(tf.broadcast_to(x[:1, :1], (3, 2)))}

    assert rewrite_model(model(unconvertible), ["broadcast_to_as_select"]).counts == {}


def test_cast_stays_after_a_broadcast_with_other_uses():
    def shared(x):
        wide = tf.broadcast_to(tf.constant([[True, False]]), tf.shape(x))
        return {"y": tf.cast(wide, tf.float32) * x, "z": tf.logical_and(wide, x > 0.0)}

    assert rewrite_model(model(shared, shape=(None, 2)), ["cast_before_broadcast"]).counts == {}


def test_cast_from_bool_kept_for_types_tftrt_does_not_select():
    def wide_types(x):
        return {"y": tf.cast(x > 0.0, tf.int64), "z": tf.cast(x > 0.0, tf.float64)}

    assert rewrite_model(model(wide_types), ["cast_from_bool_as_select"]).counts == {}


def test_lossy_cast_chain_kept():
    """float -> int32 -> float truncates, and float -> half -> float rounds: not fused."""
    def lossy(x):
        return {"y": tf.cast(tf.cast(x, tf.int32), tf.float32),
                "z": tf.cast(tf.cast(x, tf.float16), tf.float32)}

    assert rewrite_model(model(lossy), ["cast_chain_fused"]).counts == {}


def test_band_kept_for_a_dynamic_size():
    """TF-TRT cannot compute the band from a shape (its Range refuses scalar limits), and
    with the last dimensions unknown the band is no constant: the MatrixBandPart stays."""
    def dynamic(x):
        return {"y": tf.linalg.band_part(x[:, :, None] * x[:, None, :], -1, 0)}

    assert rewrite_model(model(dynamic, shape=(None, None)),
                         ["band_part_as_select"]).counts == {}


@pytest.mark.parametrize("body", [
    lambda x: {"y": x[None, :, :] + 1.0},  # widens the result: [1, B, 8], not [B, 8]
    lambda x: {"y": tf.reshape(x, (-1, 2, 4))[0][:, None, :] + tf.ones((2, 2, 4))},  # not leading
], ids=["widening", "not leading"])
def test_leading_axes_kept_where_they_matter(body):
    body.__name__ = "near_miss"
    assert rewrite_model(model(body), ["leading_axes_dropped"]).counts == {}


def test_new_axes_kept_where_the_slice_does_more():
    """A slice that also shrinks (x[:, None, 0]), steps (x[:, None, ::2]) or has an ellipsis."""
    def slicing(x):
        return {"y": x[:, None, 0] + 1.0, "z": x[:, None, ::2] + 1.0, "w": x[..., None] + 1.0}

    assert rewrite_model(model(slicing), ["new_axes_as_expand_dims"]).counts == {}


def test_misplaced_new_axes_fail_the_check(monkeypatch):
    """ExpandDims one axis early ([1, B, 2, 4] for [B, 1, 2, 4]) is caught."""
    from workbench.conversion.rewrites import broadcast

    right = broadcast.new_axis_positions
    monkeypatch.setattr(broadcast, "new_axis_positions",
                        lambda edit, node: [p - 1 for p in right(edit, node) or []] or None)
    with pytest.raises(AssertionError):
        test_rewrite_equals_native("new_axes_as_expand_dims")


def test_split_kept_where_slices_would_not_help():
    """Along the dynamic axis (no static piece size), unevenly, in int64 (TF-TRT slices no
    int64), and a fully static Split (TF-TRT's own converter takes it)."""
    def splits(x):
        halves = tf.split(x, 2, axis=0)
        uneven = tf.split(x, [3, 5], axis=1)
        wide = tf.split(tf.cast(tf.reshape(x, (-1, 2, 4)), tf.int64), 2, axis=-1)
        fixed = tf.split(tf.ones((2, 8)) * 3.0, 2, axis=1)
        return {"y": halves[0] + halves[1], "z": uneven[0][:, :1] + uneven[1],
                "w": wide[0] + wide[1], "v": fixed[0] + fixed[1]}

    assert rewrite_model(model(splits), ["split_as_slices"]).counts == {}


def test_misplaced_pieces_fail_the_check(monkeypatch):
    """Pieces of half the size ([B, 2, 1] for [B, 2, 2]) are caught."""
    from workbench.conversion.rewrites import splits

    right = splits.split_pieces
    monkeypatch.setattr(splits, "split_pieces", lambda edit, node: (
        (found := right(edit, node)) and found._replace(size=max(1, found.size // 2))))
    with pytest.raises(AssertionError):
        test_rewrite_equals_native("split_as_slices")


def test_keras_causal_mask_converts_into_one_engine():
    """Keras' causal mask, with the bool Fill rewrites it needs first: one engine, and the
    same outputs as the original."""
    original = model(causal_mask)
    rewritten = rewrite_model(original)
    assert set(rewritten.counts) >= {"bool_fill_as_comparison", "band_part_as_select",
                                     "leading_axes_dropped"}
    after = ConversionSession(rewritten.model, cache=False).convert(DYNAMIC)
    assert len(after.engines) == 1
    assert not {"MatrixBandPart", "StridedSlice"} & {n.op for n in after.unconverted}
    x = special_values(32)
    np.testing.assert_array_equal(outputs(rewritten.model, x)["y"], outputs(original, x)["y"])


def test_fill_of_a_computed_bool_kept():
    def computed(x):
        return {"y": tf.where(tf.fill(tf.shape(x), x[0, 0] > 0.0), x, 1.0)}

    assert rewrite_model(model(computed), ["bool_fill_as_comparison"]).counts == {}


def test_a_broken_equivalence_fails_the_check(monkeypatch):
    """The comparison with native catches a replacement that is not equivalent: here Erfc
    made `1 + Erf(x)` instead of `1 - Erf(x)`."""
    from workbench.conversion.rewrites import graph_edit as rewrite_module

    retype = rewrite_module.GraphEdit.retype

    def wrong(self, node_def, op, inputs, **types):
        retype(self, node_def, "AddV2" if op == "Sub" else op, inputs, **types)

    monkeypatch.setattr(rewrite_module.GraphEdit, "retype", wrong)
    with pytest.raises(AssertionError):
        test_rewrite_equals_native("erfc_as_erf")


def test_a_broken_band_fails_the_check(monkeypatch):
    """A band with its limits swapped (lower for upper) is caught too."""
    from workbench.conversion.rewrites import band

    right = band.band_matrix
    monkeypatch.setattr(band, "band_matrix", lambda m, n, lower, upper: right(m, n, upper, lower))
    with pytest.raises(AssertionError):
        test_rewrite_equals_native("band_part_as_select")


@pytest.mark.parametrize("name, broken", [
    ("cast_from_bool_as_select", lambda inputs: inputs[:1] + inputs[2:0:-1]),  # 0 and 1 swapped
    ("broadcast_to_as_select", lambda inputs: inputs[1:2]),  # x itself, not broadcast
])
def test_a_broken_select_fails_the_check(monkeypatch, name, broken):
    from workbench.conversion.rewrites import graph_edit as rewrite_module

    retype = rewrite_module.GraphEdit.retype

    def wrong(self, node_def, op, inputs, **types):
        if op == "SelectV2":
            op, inputs = ("SelectV2", broken(inputs)) if len(broken(inputs)) == 3 else \
                ("Identity", broken(inputs))
        retype(self, node_def, op, inputs, **types)

    monkeypatch.setattr(rewrite_module.GraphEdit, "retype", wrong)
    with pytest.raises(AssertionError):
        test_rewrite_equals_native(name)


def test_a_model_with_a_custom_gradient_saves_rewritten(tmp_path):
    """keras-hub's Llama: a custom gradient whose function captures a tensor of the graph.
    The rewritten model is for inference, so its gradients are not saved; saving them made
    TensorFlow refuse ("invalid capture ... when saving custom gradients")."""
    scale_variable = tf.Variable(1.5)

    def captured_gradient(x):
        scale = scale_variable * 2.0

        @tf.custom_gradient
        def scaled(v):
            return v * scale, lambda dy: dy * scale
        return {"y": scaled(tf.math.erfc(x))}

    original = model(captured_gradient)
    rewritten = rewrite_model(original, ["erfc_as_erf"])
    path = save_rewritten(rewritten.model, tmp_path / "rewritten")
    function = tf.saved_model.load(str(path)).signatures["serving_default"]
    x = special_values()
    np.testing.assert_allclose(function(x=tf.constant(x))["y"].numpy(),
                               outputs(original, x)["y"], rtol=0, atol=ERFC_BOUND * 8)


def test_saved_rewritten_model_loads_in_plain_tensorflow(tmp_path):
    """Same signature key, input and output names; same outputs; and converting the SavedModel
    gives the engines the in-memory rewritten model gave."""
    original = model(gelu)
    rewritten = rewrite_model(original)
    path = save_rewritten(rewritten.model, tmp_path / "rewritten")
    function = tf.saved_model.load(str(path)).signatures["serving_default"]
    assert list(function.structured_input_signature[1]) == ["x"]
    assert sorted(function.structured_outputs) == ["y", "z"]
    x = special_values()
    loaded = function(x=tf.constant(x))
    for key, value in outputs(rewritten.model, x).items():
        np.testing.assert_array_equal(loaded[key].numpy(), value)
    in_memory = ConversionSession(rewritten.model, cache=False).convert(IMPLICIT)
    saved = ConversionSession.open(path, cache=False).convert(IMPLICIT)
    assert [sorted(e.native_ops.items()) for e in saved.engines] == \
        [sorted(e.native_ops.items()) for e in in_memory.engines]


def test_unknown_rewrite_name_says_the_known_ones():
    with pytest.raises(WorkbenchError, match="unknown rewrite nope; the rewrites are: erfc_as"):
        select(["nope"])


def test_rewrites_are_not_applied_by_convert():
    """convert() converts the model as it is: the Erfc stays rejected."""
    result = ConversionSession(model(gelu), cache=False).convert(IMPLICIT)
    assert any(n.op == "Erfc" for n in result.unconverted)


def two_gelus(x):
    """Dense -> exact GELU -> Dense -> exact GELU -> Dense: each Erfc splits the engine."""
    rng = np.random.default_rng(0)
    h = x
    for _ in range(2):
        h = exact_gelu(h @ tf.constant(rng.normal(size=(8, 8)).astype(np.float32)))
    return {"y": h @ tf.constant(rng.normal(size=(8, 8)).astype(np.float32))}


def test_advice_offers_the_rewrites_like_a_setting():
    from workbench.conversion.advice import advise

    session = ConversionSession(model(two_gelus), cache=False)
    params = ConversionParams()
    now = session.convert(params)
    entries = [a for a in advise(session, params) if a.setting == "rewrites"]
    assert len(now.engines) == 3
    assert [(a.value, a.engines) for a in entries] == [(("erfc_as_erf",), 1)]
    assert "3 engines -> 1" in entries[0].why and "rejects Erfc here" in entries[0].why
    assert entries[0].to_json()["value"] == ["erfc_as_erf"]
    assert session.convert(params).engines == now.engines  # the session's model is untouched


def test_no_rewrite_advice_without_a_pattern():
    from workbench.conversion.advice import advise

    def plain(x):
        return {"y": tf.nn.relu(x) * 2.0 + 1.0}

    session = ConversionSession(model(plain), cache=False)
    assert not [a for a in advise(session, IMPLICIT) if a.setting == "rewrites"]
    assert session._rewritten == {}  # nothing frozen or rewritten for it


@pytest.fixture(scope="module")
def gelu_saved_model(tmp_path_factory):
    module = tf.Module()
    module.serve = tf.function(two_gelus,
                               input_signature=[tf.TensorSpec((None, 8), tf.float32, name="x")])
    path = tmp_path_factory.mktemp("rewrites") / "gelus"
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    return path


def test_cli_rewrite_json(gelu_saved_model, tmp_path, capsys):
    import json

    from workbench.cli import main

    out = tmp_path / "rewritten"
    assert main(["rewrite", str(gelu_saved_model), "-o", str(out), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [(r["name"], r["matches"]) for r in document["rewrites"]] == [("erfc_as_erf", 2)]
    assert document["conversion"]["before"]["engines"] == 3
    assert document["conversion"]["after"]["engines"] == 1
    (checked,) = document["outputs_checked"]
    assert checked["output"] == "y" and checked["max_rel_error"] <= 1e-6
    assert (out / "saved_model.pb").is_file()


@pytest.mark.parametrize("argv, message", [
    (["--only", "nope"], "unknown rewrite nope"),
    (["--only", "broadcast_to_dropped"], "nothing to rewrite"),
])
def test_cli_rewrite_errors(gelu_saved_model, tmp_path, capsys, argv, message):
    from workbench.cli import main

    assert main(["rewrite", str(gelu_saved_model), "-o", str(tmp_path / "x"), *argv]) == 2
    assert message in capsys.readouterr().err


def test_cli_help_names_every_rewrite(capsys):
    from workbench.cli import main

    with pytest.raises(SystemExit):
        main(["rewrite", "--help"])
    text = capsys.readouterr().out
    assert [name for name in REWRITES if name not in text] == []


def test_cli_rewrite_refuses_an_existing_directory(gelu_saved_model, tmp_path, capsys):
    from workbench.cli import main

    assert main(["rewrite", str(gelu_saved_model), "-o", str(tmp_path)]) == 2
    assert "exists" in capsys.readouterr().err


def test_whatif_names_the_rewrites_per_rejected_op():
    from workbench.conversion.whatif import blocking_op_types

    session = ConversionSession(model(two_gelus), cache=False)
    table = blocking_op_types(session, IMPLICIT).set_index("op")
    assert table.loc["Erfc", "rewrites"] == "erfc_as_erf"
    dynamic = blocking_op_types(ConversionSession(model(bool_cast), cache=False), DYNAMIC)
    rewrites = dict(zip(dynamic.op, dynamic.rewrites, strict=True))
    assert rewrites["Cast"] == "cast_to_bool_as_comparison"  # a Cast not after a Cast


@pytest.mark.slow
def test_tftrt_script_of_a_rewritten_model_converts_the_rewritten_model(gelu_saved_model,
                                                                       tmp_path):
    """The TF-TRT script exported from a rewritten session converts the rewritten model,
    written beside it: run with the workbench's trt_convert (engines on ONNX Runtime), it
    makes the rewritten model's one engine, where the original has three, and the saved
    conversion gives the rewritten model's outputs."""
    import os
    import subprocess
    import sys

    from conftest import REPO

    import workbench
    from workbench.checks.export_formats import TFTRT_IMPORT, WORKBENCH_IMPORT, export
    from workbench.conversion.summary import summary_lines

    session = ConversionSession.open(gelu_saved_model, cache=False).rewritten()
    script = export(session, "tftrt", tmp_path / "convert.py", IMPLICIT)
    text = script.read_text()
    assert "verified rewrites applied (erfc_as_erf (2)" in text
    assert f"INPUT_SAVED_MODEL_DIR = {str(tmp_path / 'convert_model')!r}" in text
    script.write_text(text.replace(TFTRT_IMPORT, WORKBENCH_IMPORT))
    run = subprocess.run([sys.executable, str(script), str(tmp_path / "converted")],
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert run.returncode == 0, run.stderr[-2000:]
    engines = [line.strip() for line in run.stdout.splitlines() if line.startswith("TRTEngineOp")]
    expected = summary_lines(session.convert(IMPLICIT))
    assert len(engines) == 1
    assert engines == [line.strip() for line in expected if line.startswith("TRTEngineOp")]
    x = np.random.default_rng(0).normal(size=(4, 8)).astype(np.float32)
    np.testing.assert_allclose(workbench.load(tmp_path / "converted")(x)["y"],
                               outputs(session.loaded, x)["y"], rtol=1e-5, atol=1e-5)
