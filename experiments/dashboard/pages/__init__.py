"""The dashboard's views, one module each, all with one signature: ``show(selection)``.

``app.py`` picks the module by the view the sidebar (or a deep link's ``?view=``) chose, and
hands it the :class:`~experiments.dashboard.nav.Selection` (run, engine, runs):

- :mod:`~experiments.dashboard.pages.query` (``query``): one receipt as one candidate table;
- :mod:`~experiments.dashboard.pages.run` (``run``): what was run, metrics with CIs, curves,
  breakdowns, histograms, worst queries;
- :mod:`~experiments.dashboard.pages.playground` (``playground``): a live query, fast vs
  accurate side by side, with its receipt or its refusal;
- :mod:`~experiments.dashboard.pages.compare` (``compare``): two runs, paired tests per group
  and metric, per-query deltas;
- :mod:`~experiments.dashboard.pages.entities` (``entities``): a space's entity graph, one
  entity's neighbourhood drawn.

A page only lays things out: its numbers come from the plain modules beside this package
(:mod:`~experiments.dashboard.receipts`, :mod:`~experiments.dashboard.runpage`,
:mod:`~experiments.dashboard.comparing`, :mod:`~experiments.dashboard.live`), its reads from
:mod:`~experiments.dashboard.cache`, its charts from :mod:`~experiments.dashboard.charts`.
"""

from __future__ import annotations

from collections.abc import Callable

from experiments.dashboard.nav import Selection
from experiments.dashboard.pages import compare, entities, playground, query, run

PAGES: dict[str, Callable[[Selection], None]] = {
    "query": query.show, "run": run.show, "playground": playground.show, "compare": compare.show,
    "entities": entities.show,
}
"""Each view's page, by its deep-link name (the keys of :data:`experiments.dashboard.nav.VIEWS`)."""
