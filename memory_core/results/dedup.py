"""Duplicate collapse and observation preference: cuts recorded as ``dedup`` drops.

- Exact duplicates share a content hash (sha256 of the text): the best-ranked copy stays.
- Near-duplicates: MinHash (datasketch) over word n-gram shingles, computed at write time;
  a candidate whose estimated Jaccard similarity with an already-kept one reaches
  ``near_threshold`` is cut. Broder, "On the resemblance and containment of documents", 1997.
- ``prefer_observations``: a fact whose observation (a note built from it) is eligible is
  replaced by that note at the fact's position; the fact is cut with detail naming the note.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from memory_core.config import DedupSpec
from memory_core.store import StoreBackend, rowid_of
from memory_core.types import Candidate, Channel, Drop, DropReason, Ranked, frozen_map

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def shingles(text: str, n: int) -> set[bytes]:
    """Word n-grams (and the words themselves, so short texts still have a set)."""
    words = _WORD.findall(text.lower())
    grams = {" ".join(words[i:i + n]) for i in range(max(1, len(words) - n + 1))}
    grams.update(words)
    return {g.encode("utf-8") for g in grams if g}


@functools.lru_cache(maxsize=8)
def _seeded(num_perm: int) -> Any:
    """One MinHash per width whose permutations (drawn from seed 1) every signature shares:
    datasketch draws them anew for each MinHash, 70% of a signature's cost."""
    from datasketch import MinHash

    return MinHash(num_perm=num_perm, seed=1)


def minhash_signature(text: str, spec: DedupSpec) -> bytes:
    """The MinHash hash values of ``text`` as bytes (stored beside the memory)."""
    from datasketch import MinHash

    seeded = _seeded(spec.num_perm)
    mh = MinHash(num_perm=spec.num_perm, seed=1, permutations=seeded.permutations,
                 scheme=seeded.scheme)
    mh.update_batch(list(shingles(text, spec.shingle_words)))
    return np.asarray(mh.hashvalues, dtype=np.uint64).tobytes()


def signatures(store: StoreBackend, candidates: Sequence[Candidate]
               ) -> dict[str, tuple[str, bytes | None]]:
    """(content hash, MinHash signature) of each candidate the store holds, by memory id:
    what :func:`collapse_duplicates` compares."""
    rows = {m: r for c in candidates if (r := rowid_of(m := c.memory_id)) is not None}
    found = store.minhashes(rows.values())
    return {m: found[r] for m, r in rows.items() if r in found}


def jaccard_estimate(a: bytes, b: bytes) -> float:
    """Share of equal MinHash slots: an unbiased estimate of the Jaccard similarity."""
    va, vb = np.frombuffer(a, dtype=np.uint64), np.frombuffer(b, dtype=np.uint64)
    return float(np.mean(va == vb)) if len(va) == len(vb) and len(va) else 0.0


def _min_equal_slots(width: int, threshold: float) -> int | None:
    """The fewest equal slots out of ``width`` whose share reaches ``threshold`` (the same
    float division the comparison makes); None when not even ``width`` does."""
    return next((c for c in range(width + 1) if c / width >= threshold), None)


