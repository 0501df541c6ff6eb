"""Benchmarks: ``python -m benchmarks.perf`` (``make bench``) and the regression baselines
(``benchmarks/baselines/*.json``, checked by ``python -m experiments.regress``)."""
