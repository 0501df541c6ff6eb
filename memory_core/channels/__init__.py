"""Candidate generators behind one protocol (:mod:`.base`: ``Channel.search(ctx) ->
ChannelResult``), each a module of this package that defines ``CHANNEL`` (:mod:`.registry`
finds them): dense, keyword, temporal, entity, graph expansion, recency. Each lists ranked
:class:`~memory_core.types.Candidate` over the eligible memories of one space (filters are
compiled in, never applied after); :mod:`.pool` runs them and fuses their lists, :mod:`.probe`
is the router's evidence probe."""
