"""Grappler on a GraphDef: optimize it, read its static shapes, give it a virtual GPU.

TF-TRT ran Grappler through `tf_optimizer.OptimizeGraph` on a MetaGraphDef made by
`saver.export_meta_graph`, exactly as here; TensorFlow has no public API for running Grappler
on a graph. Its static shapes (`item.Item.GetOpProperties`) and a cluster of named virtual
devices (`cluster.Cluster`, preparing for a GPU this machine lacks) come from the same private
wrappers, which TensorFlow's own Grappler tests use.
"""

from __future__ import annotations

from typing import Any


def optimize_graph(config: Any, meta_graph: Any, cluster: Any = None) -> Any:
    """Grappler's rewrite of `meta_graph` with the optimizers `config` names."""
    from tensorflow.python.grappler import tf_optimizer

    return tf_optimizer.OptimizeGraph(config, meta_graph, cluster=cluster)


def export_meta_graph(graph_def: Any) -> Any:
    """A MetaGraphDef holding `graph_def`, as Grappler takes it."""
    from tensorflow.python.framework import ops
    from tensorflow.python.training.saver import export_meta_graph as export

    return export(graph_def=graph_def, graph=ops.Graph())


def grappler_item(meta_graph: Any) -> Any:
    """Grappler's item of `meta_graph` (`GetOpProperties()`: its static shapes)."""
    from tensorflow.python.grappler import item

    return item.Item(meta_graph)


def virtual_cluster(devices: list[Any]) -> Any:
    """A Grappler cluster of the named devices (`NamedDevice` protos)."""
    from tensorflow.python.grappler import cluster

    return cluster.Cluster(devices=devices)
