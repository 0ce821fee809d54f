"""TF-TRT's text reports, CSV, summary() lines, DataFrames and JSON from hand-made results."""

from __future__ import annotations

import json

import pytest

from workbench.conversion.conversion_report import (
    ConversionReport,
    detailed_report_setting,
    nonconversion_report,
    write_nonconversion_csv,
)
from workbench.conversion.params import ConversionParams
from workbench.conversion.result import ConversionResult, EngineInfo, UnconvertedNode
from workbench.conversion.summary import summary_lines
from workbench.errors import ConversionParamsError

EXCLUDED = "excluded by segmenter option. Most likely an input or output node."
HASHES = "#" * 80
DASHES = "-" * 80
LINK = (
    "For more information see https://docs.nvidia.com/deeplearning/frameworks/"
    "tf-trt-user-guide/index.html#supported-ops."
)

# The sample report of the user guide (§6.3.2), as the segmenter's map.
GUIDE_MAP = {
    "Cast": {
        "Cast op is not supported - Allowed input dtypes: [float, half]. Received: int32": 1,
        "Failed to convert at least one input to a TRT_TensorOrWeights: "
        "Unsupported tensorflow data type uint8": 1,
    },
    "CombinedNonMaxSuppression": {"Op type CombinedNonMaxSuppression is not supported.": 1},
    "Identity": {EXCLUDED: 4},
    "NoOp": {"Op type NoOp is not supported.": 2},
    "Placeholder": {EXCLUDED: 1},
    "ResizeBilinear": {"Cannot Convert Bilinear Resize when align_corners=False": 8},
    "Unpack": {"The argument `strided_slice_spec` is `absl::nullopt` with "
               "`dynamic_input_size_indices` non empty.": 1},
}


def _engine(name: str, **overrides) -> EngineInfo:
    fields = dict(
        name=name,
        nodes=("a", "b"),
        native_ops={"Relu": 1, "Const": 2, "Conv2D": 1},
        native_node_count=4,
        effective_size=2,
        input_dtypes=("float32",),
        output_dtypes=("float32",),
        input_shapes=((-1, 28, 28, 1),),
        output_shapes=((-1, 10),),
        inputs=("x:0",),
        outputs=("b:0",),
    )
    fields.update(overrides)
    return EngineInfo(**fields)


def _result(engines, not_converted=3, nonconversion=None, **kwargs) -> ConversionResult:
    return ConversionResult(
        params=kwargs.pop("params", ConversionParams()),
        engines=list(engines),
        unconverted=kwargs.pop("unconverted", []),
        nonconversion=nonconversion if nonconversion is not None else {},
        not_converted_top_level=not_converted,
        **kwargs,
    )


# ----------------------------------------------------------------------------- text report


def test_short_report_matches_tftrt_layout():
    text = nonconversion_report({"NoOp": {"Op type NoOp is not supported.": 2},
                                 "Placeholder": {EXCLUDED: 1}}, detailed=False)
    assert text == (
        f"\n\n{HASHES}\nTensorRT unsupported/non-converted OP Report:"
        "\n\t- NoOp -> 2x"
        "\n\t- Placeholder -> 1x"
        f"\n{DASHES}"
        "\n\t- Total nonconverted OPs: 3"
        "\n\t- Total nonconverted OP Types: 2"
        f"\n{LINK}\n{HASHES}\n"
    )


def test_detailed_report_reproduces_the_user_guide_sample():
    text = nonconversion_report(GUIDE_MAP, detailed=True)
    assert text == (
        f"\n\n{HASHES}\nTensorRT unsupported/non-converted OP Report:"
        "\n\t- ResizeBilinear -> 8x"
        "\n\t\t- [Count: 8x] Cannot Convert Bilinear Resize when align_corners=False\n"
        "\n\t- Identity -> 4x"
        f"\n\t\t- [Count: 4x] {EXCLUDED}\n"
        "\n\t- Cast -> 2x"
        "\n\t\t- [Count: 1x] Cast op is not supported - Allowed input dtypes: [float, half]."
        " Received: int32"
        "\n\t\t- [Count: 1x] Failed to convert at least one input to a TRT_TensorOrWeights:"
        " Unsupported tensorflow data type uint8\n"
        "\n\t- NoOp -> 2x"
        "\n\t\t- [Count: 2x] Op type NoOp is not supported.\n"
        "\n\t- CombinedNonMaxSuppression -> 1x"
        "\n\t\t- [Count: 1x] Op type CombinedNonMaxSuppression is not supported.\n"
        "\n\t- Placeholder -> 1x"
        f"\n\t\t- [Count: 1x] {EXCLUDED}\n"
        "\n\t- Unpack -> 1x"
        "\n\t\t- [Count: 1x] The argument `strided_slice_spec` is `absl::nullopt` with"
        " `dynamic_input_size_indices` non empty.\n"
        f"\n{DASHES}"
        "\n\t- Total nonconverted OPs: 19"
        "\n\t- Total nonconverted OP Types: 7"
        f"\n{LINK}\n{HASHES}\n"
    )


