"""A segment as ONNX: the exporter, its per-op converters, precision transforms, files."""
