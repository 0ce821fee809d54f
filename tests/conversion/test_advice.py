"""Advice on every knob: which TF-TRT settings would convert better, measured, ranked by gain."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import sample_models
from tests.conftest import run_cli
from workbench.conversion.advice import Advice, advise
from workbench.conversion.conversion_report import ConversionReport
from workbench.conversion.params import ConversionParams
from workbench.conversion.session import ConversionSession

_SESSIONS: dict[tuple[str, str | None], ConversionSession] = {}
CONTRACT_KEYS = {"setting", "value", "engines", "percent_converted", "why"}


def session_for(name: str, prepare_for: str | None = None) -> ConversionSession:
    if (name, prepare_for) not in _SESSIONS:
        _SESSIONS[name, prepare_for] = ConversionSession.open(sample_models.build(name),
                                                              prepare_for=prepare_for)
    return _SESSIONS[name, prepare_for]


def assert_measured(model: object, params: ConversionParams, advice: list[Advice],
                    prepare_for: str | None = None) -> None:
    """Each advice's numbers are what a separate conversion with its setting gives (for the
    rewrites, a separate conversion of the rewritten model)."""
    fresh = ConversionSession.open(model, prepare_for=prepare_for)
    for entry in advice:
        converted = fresh.rewritten() if entry.setting == "rewrites" else fresh
        result = converted.convert(replace(params, **entry.params))
        largest = max((e.native_node_count for e in result.engines), default=0)
        assert (entry.engines, entry.percent_converted, entry.largest_engine,
                entry.native_nodes) == (len(result.engines), result.percent_converted, largest,
                                        result.not_converted_top_level), entry


def test_tiny_bert_at_the_defaults_gets_dynamic_shape_first() -> None:
    session = session_for("tiny_bert")
    params = ConversionParams()
    advice = advise(session, params)
    first = advice[0]
    assert (first.setting, first.value) == ("use_dynamic_shape", True)
    assert first.params == {"use_dynamic_shape": True, "dynamic_shape_profile_strategy": "Range"}
    now = session.convert(params)
    assert first.percent_converted > now.percent_converted + 40
    assert first.engines < len(now.engines)
    # The reason names what implicit batch rejects in this very model.
    assert first.why.startswith("implicit batch rejects ")
    assert "Shape" in first.why and "inputs of rank < 2" in first.why
    assert_measured(sample_models.build("tiny_bert"), params, advice)


def test_resnet50_gets_no_advice() -> None:
    """One engine holding all but the inputs and outputs: nothing converts more."""
    assert advise(session_for("resnet50"), ConversionParams()) == []


def test_detector_advice_matches_its_rejected_ops() -> None:
    """Only CombinedNonMaxSuppression of its rejections depends on a setting (implicit batch);
    the uint8 Cast, the resize and the Unpack are rejected in every mode and precision."""
    session = session_for("detector")
    params = ConversionParams()
    advice = advise(session, params)
    assert [(a.setting, a.value) for a in advice] == [("use_dynamic_shape", True)]
    assert advice[0].why.startswith("implicit batch rejects CombinedNonMaxSuppression: 1 node;")
    assert_measured(sample_models.build("detector"), params, advice)


def test_denylist_advice_is_measured() -> None:
    """Taking a denylisted op off the denylist first; a denylisting that trades a few nodes
    for fewer engines (better than any threshold) last. On the CPU's graph: prepared for a GPU,
    the layout optimizer's Transposes leave no such trade-off in the detector."""
    session = session_for("detector", "cpu")
    params = ConversionParams(denylist=("Conv2D",))
    advice = advise(session, params)
    first, last = advice[0], advice[-1]
    assert (first.setting, first.value, first.trade_off) == ("denylist", (), False)
    assert first.why.startswith("the denylist rejects Conv2D: 7 nodes; 8 engines -> 3")
    assert (last.setting, last.value, last.trade_off) == ("denylist", ("Conv2D", "Relu"), True)
    assert last.engines < len(session.convert(params).engines)
    keys = [(a.native_nodes, a.engines, -a.largest_engine) for a in advice if not a.trade_off]
    assert keys == sorted(keys)  # largest gain first
    assert_measured(sample_models.build("detector"), params, advice, "cpu")


