"""The converted model at run time: engine ops, the hybrid graph, build, save and load."""
