"""Channels-first nodes rewritten for the CPU (graph/channels_last.py), run where TensorFlow's CPU
kernels refuse NCHW: a TensorFlow without oneDNN (TF_ENABLE_ONEDNN_OPTS=0)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import tensorflow as tf

from workbench.graph.channels_last import cpu_runnable, needs_rewrite

SCRIPT = textwrap.dedent("""
    import sys, numpy as np, tensorflow as tf
    from tensorflow.core.framework import graph_pb2
    graph_def = graph_pb2.GraphDef.FromString(open(sys.argv[1], "rb").read())
    def run():
        tf.compat.v1.import_graph_def(graph_def, name="")
    fn = tf.compat.v1.wrap_function(run, [])
    out = fn.prune([], [fn.graph.get_tensor_by_name(n + ":0") for n in sys.argv[3:]])()
    np.savez(sys.argv[2], *[o.numpy() for o in out])
""")


def channels_first_graph():
    """Every rewritten op on NCHW (NCDHW) data, each result also computed channels-last."""
    rng = np.random.default_rng(0)
    arrays = [rng.random(shape, np.float32) for shape in ((2, 4, 6, 6), (1, 4, 3, 6, 6),
                                                          (3, 3, 4, 4))]
    nchw = dict(data_format="NCHW")

    @tf.function
    def graph():
        x, x5, w = (tf.constant(a) for a in arrays)  # Consts in the graph, not captures
        return {
            "conv": tf.raw_ops.Conv2D(input=x, filter=w, strides=[1, 1, 2, 1],
                                      padding="SAME", dilations=[1, 1, 1, 1], **nchw),
            "explicit": tf.raw_ops.Conv2D(input=x, filter=w, strides=[1, 1, 1, 1],
                                          padding="EXPLICIT",
                                          explicit_paddings=[0, 0, 0, 0, 1, 2, 0, 1], **nchw),
            "depthwise": tf.raw_ops.DepthwiseConv2dNative(
                input=x, filter=w[:, :, :, :1], strides=[1, 1, 1, 1], padding="VALID", **nchw),
            "maxpool": tf.raw_ops.MaxPool(input=x, ksize=[1, 1, 3, 2], strides=[1, 1, 2, 1],
                                          padding="VALID", **nchw),
            "avgpool": tf.raw_ops.AvgPool(value=x, ksize=[1, 1, 2, 2], strides=[1, 1, 2, 2],
                                          padding="SAME", **nchw),
            "backprop": tf.raw_ops.Conv2DBackpropInput(
                input_sizes=[2, 4, 12, 12], filter=w, out_backprop=x, strides=[1, 1, 2, 2],
                padding="SAME", **nchw),
            "conv3d": tf.raw_ops.Conv3D(input=x5, filter=tf.ones([1, 2, 2, 4, 3]),
                                        strides=[1, 1, 1, 1, 1], padding="SAME",
                                        data_format="NCDHW"),
        }

    return graph.get_concrete_function()


def test_rewritten_graph_runs_without_onednn_and_matches(tmp_path):
    function = channels_first_graph()
    graph_def = function.graph.as_graph_def()
    outputs = {name: t.op.name for name, t in
               zip(sorted(function.structured_outputs), function.outputs, strict=True)}
    rewritten = cpu_runnable(graph_def)
    assert not any(needs_rewrite(node) for node in rewritten.node)
    assert {n.name for n in graph_def.node} <= {n.name for n in rewritten.node}
    expected = {name: value.numpy() for name, value in function().items()}  # oneDNN's NCHW

    path = tmp_path / "graph.pb"
    path.write_bytes(rewritten.SerializeToString())
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    identity = [n.name for n in function.graph.get_operations() if n.type == "Identity"]
    names = [outputs[k] for k in sorted(outputs)]
    assert len(identity) >= len(names)
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0"}
    subprocess.run([sys.executable, str(script), str(path), str(tmp_path / "out.npz"), *names],
                   check=True, env=env, capture_output=True)
    got = np.load(tmp_path / "out.npz")
    for i, key in enumerate(sorted(outputs)):
        np.testing.assert_allclose(got[f"arr_{i}"], expected[key], rtol=1e-5, atol=1e-5,
                                   err_msg=key)


def test_the_unchanged_graph_fails_without_onednn(tmp_path):
    """The reason for the rewrite: without it, TensorFlow's CPU kernel refuses NCHW."""
    function = channels_first_graph()
    path = tmp_path / "graph.pb"
    path.write_bytes(function.graph.as_graph_def().SerializeToString())
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    conv = function.outputs[sorted(function.structured_outputs).index("conv")].op.name
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0"}
    done = subprocess.run([sys.executable, str(script), str(path), str(tmp_path / "o.npz"), conv],
                          env=env, capture_output=True, text=True)
    assert done.returncode != 0 and "NHWC" in done.stderr


def test_graph_without_channels_first_nodes_is_returned_as_is():
    @tf.function
    def nhwc(x):
        return tf.nn.conv2d(x, tf.ones([3, 3, 4, 2]), 1, "SAME")

    graph_def = nhwc.get_concrete_function(tf.TensorSpec([1, 8, 8, 4])).graph.as_graph_def()
    assert cpu_runnable(graph_def) is graph_def


def test_a_fed_placeholders_rewrite_hangs_nothing_on_it():
    """A native segment's input feeding an NCHW op: the rewrite's Consts take no control input
    from the Placeholder, so mapping its tensor (as every caller does) is enough to run it."""
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 4, 6, 6], name="TensorRTInputPH_0")
        tf.raw_ops.MaxPool(input=x, ksize=[1, 1, 2, 2], strides=[1, 1, 2, 2],
                           padding="VALID", data_format="NCHW", name="pool")
    rewritten = cpu_runnable(graph.as_graph_def())
    assert not [n.name for n in rewritten.node if "^TensorRTInputPH_0" in n.input]
    data = np.random.default_rng(0).random((2, 4, 6, 6), np.float32)

    def run():
        fed = tf.constant(data)
        return tf.compat.v1.import_graph_def(rewritten, input_map={"TensorRTInputPH_0:0": fed},
                                             return_elements=["pool:0"], name="")

    out = tf.compat.v1.wrap_function(run, [])()[0].numpy()
    want = tf.nn.max_pool2d(data.transpose(0, 2, 3, 1), 2, 2, "VALID").numpy()
    np.testing.assert_allclose(out, want.transpose(0, 3, 1, 2))
