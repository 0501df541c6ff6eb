"""The routing experiment's split (step 1 of :mod:`experiments.routing`): which spaces are
candidates, which are held out, which questions train and which test."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from experiments.data.schema import Dataset, QueryDef


@dataclass(frozen=True)
class RoutingCase:
    """One question as the routing experiment sees it.

    ``gold`` holds the question's gold spaces that are candidates (empty: unanswerable, the
    router should abstain); ``held_out`` is true when its gold spaces were all held out.
    """

    query: QueryDef
    qid: str
    gold: frozenset[str]
    held_out: bool
    split: str

    @property
    def answerable(self) -> bool:
        return bool(self.gold)


@dataclass(frozen=True)
class Split:
    candidates: tuple[str, ...]
    held_out: tuple[str, ...]
    train_spaces: tuple[str, ...]
    unit: str  # "space" (questions follow their gold space) or "query"

    def to_dict(self) -> dict[str, Any]:
        return {"candidates": list(self.candidates), "held_out": list(self.held_out),
                "train_spaces": list(self.train_spaces), "unit": self.unit}


def gold_spaces(q: QueryDef) -> tuple[str, ...]:
    """Every space holding part of the answer (``metadata["gold_spaces"]`` when present)."""
    listed = q.metadata.get("gold_spaces")
    if listed:
        return tuple(str(s) for s in listed)  # type: ignore[union-attr]
    return () if q.gold_space is None else (q.gold_space,)


def make_cases(dataset: Dataset, seed: int, holdout_share: float, train_share: float,
               min_split_spaces: int = 4, max_queries: int | None = None
               ) -> tuple[Split, list[RoutingCase]]:
    """The seeded split of one dataset (see the module docstring, step 1).

    Example:
        >>> from experiments.data.synthetic import generate_world, tiny_spec
        >>> split, cases = make_cases(generate_world(tiny_spec()), 0, 0.2, 0.5)
        >>> split.unit, sorted({c.split for c in cases})
        ('query', ['test', 'train'])
    """
    rng = random.Random(seed)
    topical = sorted(s.space_id for s in dataset.spaces if not s.default)
    order = topical[:]
    rng.shuffle(order)
    n_hold = 0
    if len(order) >= 3 and holdout_share > 0:
        n_hold = min(len(order) - 2, max(1, round(holdout_share * len(order))))
    held, cands = tuple(sorted(order[:n_hold])), order[n_hold:]
    by_space = len(cands) >= min_split_spaces
    train_spaces = tuple(sorted(cands[:math.ceil(train_share * len(cands))])) if by_space else ()
    queries = list(dataset.queries)
    if max_queries is not None and len(queries) > max_queries:
        keep = set(rng.sample(range(len(queries)), max_queries))
        queries = [q for i, q in enumerate(queries) if i in keep]
    cases = []
    for q in queries:
        everywhere = gold_spaces(q)
        gold = frozenset(s for s in everywhere if s in cands)
        primary = next((s for s in everywhere if s in cands), None)
        if by_space and primary is not None:
            split = "train" if primary in train_spaces else "test"
        else:
            split = "train" if rng.random() < train_share else "test"
        cases.append(RoutingCase(q, f"{dataset.name}/{q.query_id}", gold,
                                 bool(everywhere) and not gold, split))
    return Split(tuple(sorted(cands)), held, train_spaces, "space" if by_space else "query"), cases
