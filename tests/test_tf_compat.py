"""Which TensorFlow runs, read without importing it, and what the reports say about it."""

from __future__ import annotations

import subprocess
import sys

from workbench.tf_compat import (
    LAST_TFTRT_RELEASE,
    graph_origin,
    grappler_is_tftrts,
    tensorflow_release,
)


def test_releases_are_read_from_version_strings() -> None:
    assert tensorflow_release("2.17.1") == (2, 17) == LAST_TFTRT_RELEASE
    assert tensorflow_release("2.18.0rc0") > LAST_TFTRT_RELEASE
    assert tensorflow_release("nightly") == (0, 0) and not grappler_is_tftrts("nightly")
    assert grappler_is_tftrts("2.16.2") and not grappler_is_tftrts("2.21.0")


def test_the_version_is_tensorflows_own_and_needs_no_import() -> None:
    code = ("import sys; from workbench.tf_compat import tensorflow_version as v; "
            "found = v(); assert 'tensorflow' not in sys.modules; "
            "import tensorflow as tf; print(found == tf.__version__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "True", done.stderr


def test_graph_origin_says_whether_tftrt_saw_such_graphs() -> None:
    assert "a release TF-TRT ran on" in graph_origin("2.17.1")
    assert "TF-TRT ran on 2.16/2.17" in graph_origin("2.21.0")
    assert graph_origin("") == "Graph not prepared by the workbench."
