"""Retrieval systems behind one protocol, run by the same harness (``system=NAME``).

:mod:`~experiments.systems.base` is the protocol (index a space's items, search a question,
return ranked ids); each other module is one system; :mod:`~experiments.systems.registry`
maps ``system.name`` to its spec and class; :mod:`~experiments.systems.runner` runs one on a
data set and writes the run directory every report reads.
"""
