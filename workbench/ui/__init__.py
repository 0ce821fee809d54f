"""The notebook workbench: widgets, the experiment store and the static HTML report."""
