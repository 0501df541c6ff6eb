"""Dataset transforms shared by training and evaluation: drop conversations, pool haystacks.

LongMemEval oracle haystacks hold only a question's evidence sessions, so its pool is a
handful of turns, nearly all relevant: nothing like a real memory, where the answer hides
among hundreds of turns. :func:`merge_haystacks` writes several questions' haystacks into one
space so the others' sessions are distractors, and :func:`exclude_conversations` drops
questions that another set reports on (the S subset's questions are oracle questions too).
The stacked model's recipe trains on oracle questions so transformed
(``experiments/train_stacked.py``); ``conf/data/longmemeval_pooled.yaml`` evaluates on them,
a held-out set for first-stage choices that LongMemEval S and LoCoMo then report on.

Example:
    >>> from experiments.data.schema import Dataset, MemoryDef, QueryDef, SpaceDef
    >>> ds = Dataset("toy", spaces=tuple(SpaceDef(s, s) for s in "abc"),
    ...              memories=tuple(MemoryDef(f"{s}:1", s, f"turn of {s}") for s in "abc"),
    ...              queries=tuple(QueryDef(f"q{s}", "?", gold_keys=(f"{s}:1",), gold_space=s)
    ...                            for s in "abc"))
    >>> kept = exclude_conversations(ds, {"b"})
    >>> [s.space_id for s in kept.spaces], [q.query_id for q in kept.queries]
    (['a', 'c'], ['qa', 'qc'])
    >>> pooled = merge_haystacks(kept, 2, seed=0)
    >>> [s.space_id for s in pooled.spaces], sorted(q.gold_space for q in pooled.queries)
    (['toy-pool000'], ['toy-pool000', 'toy-pool000'])
"""

from __future__ import annotations

import dataclasses
import random
from experiments.data.schema import Dataset, SpaceDef


def exclude_conversations(dataset: Dataset, excluded: set[str]) -> Dataset:
    """Drop excluded conversations (their spaces, memories and questions) from ``dataset``."""
    if not excluded:
        return dataset
    spaces = tuple(s for s in dataset.spaces if s.space_id not in excluded)
    kept = {s.space_id for s in spaces}
    return dataclasses.replace(
        dataset, spaces=spaces,
        memories=tuple(m for m in dataset.memories if m.space_id in kept),
        queries=tuple(q for q in dataset.queries if q.gold_space in kept
                      and (q.conversation or q.gold_space) not in excluded))


def merge_haystacks(dataset: Dataset, per_space: int, seed: int) -> Dataset:
    """Write ``per_space`` questions' haystacks into one space (seeded grouping).

    Merging haystacks puts other questions' sessions in the pool as distractors, while each
    question keeps its own gold. Keys, sessions and the questions' own conversation ids are
    unchanged (a paired test clusters by question; ``experiments.compare --cluster space``
    resamples the merged spaces instead, the more cautious unit, since a space's questions
    share its distractors).
    """
    if per_space <= 1:
        return dataset
    spaces = sorted(s.space_id for s in dataset.spaces)
    random.Random(f"{seed}:{dataset.name}:merge").shuffle(spaces)
    group = {s: f"{dataset.name}-pool{i // per_space:03d}" for i, s in enumerate(spaces)}
    names = sorted(set(group.values()))
    return dataclasses.replace(
        dataset,
        spaces=tuple(SpaceDef(n, f"{per_space} merged haystacks") for n in names),
        memories=tuple(dataclasses.replace(m, space_id=group[m.space_id])
                       for m in dataset.memories),
        queries=tuple(dataclasses.replace(q, gold_space=group[q.gold_space] if q.gold_space in group
                                          else q.gold_space,
                                          conversation=q.conversation or q.gold_space)
                      for q in dataset.queries),
        info={**dict(dataset.info), "merged_haystacks": per_space})
