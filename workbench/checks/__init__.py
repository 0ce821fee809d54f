"""Checks of a conversion: outputs against native TensorFlow (`validate`), and the conversion
check that builds, validates and times one conversion (`conversion_check`, the Validation tab).

Above engines and profiling, which they drive.
"""
