"""What a retrieve returns and the cuts on the way: dedup and ``prefer_observations``
(:mod:`.dedup`), the ``include`` / ``min_score`` / ``limit`` / token-budget cuts (:mod:`.cuts`),
result rows, notes and passages (:mod:`.rows`) and the context hits beside them
(:mod:`.context_hits`)."""
