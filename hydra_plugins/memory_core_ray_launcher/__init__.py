"""Hydra launcher plugin: a multirun's jobs as Ray tasks (``hydra/launcher=ray``).

Hydra finds launchers only under the ``hydra_plugins`` namespace package and imports every
module there at start-up, so this package stays thin and imports neither ray nor
``experiments``: the work is in :mod:`experiments.ray_launcher`, imported when a sweep is
launched.
"""