def test_report_rules_are_80_characters_and_ops_sort_by_total_not_by_reason():
    nonconversion = {
        "A": {"r1": 1, "r2": 1, "r3": 1},  # total 3 beats B's single reason of 2
        "B": {"r": 2},
        "C": {"z": 5, "y": 5, "x": 9},  # reasons: 9 first, then the tie alphabetically
    }
    lines = nonconversion_report(nonconversion, detailed=True).split("\n")
    assert lines[2] == "#" * 80 and lines[-2] == "#" * 80
    assert "-" * 80 in lines
    ops = [line for line in lines if line.startswith("\t- ") and "->" in line]
    assert ops == ["\t- C -> 19x", "\t- A -> 3x", "\t- B -> 2x"]
    c_reasons = lines[lines.index("\t- C -> 19x") + 1: lines.index("\t- C -> 19x") + 4]
    assert c_reasons == ["\t\t- [Count: 9x] x", "\t\t- [Count: 5x] y", "\t\t- [Count: 5x] z"]
    assert "\t- Total nonconverted OPs: 24" in lines


def test_empty_report_still_prints_totals():
    text = nonconversion_report({}, detailed=True)
    assert "\t- Total nonconverted OPs: 0\n\t- Total nonconverted OP Types: 0\n" in text


def test_detailed_report_skips_zero_count_reasons_but_counts_the_type():
    text = nonconversion_report({"NoOp": {"never": 0, "seen": 1}}, detailed=True)
    assert "never" not in text
    assert "\n\t- NoOp -> 1x\n\t\t- [Count: 1x] seen\n" in text


# ----------------------------------------------------------------------------- env var


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, (False, None)),
        ("", (False, None)),
        ("0", (False, None)),
        ("-1", (False, None)),
        ("1", (True, None)),
        ("2", (True, None)),
        ("5-3", (True, None)),  # std::stoi stops at the '-'
        ("1.0", (True, "1.0")),  # not only digits and '-': a CSV path
        ("/tmp/x.csv", (True, "/tmp/x.csv")),
        ("report", (True, "report")),
    ],
)
def test_detailed_report_setting(value, expected):
    assert detailed_report_setting(value) == expected


@pytest.mark.parametrize("value", ["-", "--1", "99999999999"])
def test_unparsable_numeric_setting_raises_a_clear_error(value):
    with pytest.raises(ConversionParamsError, match="TF_TRT_SHOW_DETAILED_REPORT"):
        detailed_report_setting(value)


# ----------------------------------------------------------------------------- CSV


def test_csv_rows_are_in_map_order_and_unescaped(tmp_path):
    path = tmp_path / "report.csv"
    nonconversion = {"NoOp": {"b reason": 2, "a reason": 1}, "Cast": {"x|y": 3}}
    assert write_nonconversion_csv(nonconversion, str(path)) is None
    assert path.read_text(encoding="utf-8") == (
        "OP Name|Reason|Count\n"
        "Cast|x|y|3\n"
        "NoOp|a reason|1\n"
        "NoOp|b reason|2\n"
    )


def test_csv_overwrites_an_existing_file(tmp_path):
    path = tmp_path / "report.csv"
    path.write_text("old content that is longer than the new one\n" * 5)
    assert write_nonconversion_csv({}, str(path)) is None
    assert path.read_text() == "OP Name|Reason|Count\n"


def test_csv_unwritable_path_returns_tftrt_message(tmp_path):
    bad = str(tmp_path / "missing_dir" / "report.csv")
    message = write_nonconversion_csv(GUIDE_MAP, bad)
    assert message == (
        "Problem encountered while generating the TF-TRT Non-Conversion Report in CSV Format:\n"
        f"Failed to open output file: `{bad}`"
    )
    assert write_nonconversion_csv(GUIDE_MAP, str(tmp_path)).endswith(
        f"Failed to open output file: `{tmp_path}`"
    )


# ----------------------------------------------------------------------------- summary()


