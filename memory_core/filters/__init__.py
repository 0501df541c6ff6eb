"""Filters compiled into candidate generation (every channel sees the same predicate)."""
