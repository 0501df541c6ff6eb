"""Rerankers: take the fused pool, return scores by position; the caller maps back by id."""
