"""Runs TF-TRT's own API tests against `workbench.trt_convert`, with only the import swapped.

    python tools/tftrt_api_tests.py PATH/TO/trt_convert_test.py [-k SUBSTRING] [--all]

PATH is TF-TRT 2.17's `tensorflow/python/compiler/tensorrt/trt_convert_test.py`, taken from a
TensorFlow checkout (nothing is downloaded, nothing of it is kept in this repository). Its one
line `from tensorflow.python.compiler.tensorrt import trt_convert` becomes
`from workbench import trt_convert`; the rest runs as written, on the installed TensorFlow.

TensorFlow >= 2.18 no longer ships two modules the file imports, so they are provided here when
missing: `trt_engine_instance_pb2` (TF-TRT's TRTEngineInstance message, as the workbench
declares it to read TF-TRT's engine files) and the test package's `test_utils`
(`experimental_feature_scope`: adds a feature to TF_TRT_EXPERIMENTAL_FEATURES for a `with`
block, as TF-TRT's does). The variable tests read SavedModels from TF-TRT's testdata folder;
they are written here with the graphs TF-TRT's generator scripts describe (two inputs
[None, 1, 1], variables 13 and 37, output `input1 * var1 + input2 * var2 - 45`).

By default the 18 tests that need neither a GPU, a linked TensorRT nor TF1's
`TrtGraphConverter` run (`--all`: every test of the file). Left out: the TF1 tests
(OfflineConversion, OnlineConversion, MinimumSegmentSize, DynamicOp, StaticOp: graph mode and
`TrtGraphConverter`), DestroyEngineCache (TF-TRT's resource ops), AllowBuildAtRuntime (returns
at once without a linked TensorRT), BackwardCompatibility (runs a TF 2.0 TRTEngineOp model) and
DevicePlacement (two GPUs). Prints each test's outcome and the counts; exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import sys
import tempfile
import types
import unittest
from collections.abc import Iterator
from pathlib import Path

TFTRT_IMPORT = "from tensorflow.python.compiler.tensorrt import trt_convert"
WORKBENCH_IMPORT = "from workbench import trt_convert"
NO_GPU_TESTS = (
    "testTRTEngineInstanceAvailable",
    "testTrtGraphBuild",
    "testTrtGraphConverter_DynamicConversion_v2",
    "testTrtGraphConverter_ShapeOp_Int32InputOutput_v2",
    "testTrtGraphConverter_Int8Conversion_v2",
    "testTrtGraphConverter_RemoveNativeSegments",
    "testRetainSignatureInfo_NoInputs",
    "testRetainSignatureInfo_OneInput",
    "testRetainSignatureInfo_TwoInputs",
    "testRetainSignatureInfo_OneOutputSignatureKey",
    "testRetainSignatureInfo_TwoOutputSignatureKeys",
    "testTrtGraphConverter_AllowEngineNativeSegmentExecution",
    "testTrtGraphConverter_SaveGPUSpecificEngineSaveGPUSpecificEngine",
    "testTrtGraphConverter_SaveGPUSpecificEngineWithoutSaveGPUSpecificEngine",
    "testTrtGraphConverterV2_SaveWithOptions",
    "testTrtGraphConverter_DevicePlacementOnCPU",
    "testVariableV2",
    "testReadVariableOp",
)
TESTDATA = "python/compiler/tensorrt/test/testdata/"


def swapped_source(path: Path) -> str:
    """The test file with its trt_convert import pointing at the workbench."""
    source = path.read_text()
    if source.count(TFTRT_IMPORT) != 1:
        raise SystemExit(f"{path}: expected the line '{TFTRT_IMPORT}' once; is it TF-TRT's "
                         "trt_convert_test.py?")
    return source.replace(TFTRT_IMPORT, WORKBENCH_IMPORT)


def provide_missing_modules() -> None:
    """The modules TF >= 2.18 dropped that the test file imports (see the module docstring)."""
    _provide("tensorflow.compiler.tf2tensorrt.utils.trt_engine_instance_pb2",
             TRTEngineInstance=_engine_instance_class())
    _provide("tensorflow.python.compiler.tensorrt.test.test_utils",
             experimental_feature_scope=experimental_feature_scope)


def _engine_instance_class() -> type:
    from workbench.engines.tftrt.saved_model import _engine_instance_class as declared

    return declared()


def _provide(name: str, **members: object) -> None:
    try:
        if importlib.util.find_spec(name) is not None:
            return
    except ModuleNotFoundError:
        pass
    parent = name.rpartition(".")[0]
    while parent and parent not in sys.modules:
        try:
            importlib.import_module(parent)
        except ModuleNotFoundError:
            sys.modules[parent] = types.ModuleType(parent)
        parent = parent.rpartition(".")[0]
    module = types.ModuleType(name)
    module.__dict__.update(members)
    sys.modules[name] = module


@contextlib.contextmanager
def experimental_feature_scope(feature: str) -> Iterator[None]:
    """TF_TRT_EXPERIMENTAL_FEATURES with `feature` added, for the block."""
    before = os.environ.get("TF_TRT_EXPERIMENTAL_FEATURES", "")
    features = {f for f in before.split(",") if f} | {feature}
    os.environ["TF_TRT_EXPERIMENTAL_FEATURES"] = ",".join(sorted(features))
    try:
        yield
    finally:
        os.environ["TF_TRT_EXPERIMENTAL_FEATURES"] = before


def write_testdata(root: Path) -> None:
    """The two SavedModels the variable tests convert: VariableV2 (a TF1 graph) and
    ReadVariableOp (a TF2 module)."""
    import numpy as np
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        with tf.compat.v1.variable_scope("", use_resource=False):
            inputs = [tf.compat.v1.placeholder(tf.float32, [None, 1, 1], name=f"input{i}")
                      for i in (1, 2)]
            weights = [tf.compat.v1.get_variable(
                f"var{i}", [1, 1, 1], tf.float32, tf.compat.v1.constant_initializer(value))
                for i, value in ((1, 13.0), (2, 37.0))]
        output = tf.identity(inputs[0] * weights[0] + inputs[1] * weights[1] - 45.0,
                             name="output")
        builder = tf.compat.v1.saved_model.Builder(str(root / "tf_variablev2_saved_model"))
        signature = tf.compat.v1.saved_model.predict_signature_def(
            {"input1": inputs[0], "input2": inputs[1]}, {"output": output})
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            builder.add_meta_graph_and_variables(
                session, ["serve"], signature_def_map={"serving_default": signature})
        builder.save()

    class TwoVariables(tf.Module):
        def __init__(self) -> None:
            super().__init__()
            self.var1 = tf.Variable(np.full([1, 1, 1], 13.0, np.float32), name="var1")
            self.var2 = tf.Variable(np.full([1, 1, 1], 37.0, np.float32), name="var2")

        @tf.function
        def __call__(self, input1: tf.Tensor, input2: tf.Tensor) -> tf.Tensor:
            return tf.identity(input1 * self.var1 + input2 * self.var2 - 45.0, name="output")

    model = TwoVariables()
    spec = tf.TensorSpec([None, 1, 1], tf.float32)
    tf.saved_model.save(model, str(root / "tf_readvariableop_saved_model"),
                        signatures=model.__call__.get_concrete_function(spec, spec))


def load_test_module(source: str, where: Path) -> types.ModuleType:
    file = where / "trt_convert_test_on_workbench.py"
    file.write_text(source)
    spec = importlib.util.spec_from_file_location("trt_convert_test_on_workbench", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("test_file", type=Path, help="TF-TRT's trt_convert_test.py")
    parser.add_argument("-k", dest="only", default="", help="run tests whose name has this")
    parser.add_argument("--all", action="store_true", help="every test of the file")
    args = parser.parse_args(argv)
    source = swapped_source(args.test_file)
    provide_missing_modules()
    work = Path(tempfile.mkdtemp(prefix="tftrt-api-tests-"))
    testdata = work / "testdata"
    testdata.mkdir()
    write_testdata(testdata)
    from tensorflow.python.platform import test

    original = test.test_src_dir_path
    test.test_src_dir_path = lambda relative: (str(testdata / relative[len(TESTDATA):])
                                               if relative.startswith(TESTDATA)
                                               else original(relative))
    module = load_test_module(source, work)
    loader = unittest.TestLoader()
    names = loader.getTestCaseNames(module.TrtConvertTest)
    chosen = [n for n in names if (args.all or n in NO_GPU_TESTS) and args.only in n]
    suite = unittest.TestSuite(module.TrtConvertTest(n) for n in chosen)
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    failed = {t.id().rsplit(".", 1)[-1] for t, _ in result.failures + result.errors}
    print("\nTF-TRT's trt_convert_test.py on workbench.trt_convert:")
    for name in chosen:
        print(f"  {'FAIL' if name in failed else 'pass'}  {name}")
    print(f"{len(chosen) - len(failed)} passed, {len(failed)} failed of {len(chosen)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
