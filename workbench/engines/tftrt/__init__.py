"""TF-TRT's own converted models: reading them, stripping their engines, converting under a
real TF-TRT."""
