"""Duplicate collapse and observation preference: cuts recorded as ``dedup`` drops.

- Exact duplicates share a content hash (sha256 of the text): the best-ranked copy stays.
- Near-duplicates: MinHash (datasketch) over word n-gram shingles, computed at write time;
  a candidate whose estimated Jaccard similarity with an already-kept one reaches
  ``near_threshold`` is cut. Broder, "On the resemblance and containment of documents", 1997.
- ``prefer_observations``: a fact whose observation (a note built from it) is eligible is
  replaced by that note at the fact's position; the fact is cut with detail naming the note.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import numpy as np

from memory_core.config import DedupSpec
from memory_core.types import Candidate, Channel, Drop, DropReason, Ranked, frozen_map

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def shingles(text: str, n: int) -> set[bytes]:
    """Word n-grams (and the words themselves, so short texts still have a set)."""
    words = _WORD.findall(text.lower())
    grams = {" ".join(words[i:i + n]) for i in range(max(1, len(words) - n + 1))}
    grams.update(words)
    return {g.encode("utf-8") for g in grams if g}


def minhash_signature(text: str, spec: DedupSpec) -> bytes:
    """The MinHash hash values of ``text`` as bytes (stored beside the memory)."""
    from datasketch import MinHash

    mh = MinHash(num_perm=spec.num_perm, seed=1)
    mh.update_batch(list(shingles(text, spec.shingle_words)))
    return np.asarray(mh.hashvalues, dtype=np.uint64).tobytes()


def jaccard_estimate(a: bytes, b: bytes) -> float:
    """Share of equal MinHash slots: an unbiased estimate of the Jaccard similarity."""
    va, vb = np.frombuffer(a, dtype=np.uint64), np.frombuffer(b, dtype=np.uint64)
    return float(np.mean(va == vb)) if len(va) == len(vb) and len(va) else 0.0


def collapse_duplicates(ranked: Ranked, signatures: Mapping[str, tuple[str, bytes | None]],
                        spec: DedupSpec) -> Ranked:
    """Cut exact and near duplicates of better-ranked candidates.

    Each candidate's MinHash signature is compared with every kept one in a single vectorised
    step (a row of a preallocated matrix per kept candidate), so a pool of n candidates costs
    n numpy comparisons rather than n^2 / 2 Python-level ones.
    """
    kept: list[Candidate] = []
    drops: list[Drop] = []
    seen_hash: dict[str, str] = {}
    kept_ids: list[str] = []
    matrix: np.ndarray | None = None  # kept signatures, one row each
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
                similar = np.flatnonzero(
                    (matrix[:len(kept_ids)] == row).mean(axis=1) >= spec.near_threshold)
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


def prefer_observations(ranked: Ranked, notes_of: Callable[[list[str]], Mapping[str, list[str]]]
                        ) -> Ranked:
    """Return each eligible note in place of the facts it was built from.

    ``notes_of(fact_ids)`` maps a fact id to the eligible notes built from it (filters and
    scopes already applied). The note takes the position of its best-ranked fact (or keeps its
    own position when it ranks higher); every replaced fact is a ``dedup`` drop.
    """
    mapping = notes_of([c.memory_id for c in ranked.candidates])
    if not mapping:
        return ranked
    placed: set[str] = set()
    kept: list[Candidate] = []
    drops: list[Drop] = []
    present = {c.memory_id for c in ranked.candidates}
    for c in ranked.candidates:
        if c.memory_id in placed:
            continue  # the note was already placed at a better fact's position
        notes = mapping.get(c.memory_id, [])
        if not notes:
            kept.append(c)
            placed.add(c.memory_id)
            continue
        note = notes[0]
        drops.append(Drop(c.memory_id, DropReason.DEDUP, "prefer_observations", c.score, c.rank,
                          f"replaced_by_observation:{note}", c.space_id))
        if note not in placed:
            ranks = dict(c.channel_ranks)
            kept.append(Candidate(note, c.score, c.rank, Channel.FUSED if note not in present
                                  else c.channel, frozen_map(ranks), c.space_id,
                                  c.channel_scores))
            placed.add(note)
    return ranked.reranked(kept, drops)
