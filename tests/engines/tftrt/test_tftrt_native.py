"""Converting under a real TF-TRT (workbench/engines/tftrt/native.py): the refusal where there is
none (every TensorFlow we test on), and the parameters it would be handed."""

from __future__ import annotations

import pytest

from workbench.tf_compat import LAST_TFTRT_RELEASE, tensorflow_release


def test_tftrt_not_available_on_this_tensorflow():
    import tensorflow as tf

    from workbench.engines.tftrt import native

    ok, reason = native.status()
    assert not ok and not native.available()
    assert reason.startswith("not available here: ")
    if tensorflow_release() > LAST_TFTRT_RELEASE:
        assert f"TensorFlow {tf.__version__} has no TF-TRT" in reason and "2.17" in reason
    else:  # TF-TRT's Python code ships in every <= 2.17 build, TensorRT only in GPU builds
        assert reason.endswith(f"TensorFlow {tf.__version__} was built without TensorRT")


def test_tftrt_delegation_refuses_with_the_reason(tmp_path):
    from workbench.conversion.params import ConversionParams
    from workbench.engines.tftrt import native

    with pytest.raises(native.TftrtUnavailableError,
                       match="TF-TRT is not available here: TensorFlow .* (has no TF-TRT|"
                             "was built without TensorRT)"):
        native.convert_with_tftrt(tmp_path, ConversionParams(), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_tftrt_delegation_parameter_mapping():
    import inspect

    from workbench import trt_convert
    from workbench.conversion.params import ConversionParams
    from workbench.engines.tftrt import native

    params = ConversionParams(precision_mode="fp16", minimum_segment_size=5,
                              use_dynamic_shape=True, denylist=("Relu", "Conv2D"),
                              max_engines=7, maximum_cached_engines=3,
                              max_workspace_size_bytes=1 << 30, use_calibration=False,
                              allow_build_at_runtime=False)
    arguments = native.tftrt_arguments(params)
    assert arguments == {
        "use_dynamic_shape": True, "dynamic_shape_profile_strategy": "Range",
        "max_workspace_size_bytes": 1 << 30, "precision_mode": "FP16",
        "minimum_segment_size": 5, "maximum_cached_engines": 3, "use_calibration": False,
        "allow_build_at_runtime": False}
    # Our TrtGraphConverterV2 has TF 2.17's signature: every argument is one of its names.
    assert set(arguments) <= set(inspect.signature(trt_convert.TrtGraphConverterV2).parameters)
    assert native.tftrt_environment(params) == {
        "TF_TRT_OP_DENYLIST": "Conv2D,Relu", "TF_TRT_MAX_ALLOWED_ENGINES": "7"}
    implicit = native.tftrt_arguments(
        ConversionParams(dynamic_shape_profile_strategy="Optimal"))
    assert implicit["dynamic_shape_profile_strategy"] is None and not implicit["use_dynamic_shape"]