def test_engine_limit_advice_is_measured() -> None:
    session = session_for("detector")
    params = ConversionParams(max_engines=1)
    advice = advise(session, params)
    assert (advice[0].setting, advice[0].value, advice[0].engines) == ("max_engines", 3, 3)
    assert advice[0].why.startswith(
        "the engine limit TF_TRT_MAX_ALLOWED_ENGINES=1 leaves 2 more segments (38 nodes)")
    assert_measured(sample_models.build("detector"), params, advice)


@pytest.fixture(scope="module")
def fake_quantized(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """conv -> relu -> FakeQuant -> conv -> relu: the FakeQuant has a converter in INT8 only."""
    import tensorflow as tf

    class FakeQuantized(tf.Module):
        def __init__(self):
            super().__init__()
            rng = np.random.default_rng(0)
            self.f1 = tf.constant(rng.normal(size=(3, 3, 3, 4)).astype("float32"))
            self.f2 = tf.constant(rng.normal(size=(3, 3, 4, 4)).astype("float32"))

        @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 3], tf.float32, name="x")])
        def serve(self, x):
            h = tf.nn.relu(tf.nn.conv2d(x, self.f1, 1, "SAME"))
            h = tf.quantization.fake_quant_with_min_max_args(h, min=-6.0, max=6.0)
            return {"y": tf.nn.relu(tf.nn.conv2d(h, self.f2, 1, "SAME"))}

    module = FakeQuantized()
    path = tmp_path_factory.mktemp("advice") / "fake_quantized"
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    return path


def test_int8_advice_where_a_quantization_op_splits_the_engines(fake_quantized: Path) -> None:
    session = ConversionSession.open(str(fake_quantized))
    params = ConversionParams()
    assert len(session.convert(params).engines) == 2
    advice = advise(session, params)
    int8 = next(a for a in advice if a.setting == "precision_mode")
    assert (int8.value, int8.engines) == ("INT8", 1)
    assert int8.why.startswith("FP32 rejects FakeQuantWithMinMaxArgs: 1 node; 2 engines -> 1")
    assert "FP16" not in {a.value for a in advice}  # no Cast to float: FP16 segments as FP32
    assert_measured(str(fake_quantized), params, advice)


def test_keras_multi_head_attention_encoder_gets_dynamic_shape_first() -> None:
    """A keras-hub-like BERT block (keras.layers.MultiHeadAttention: Einsum, Softmax, masks)."""
    import tensorflow as tf

    keras = tf.keras
    ids = keras.Input((None,), dtype="int32", name="input_word_ids")
    mask = keras.Input((None,), dtype="int32", name="input_mask")
    x = keras.layers.Embedding(1000, 32)(ids)
    attention_mask = keras.layers.Lambda(
        lambda m: tf.cast(m[:, None, :], tf.bool))(mask)
    for _ in range(2):
        attended = keras.layers.MultiHeadAttention(num_heads=2, key_dim=16)(
            x, x, attention_mask=attention_mask)
        x = keras.layers.LayerNormalization()(x + attended)
        x = keras.layers.LayerNormalization()(x + keras.layers.Dense(32)(
            keras.layers.Dense(64, activation="gelu")(x)))
    model = keras.Model([ids, mask], keras.layers.Dense(2)(x[:, 0]))
    session = ConversionSession.open(model)
    params = ConversionParams()
    advice = advise(session, params)
    assert (advice[0].setting, advice[0].value) == ("use_dynamic_shape", True)
    assert "implicit batch rejects" in advice[0].why
    assert advice[0].percent_converted > session.convert(params).percent_converted + 20


def test_report_carries_the_advice() -> None:
    session = session_for("detector")
    params = ConversionParams()
    advice = advise(session, params)
    report = ConversionReport(session.convert(params), advice)
    assert list(report.advice["setting"]) == ["use_dynamic_shape"]
    assert report.to_dict()["advice"] == [a.to_json() for a in advice]
    assert "advice" not in ConversionReport(session.convert(params)).to_dict()


