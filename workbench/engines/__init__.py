"""Engines: TensorRT optimization profiles now; backends, build and save in a later issue."""
