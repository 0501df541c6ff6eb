"""The research workbench around memory_core: datasets, runner, metrics, reports."""
