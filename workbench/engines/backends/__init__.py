"""Engine backends: each builds (loader) and runs (runner) an engine for one segment."""
