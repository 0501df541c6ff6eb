"""The receipts dashboard (``app.py``, ``make app``): its pages and what they show.

Two floors. The plain modules are polars / numpy over a run directory or a receipt, tested
without Streamlit, each with docstring examples:

- :mod:`experiments.dashboard.receipts`: one receipt joined with the memories it names
  (:func:`~experiments.dashboard.receipts.receipt_view`), the lists receipts are picked from;
- :mod:`experiments.dashboard.candidates`: one table per receipt (every candidate, each
  stage's rank and score, each score's scale, the drop that cut it and what it points at);
- :mod:`experiments.dashboard.runpage`: the run page's numbers (resolved config, dataset
  hashes, metrics with their CIs, recall@k with CI bands, per-category breakdowns);
- :mod:`experiments.dashboard.comparing`: the compare page's numbers (every metric and group of
  :func:`experiments.compare.compare`, per-query deltas, whether CI and p-value agree);
- :mod:`experiments.dashboard.live`: the playground's requests (which fields the engine
  accepts, the body sent, the space it opens on);
- :mod:`experiments.dashboard.charts`: every chart (altair, matplotlib).

The Streamlit floor lays those out: :mod:`experiments.dashboard.pages` (one module per view),
:mod:`experiments.dashboard.panels` (a receipt on screen, shared by two pages),
:mod:`experiments.dashboard.nav` (sidebar, deep links, the buttons that open a receipt) and
:mod:`experiments.dashboard.cache` (every read, cached for the server's life). Imports go
down only: pages -> panels, nav -> cache -> the plain modules -> :mod:`experiments.readers`
(which imports nothing of the dashboard) and :mod:`memory_core`.
"""
