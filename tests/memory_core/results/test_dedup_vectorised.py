"""The pool-at-once duplicate collapse (:func:`memory_core.results.dedup.collapse_duplicates`)
against the candidate-by-candidate walk it replaced (kept here as the reference): same kept list,
same drops, same details, for any pool, threshold and mix of hashes, signatures and widths."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.config import DedupSpec
from memory_core.results.dedup import _similar_pairs, collapse_duplicates, minhash_signature
from memory_core.types import Candidate, Channel, Drop, DropReason, Ranked


def _reference(ranked, signatures, spec):
    """The former implementation: each candidate compared with every kept one in turn."""
    kept, drops, seen_hash, kept_ids, matrix = [], [], {}, [], None
    for c in ranked.candidates:
        h, sig = signatures.get(c.memory_id, ("", None))
        if spec.exact and h and h in seen_hash:
            drops.append(Drop(c.memory_id, DropReason.DEDUP, "dedup", c.score, c.rank,
                              f"exact_duplicate_of:{seen_hash[h]}", c.space_id))
            continue
        if spec.near and sig is not None:
            row = np.frombuffer(sig, dtype=np.uint64)
            if matrix is None:
                matrix = np.empty((len(ranked.candidates), len(row)), dtype=np.uint64)
            if kept_ids and matrix.shape[1] == len(row):
                with np.errstate(invalid="ignore", divide="ignore"):
                    share = (matrix[:len(kept_ids)] == row).mean(axis=1)
                similar = np.flatnonzero(share >= spec.near_threshold)
                if len(similar):
                    drops.append(Drop(c.memory_id, DropReason.DEDUP, "dedup", c.score, c.rank,
                                      f"near_duplicate_of:{kept_ids[similar[0]]}", c.space_id))
                    continue
            if matrix.shape[1] == len(row):
                matrix[len(kept_ids)] = row
                kept_ids.append(c.memory_id)
        if h:
            seen_hash.setdefault(h, c.memory_id)
        kept.append(c)
    return ranked.reranked(kept, drops)


@st.composite
def pools(draw):
    n = draw(st.integers(0, 40))
    width = draw(st.sampled_from([1, 4, 16, 64]))
    bases = [np.array(draw(st.lists(st.integers(0, 5), min_size=width, max_size=width)),
                      dtype=np.uint64) for _ in range(draw(st.integers(1, 4)))]
    signatures = {}
    for i in range(n):
        kind = draw(st.sampled_from(["near", "near", "none", "other_width", "missing"]))
        h = draw(st.sampled_from(["", "h1", "h2", "h3", f"u{i}"]))
        if kind == "missing":
            continue
        if kind == "none":
            signatures[f"m{i}"] = (h, None)
            continue
        w = width * 2 if kind == "other_width" else width
        row = np.resize(bases[draw(st.integers(0, len(bases) - 1))], w).copy()
        flips = draw(st.lists(st.integers(0, w - 1), max_size=w))
        row[flips] = draw(st.integers(6, 9))  # values no base holds
        signatures[f"m{i}"] = (h, row.tobytes())
    ranked = Ranked(tuple(Candidate(f"m{i}", 1.0 / (i + 1), i + 1, Channel.FUSED, space_id="s")
                          for i in range(n)))
    spec = DedupSpec(exact=draw(st.booleans()), near=draw(st.booleans()),
                     near_threshold=draw(st.sampled_from([0.0, 0.3, 0.5, 0.8, 0.95, 1.0, 1.1])))
    return ranked, signatures, spec


@settings(max_examples=400, deadline=None)
@given(pools())
def test_collapse_matches_the_candidate_by_candidate_walk(pool):
    ranked, signatures, spec = pool
    assert collapse_duplicates(ranked, signatures, spec) == _reference(ranked, signatures, spec)


def test_similar_pairs_finds_every_pair_over_the_threshold():
    rng = np.random.default_rng(3)
    rows = rng.integers(0, 2**32, (60, 64), dtype=np.uint64)
    rows[10] = rows[3]                      # identical
    rows[20] = rows[3]
    rows[20, :12] = 7                       # 52 of 64 equal: 0.8125 >= 0.8
    rows[30] = rows[4]
    rows[30, :13] = 7                       # 51 of 64: 0.797 < 0.8
    assert _similar_pairs(rows, 0.8) == [(10, 3), (20, 3), (20, 10)]
    assert (30, 4) in _similar_pairs(rows, 0.79)
    assert _similar_pairs(rows, 1.01) == []


def test_real_signatures_of_a_reworded_copy_collapse():
    spec = DedupSpec()
    texts = ["Alice works at Globex since 2024.", "Bob likes green tea in the morning.",
             "Alice works at Globex since 2024!", "Carol moved to Lisbon."]
    sigs = {f"m{i}": (f"h{i}", minhash_signature(t, spec)) for i, t in enumerate(texts)}
    ranked = Ranked(tuple(Candidate(f"m{i}", 1.0, i + 1, Channel.FUSED) for i in range(4)))
    out = collapse_duplicates(ranked, sigs, spec)
    assert [c.memory_id for c in out.candidates] == ["m0", "m1", "m3"]
    assert [c.rank for c in out.candidates] == [1, 2, 3]
    assert [(d.memory_id, d.detail) for d in out.drops] == [("m2", "near_duplicate_of:m0")]


def test_a_malformed_signature_is_an_error_not_a_silent_keep():
    ranked = Ranked((Candidate("m0", 1.0, 1, Channel.FUSED),))
    with pytest.raises(ValueError, match="not whole uint64"):
        collapse_duplicates(ranked, {"m0": ("h", b"\x00" * 12)}, DedupSpec())
