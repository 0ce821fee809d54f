"""Drawings of conversions: Graphviz segment graphs (`graphs`) and shared colours (`style`)."""
