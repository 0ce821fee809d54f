"""TensorRT's own account of a converted model's engines: verdicts, kernels after fusion."""
