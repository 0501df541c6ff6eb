"""Candidate generators. Each returns a ranked list of :class:`~memory_core.types.Candidate`
over the eligible memories of one space (filters are compiled in, never applied after)."""
