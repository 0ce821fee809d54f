"""GPU latency estimated for a named GPU, without that GPU.

- `kernels`: what one kernel must do (kind, FLOPs, bytes, output tiles);
- `roofline`: its time on a GPU, from the datasheet and fitted efficiencies; one engine's time;
- `coefficients`: the fitted coefficients (`coefficients.json`) and the label with the error;
- `graph`: a converted model's engines and native ops, from TensorRT's kernels or TF nodes;
- `conversion`: the one path behind `--target-gpu` (convert, check, report, tune, the app).
"""
