"""Which TensorFlow runs the workbench, and what differs between the releases we support.

We support TensorFlow 2.15-2.21: TF-TRT's users stay on <= 2.17 (its last release), our
default environment is today's release. Code that depends on the release asks here instead
of comparing versions itself. TensorFlow is not imported to answer.
"""

from __future__ import annotations

import sys
from functools import cache
from importlib import metadata

# The last TensorFlow release that shipped TF-TRT: its Grappler made the graphs TF-TRT segmented.
LAST_TFTRT_RELEASE = (2, 17)


@cache
def tensorflow_version() -> str:
    """The installed TensorFlow's version, e.g. `2.17.1` (`unknown` when none is installed)."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"].__version__
    for dist in metadata.packages_distributions().get("tensorflow", []):
        return metadata.version(dist)
    return "unknown"


def tensorflow_release(version: str | None = None) -> tuple[int, int]:
    """(major, minor) of `version` (default: the installed TensorFlow); (0, 0) when unknown."""
    parts = (version or tensorflow_version()).split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return (0, 0)


def grappler_is_tftrts(version: str | None = None) -> bool:
    """True when that TensorFlow's Grappler is one TF-TRT itself ran with (<= 2.17)."""
    return (0, 0) < tensorflow_release(version) <= LAST_TFTRT_RELEASE


def graph_origin(version: str) -> str:
    """One line saying which TensorFlow traced and optimized a graph, for report headers.

    Releases differ in both: TF 2.21 writes GELU with Erfc (TF-TRT rejects it) where 2.17
    wrote Erf (converted), and its Grappler is newer than the one TF-TRT ran.
    """
    if not version:
        return "Graph not prepared by the workbench."
    if grappler_is_tftrts(version):
        return (f"Graph traced and optimized by TensorFlow {version}, a release TF-TRT ran on "
                "(the same ops and Grappler).")
    return (f"Graph traced and optimized by TensorFlow {version}; TF-TRT ran on 2.16/2.17, "
            "whose graphs can have other ops and node counts.")
