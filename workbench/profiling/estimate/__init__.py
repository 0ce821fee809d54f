"""GPU latency estimated for a named GPU, without that GPU.

- `kernels`: what one kernel must do (kind, FLOPs, bytes, the output its tiles cover);
- `roofline`: its time on a GPU: waves of tiles at shares of the datasheet peaks; an engine's;
- `coefficients`: the fitted coefficients (`coefficients.json`), the range every estimate
  carries and the label quoting the error measured out of sample;
- `calibration`: rescaling every estimate on a GPU from one measurement there;
- `graph`: a converted model's engines and native ops, from TensorRT's kernels or TF nodes;
- `conversion`: the one path behind `--target-gpu` (convert, check, report, tune, the app).
"""