HEADER_160 = (
    "TRTEngineOP Name                 Device        # Nodes # Inputs      # Outputs     "
    "Input DTypes       Output Dtypes      Input Shapes       Output Shapes     "
)


def test_summary_header_columns_at_160():
    lines = summary_lines(_result([_engine("TRTEngineOp_000_000")]))
    assert lines[0] == HEADER_160
    assert len(lines[0]) == 158  # the widths' integer parts add up to 158, not 160
    starts = [lines[0].index(h) for h in ("Device", "# Nodes", "# Inputs", "# Outputs",
                                          "Input DTypes", "Output Dtypes", "Input Shapes",
                                          "Output Shapes")]
    assert starts == [33, 47, 55, 69, 83, 102, 121, 140]
    assert lines[1] == "=" * 160


def test_summary_header_columns_at_200():
    lines = summary_lines(_result([]), line_length=200)
    header = lines[0]
    assert len(header) == 200
    starts = [header.index(h) for h in ("Device", "# Nodes", "# Inputs", "Output Shapes")]
    assert starts == [41, 59, 69, 177]
    assert lines[1] == "=" * 200


def test_single_engine_summary_has_no_separator_and_sorted_histogram():
    engine = _engine("TRTEngineOp_000_000")
    lines = summary_lines(_result([engine], not_converted=3))
    row = (
        "TRTEngineOp_000_000              device:GPU:0  4       1             1             "
        "['float32']        ['float32']        [[-1, 28, 28, 1]]  [[-1, 10]]        "
    )
    assert lines == [
        HEADER_160,
        "=" * 160,
        row,
        "",
        "\t- Const: 2x",
        "\t- Conv2D: 1x",
        "\t- Relu: 1x",
        "\n" + "=" * 160,
        "[*] Total number of TensorRT engines: 1",
        "[*] % of OPs Converted: 57.14% [4/7]\n",
    ]


def test_multiple_engines_are_sorted_and_separated():
    engines = [_engine("TRTEngineOp_000_001", native_node_count=919),
               _engine("TRTEngineOp_000_000", native_node_count=9)]
    lines = summary_lines(_result(engines, not_converted=25), detailed=False)
    separator = "\n" + "-" * 40 + "\n"
    assert lines[2] == separator and lines[4] == separator
    assert lines[3].startswith("TRTEngineOp_000_000 ")
    assert lines[5].startswith("TRTEngineOp_000_001 ")
    assert lines[3][47:55] == "9       " and lines[5][47:55] == "919     "
    # The user guide's footer: 97.38% [928/953].
    assert lines[6:] == [
        "\n" + "=" * 160,
        "[*] Total number of TensorRT engines: 2",
        "[*] % of OPs Converted: 97.38% [928/953]\n",
    ]


def test_detailed_false_omits_histograms():
    lines = summary_lines(_result([_engine("E")]), detailed=False)
    assert not any(line.startswith("\t- ") for line in lines)
    assert "" not in lines


def test_overflowing_cells_are_cut_with_ellipsis():
    engine = _engine(
        "TRTEngineOp_with_a_very_long_name_000",
        input_dtypes=("float32", "float32", "int32"),
        input_shapes=((-1, 224, 224, 3), (-1, 10), None),
    )
    row = summary_lines(_result([engine]), detailed=False)[2]
    assert row[:33] == "TRTEngineOp_with_a_very_long ... "
    assert row[83:101] == "['float32', 'f ..."
    assert row[121:139] == "[[-1, 224, 224 ..."
    assert row[55:57] == "3 "
    assert len(row) == 158


def test_cell_that_exactly_fills_its_column_is_not_cut():
    name = "N" * 32
    row = summary_lines(_result([_engine(name)]), detailed=False)[2]
    assert row.startswith(name + " device:GPU:0")


def test_unknown_rank_prints_as_empty_list_and_device_is_last_component():
    engine = _engine("E", output_shapes=(None,), device="/job:localhost/device:GPU:1")
    row = summary_lines(_result([engine]), detailed=False)[2]
    assert row[33:46] == "device:GPU:1 "
    assert row[140:] == "[[]]" + " " * 14


def test_zero_engines_summary():
    lines = summary_lines(_result([], not_converted=5))
    assert lines[2:] == [
        "\n" + "=" * 160,
        "[*] Total number of TensorRT engines: 0",
        "[*] % of OPs Converted: 0.00% [0/5]\n",
    ]