def cli_flags(params: dict) -> list[str]:
    """The `convert` options that set `params` (DESIGN.md's CLI)."""
    base = {"denylist": "Conv2D", **params}
    flags = ["--denylist", ",".join(base["denylist"]) if isinstance(base["denylist"], list)
             else base["denylist"]]
    if base.get("use_dynamic_shape"):
        flags += ["--use-dynamic-shape", "--profile-strategy",
                  base["dynamic_shape_profile_strategy"]]
    if "precision_mode" in base:
        flags += ["--precision", base["precision_mode"]]
    if "max_engines" in base:
        flags += ["--max-engines", str(base["max_engines"])]
    return flags


def test_cli_json_advice_equals_converting_with_the_setting() -> None:
    """The contract: `convert --json` lists `advice`; running the CLI with an entry's setting
    gives exactly its engines and percent converted."""
    path = str(sample_models.build("detector"))
    done = run_cli("convert", path, "--json", "--denylist", "Conv2D")
    assert done.returncode == 0, done.stderr
    advice = json.loads(done.stdout)["advice"]
    assert advice and all(CONTRACT_KEYS <= set(entry) for entry in advice)
    assert advice[0]["setting"] == "denylist" and advice[0]["value"] == []
    assert {e["setting"] for e in advice} >= {"denylist", "use_dynamic_shape"}
    # One entry of each kind (the API test above measures every entry).
    for entry in [advice[0], next(e for e in advice if e["setting"] == "use_dynamic_shape")]:
        then = run_cli("convert", path, "--json", *cli_flags(entry["params"]))
        assert then.returncode == 0, then.stderr
        document = json.loads(then.stdout)
        assert (len(document["engines"]), document["percent_converted"]) == (
            entry["engines"], entry["percent_converted"]), entry


def test_summary_tab_and_html_report_open_with_the_advice() -> None:
    from workbench.ui.tabs import SummaryTab
    from workbench.viz.html_report import html_report
    from workbench.viz.view import build_view

    session = session_for("detector")
    view = build_view(session, ConversionParams())
    why = view.advice[0].why
    tab = SummaryTab()
    tab.update(view)
    assert tab.html.value.startswith("<b>Advice</b>")
    assert tab.html.value.index("use dynamic shape") < tab.html.value.index("<b>Engines</b>")
    page = html_report(session, ConversionParams())
    advice_section = page[page.index('<section id="advice">'):]
    assert advice_section.index("use_dynamic_shape") < advice_section.index("</section>")
    assert why.split(";")[0] in page


def test_advice_table_lists_several_values_with_a_space() -> None:
    """A denylist or a set of rewrites reads `Cast, Shape` in the Advice table, not `Cast,Shape`
    (a run-on word the column cannot wrap)."""
    from workbench.ui.tabs import advice_html

    several = Advice("rewrites", ("erfc_as_erf", "bool_fill_as_comparison"), 1, 96.7, 40, 2,
                     "fewer rejected ops")
    assert several.value_text == "erfc_as_erf, bool_fill_as_comparison"
    assert "erfc_as_erf, bool_fill_as_comparison" in advice_html((several,)).replace("<wbr>", "")
    assert replace(several, value=()).value_text == "(none)"
    switch = advice_html((Advice("use_dynamic_shape", True, 7, 92.4, 51, 20, "implicit batch"),))
    assert "<td>on</td>" in switch and "True" not in switch  # as the checkbox says it


def test_converter_report_has_the_advice() -> None:
    from workbench import trt_convert as trt

    converter = trt.TrtGraphConverterV2(
        input_saved_model_dir=str(sample_models.build("detector")))
    converter.convert()
    assert [a.setting for a in converter.advice] == ["use_dynamic_shape"]
    frame = converter.report.advice
    assert list(frame["setting"]) == ["use_dynamic_shape"]
    assert frame["why"][0].startswith("implicit batch rejects CombinedNonMaxSuppression")
    assert json.loads(converter.report.to_json())["advice"][0]["value"] is True
