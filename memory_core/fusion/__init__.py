"""Fusion of several ranked candidate lists into one (pure functions)."""
