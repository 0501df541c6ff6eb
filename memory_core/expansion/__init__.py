"""Retrieving more than the question says: ``expand_query``'s subjects (:mod:`.subjects`),
the escalated tier (:mod:`.escalation`) and its query rewriting (:mod:`.rewrite`)."""