def test_line_length_below_160_is_rejected_with_tftrt_wording():
    with pytest.raises(ConversionParamsError) as info:
        summary_lines(_result([]), line_length=159)
    assert str(info.value) == "Invalid `line_length` value has been received: 159. Minimum: 160."
    assert isinstance(info.value, ValueError)


# ----------------------------------------------------------------------------- data and JSON


def _full_result() -> ConversionResult:
    return _result(
        [_engine("TRTEngineOp_000_001", nodes=("c", "d", "e"), native_node_count=5,
                 input_shapes=((-3, 8),), output_shapes=(None,)),
         _engine("TRTEngineOp_000_000")],
        not_converted=4,
        nonconversion=GUIDE_MAP,
        unconverted=[UnconvertedNode("x", "Placeholder", EXCLUDED),
                     UnconvertedNode("tiny", "Relu", "segment too small", False)],
        params=ConversionParams(max_engines=7, precision_mode="FP16", denylist=("Conv2D",),
                                max_workspace_size_bytes=1 << 30),
        model="/models/m",
    )


def test_json_document_structure_and_values():
    doc = ConversionReport(_full_result()).to_dict()
    assert list(doc) == ["model", "signature_key", "params", "engines", "unconverted",
                         "converted_nodes", "total_nodes", "percent_converted",
                         "tensorflow_version", "prepared_for"]
    assert doc["tensorflow_version"] is None  # a hand-made result: no TensorFlow prepared it
    assert doc["prepared_for"] is None
    assert doc["model"] == "/models/m" and doc["signature_key"] == "serving_default"
    assert doc["params"] == {
        "precision_mode": "FP16", "minimum_segment_size": 3, "use_dynamic_shape": False,
        "dynamic_shape_profile_strategy": None, "denylist": ["Conv2D"], "max_engines": 7,
    }
    assert list(doc["params"]) == ["precision_mode", "minimum_segment_size", "use_dynamic_shape",
                                   "dynamic_shape_profile_strategy", "denylist", "max_engines"]
    first, second = doc["engines"]
    assert list(first) == ["name", "nodes", "ops", "inputs", "outputs", "input_dtypes",
                           "output_dtypes", "input_shapes", "output_shapes"]
    assert first["name"] == "TRTEngineOp_000_000"
    assert first["nodes"] == ["a", "b"]
    assert list(first["ops"].items()) == [("Const", 2), ("Conv2D", 1), ("Relu", 1)]
    assert (first["inputs"], first["outputs"]) == (1, 1)
    assert first["input_shapes"] == [[-1, 28, 28, 1]]
    assert second["input_shapes"] == [[-1, 8]]  # symbolic dims print as -1
    assert second["output_shapes"] == [None]  # unknown rank
    assert doc["unconverted"] == [
        {"name": "x", "op": "Placeholder", "reason": EXCLUDED},
        {"name": "tiny", "op": "Relu", "reason": "segment too small"},
    ]
    assert (doc["converted_nodes"], doc["total_nodes"]) == (9, 13)
    assert doc["percent_converted"] == 69.23


def test_json_round_trips():
    report = ConversionReport(_full_result())
    text = report.to_json()
    assert json.loads(text) == report.to_dict()
    assert "\n" not in report.to_json(indent=None)


def test_dataframes_columns_and_order():
    report = ConversionReport(_full_result())
    assert list(report.engines.columns) == [
        "name", "device", "nodes", "inputs", "outputs", "input_dtypes", "output_dtypes",
        "input_shapes", "output_shapes", "effective_size", "ops"]
    assert list(report.engines["name"]) == ["TRTEngineOp_000_000", "TRTEngineOp_000_001"]
    assert list(report.engines["nodes"]) == [4, 5]
    assert report.engines.loc[0, "device"] == "device:GPU:0"
    assert list(report.nonconversion.columns) == ["op", "reason", "count"]
    assert list(report.nonconversion["op"]) == [
        "ResizeBilinear", "Identity", "Cast", "Cast", "NoOp", "CombinedNonMaxSuppression",
        "Placeholder", "Unpack"]
    assert report.nonconversion["count"].sum() == 19
    assert list(report.unconverted.columns) == ["name", "op", "reason", "in_tftrt_report"]
    assert list(report.unconverted["in_tftrt_report"]) == [True, False]


def test_empty_result_gives_empty_frames_with_columns():
    report = ConversionReport(_result([], not_converted=0))
    assert report.engines.empty and len(report.engines.columns) == 11
    assert report.nonconversion.empty and list(report.nonconversion.columns) == [
        "op", "reason", "count"]
    assert report.to_dict()["percent_converted"] == 0.0
