"""Engines: segment -> ONNX -> backend engines, the hybrid runtime, profiles, save and load."""
