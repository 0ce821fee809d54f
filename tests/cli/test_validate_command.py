"""`workbench validate`: converted against native outputs, exit 3 on a mismatch."""

from __future__ import annotations

import pytest

import sample_models


def test_cli_validate_passes_on_generated_inputs(capsys: pytest.CaptureFixture) -> None:
    from workbench import cli

    code = cli.main(["validate", str(sample_models.build("quickstart_mlp")), "--batches", "2",
                     "--batch-size", "8"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.startswith("PASSED: FP32 converted vs native TensorFlow on 2 batches")
    assert "PASSED logits [8x10]" in out


def test_cli_validate_int8_mismatch_exits_3_with_its_json(capsys: pytest.CaptureFixture) -> None:
    import json

    from workbench import cli

    model = sample_models.build("digits_cnn")
    code = cli.main(["validate", str(model), "--precision", "INT8", "--inputs",
                     str(model / "data.npz"), "--input-key", "x_test", "--calibration-key",
                     "x_calib", "--batch-size", "100", "--atol", "1e-4", "--rtol", "1e-4",
                     "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == cli.EXIT_MISMATCH == 3
    assert (document["passed"], document["precision"], document["batches"]) == (False, "INT8", 4)
    (logits,) = document["outputs"]
    assert logits["top1_agreement"] >= 0.98 and logits["max_abs"] > 1e-2
    assert logits["shape"] == [-1, 10]


def test_cli_validate_names_a_missing_input_array(capsys: pytest.CaptureFixture) -> None:
    from workbench import cli

    model = sample_models.build("digits_cnn")
    code = cli.main(["validate", str(model), "--inputs", str(model / "data.npz")])
    assert code == cli.EXIT_USAGE
    assert "--inputs has no array for 1 input (images)" in capsys.readouterr().err