def _similar_pairs(rows: np.ndarray, threshold: float) -> list[tuple[int, int]]:
    """``(i, j)`` with ``j < i`` for every pair of signature rows whose share of equal slots
    reaches ``threshold``, sorted by ``i`` then ``j``.

    Exact, without comparing every pair: two rows with at most ``m`` unequal slots agree on
    every slot of at least one of ``m + 1`` disjoint bands (pigeonhole), so only rows that
    share a band's values with another row are compared slot by slot. A band is keyed by a
    wrapping multiply-add of its values (unequal bands may collide; the slot-by-slot check
    drops such pairs, and equal bands always share a key).
    """
    n, width = rows.shape
    need = _min_equal_slots(width, threshold) if width else None
    if n < 2 or need is None:
        return []
    band = width // (width - need + 1)  # m + 1 = width - need + 1 disjoint bands
    if band >= 1:
        bands = width // band
        mult = np.arange(1, 2 * band, 2, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        # keys[:, b] = sum over j of rows[:, b * band + j] * mult[j] (wrapping): one strided
        # multiply-add per slot of a band (a reduction over a short last axis costs 4x more)
        keys = rows[:, 0:bands * band:band] * mult[0]
        for j in range(1, band):
            keys += rows[:, j:bands * band:band] * mult[j]
        # most pools hold no two rows with an equal band: one sort per band says so
        by_band = np.sort(keys.T, axis=1)
        if not (by_band[:, 1:] == by_band[:, :-1]).any():
            return []
        order = np.argsort(keys, axis=0, kind="stable")
        ranked_keys = np.take_along_axis(keys, order, axis=0)
        same = ranked_keys[1:] == ranked_keys[:-1]
        if not same.any():
            return []
        hit = np.zeros(n, dtype=bool)
        r, col = np.nonzero(same)
        hit[order[r, col]] = True
        hit[order[r + 1, col]] = True
        members = np.flatnonzero(hit)
    else:  # a threshold so low that any two rows may be similar: compare them all
        members = np.arange(n)
    sub = rows[members]
    share = np.count_nonzero(sub[:, None, :] == sub[None, :, :], axis=2) / width
    i, j = np.nonzero(np.tril(share >= threshold, k=-1))
    return list(zip(members[i].tolist(), members[j].tolist(), strict=True))


def collapse_duplicates(ranked: Ranked, signatures: Mapping[str, tuple[str, bytes | None]],
                        spec: DedupSpec) -> Ranked:
    """Cut exact and near duplicates of better-ranked candidates.

    Walking the list best first, a candidate is cut when its content hash equals a kept
    candidate's (exact), or when its MinHash signature's share of equal slots with a kept
    candidate's reaches ``near_threshold`` (near; the detail names the best-ranked such kept
    candidate). Only signatures of the width of the first one compared are compared at all.
    The similar pairs are found for the whole pool at once (:func:`_similar_pairs`), so the
    walk itself is plain bookkeeping.
    """
    cands = ranked.candidates
    found = [signatures.get(c.memory_id, ("", None)) for c in cands]
    similar: dict[int, list[int]] = {}  # candidate index -> better-ranked similar ones
    if spec.near:
        present = [(i, sig) for i, (_, sig) in enumerate(found) if sig is not None]
        widths = {len(sig) for _, sig in present}
        for i, sig in present if any(w % 8 for w in widths) else ():
            if len(sig) % 8:
                raise ValueError(f"MinHash signature of {cands[i].memory_id} is {len(sig)} "
                                 "bytes, not whole uint64 values")
        by_width: dict[int, list[tuple[int, bytes]]] = {}  # bytes per signature -> (index, sig)
        if len(widths) == 1:  # the usual pool: one width, one group in candidate order
            by_width[widths.pop()] = present
        else:
            for i, sig in present:
                by_width.setdefault(len(sig), []).append((i, sig))
        for group in by_width.values():
            if len(group) > 1:
                rows = np.frombuffer(b"".join(sig for _, sig in group),
                                     dtype=np.uint64).reshape(len(group), -1)
                for a, b in _similar_pairs(rows, spec.near_threshold):
                    similar.setdefault(group[a][0], []).append(group[b][0])
    hashes = [h for h, _ in found if h]
    if not similar and not (spec.exact and len(set(hashes)) < len(hashes)):
        return ranked.reranked(cands)  # nothing to cut (most pools): the walk keeps them all
    kept: list[Candidate] = []
    drops: list[Drop] = []
    seen_hash: dict[str, str] = {}
    compared: set[int] = set()  # kept candidates whose signature later ones are compared with
    width: int | None = None  # the compared signatures' width (the first one's)
    for i, (c, (h, sig)) in enumerate(zip(cands, found, strict=True)):
        if spec.exact and h and h in seen_hash:
            drops.append(Drop(c.memory_id, DropReason.DEDUP, "dedup", c.score, c.rank,
                              f"exact_duplicate_of:{seen_hash[h]}", c.space_id))
            continue
        if spec.near and sig is not None:
            if width is None:
                width = len(sig)
            if len(sig) == width:
                first = next((j for j in similar.get(i, ()) if j in compared), None)
                if first is not None:
                    drops.append(Drop(c.memory_id, DropReason.DEDUP, "dedup", c.score, c.rank,
                                      f"near_duplicate_of:{cands[first].memory_id}",
                                      c.space_id))
                    continue
                compared.add(i)
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
