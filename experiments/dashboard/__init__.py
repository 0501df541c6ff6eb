"""Helpers of the receipts dashboard (``app.py``): the tables and statistics its pages show.

The app only lays these out; everything here is plain polars / numpy over a run directory or a
receipt, so it is tested without Streamlit:

- :mod:`experiments.dashboard.candidates`: one table per receipt (every candidate, each
  stage's rank and score, each score's scale, the drop that cut it and what it points at);
- :mod:`experiments.dashboard.runpage`: the run page (resolved config, dataset hashes, metrics
  with their CIs, recall@k with CI bands, per-category breakdowns);
- :mod:`experiments.dashboard.comparing`: the compare page (every metric and group of
  :func:`experiments.compare.compare`, per-query deltas, whether CI and p-value agree).
"""
