"""The "accurate" scorer: a sentence-transformers ``CrossEncoder`` over the top fused candidates.

The stage (:func:`rerank_pool`) takes the fused, de-duplicated list, sends the first ``pool``
candidates to a :class:`Reranker` as ``(query, text)`` pairs, and gets one score per pair *by
position*. Scores are mapped back to candidates by position, hence by memory id, never by text:
two memories with the same text are two candidates with two (equal) scores. The list is then
ordered by score (descending; ties keep the fused order), and ``relevance_score`` is the
cross-encoder's score. For the project's cross-encoders (one logit ``z``, sigmoid activation)
that is ``s = 1 / (1 + exp(-z))`` in ``(0, 1)``.

Candidates beyond the pool are never scored, so they are cut here, each with a ``limit`` drop
of stage ``"rerank"`` (detail ``beyond rerank.pool=N``): an unscored memory is never returned
next to scored ones. ``pool`` is a config value independent of ``limit``; with the default
``pool = max_limit = 50`` no page is ever short because of it.

A cross-encoder reads query and memory together (Nogueira & Cho, "Passage Re-ranking with
BERT", 2019), so it orders well, but its scores are close to two-valued: a near-verbatim match
scores near 1 and a correct paraphrase can score near 0. ``experiments/thresholds.py`` measures
how ``min_score`` behaves on that.

Example:
    >>> from memory_core.types import Candidate, Channel, Ranked
    >>> class Lengths:                      # a toy reranker: longer text, higher score
    ...     def score(self, query, texts): return [len(t) / 10 for t in texts]
    ...     def identity(self): return {"model": "lengths"}
    >>> fused = Ranked((Candidate("mem_1", 0.03, 1, Channel.FUSED),
    ...                 Candidate("mem_2", 0.02, 2, Channel.FUSED)))
    >>> out = rerank_pool(fused, "q", {"mem_1": "short", "mem_2": "longer text"}, Lengths(), 50)
    >>> [(c.memory_id, c.score, c.rank) for c in out.candidates]
    [('mem_2', 1.1, 1), ('mem_1', 0.5, 2)]
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from memory_core.config import RerankSpec
from memory_core.embed import weights_sha256
from memory_core.rerank.models import ResolvedModel, resolve_model
from memory_core.rerank.pool import checked_scores, score_head
from memory_core.types import Candidate, Ranked


@runtime_checkable
class Reranker(Protocol):
    """Scores ``(query, text)`` pairs; returns one float per text, in the order given."""

    def score(self, query: str, texts: Sequence[str]) -> Sequence[float]: ...

    def identity(self) -> dict[str, Any]:
        """Model identity for reports (path or id, weights hash, model card)."""
        ...


class RerankerOutputError(ValueError):
    """A reranker returned the wrong number of scores or a non-finite one."""


def rerank_pool(ranked: Ranked, query: str, texts: Mapping[str, str], reranker: Reranker,
                pool: int) -> Ranked:
    """Score the first ``pool`` candidates with ``reranker`` and order them by score.

    ``texts`` maps memory id -> content for (at least) the pooled candidates. Candidates after
    the pool become ``limit`` drops of stage ``rerank``. Raises whatever the reranker raises,
    and :class:`RerankerOutputError` for a wrong-length or non-finite score list; the caller
    decides between an error and a recorded fallback.
    """
    def score(head: Sequence[Candidate]) -> list[float]:
        return checked_scores(reranker.score(query, [texts[c.memory_id] for c in head]),
                              len(head), RerankerOutputError, "reranker", "texts")
    return score_head(ranked, pool, score)


class CrossEncoderReranker:
    """A sentence-transformers ``CrossEncoder``, resolved at construction and loaded lazily.

    ``score`` runs ``CrossEncoder.predict`` (under ``torch.inference_mode``) in batches of
    ``spec.batch_size`` pairs truncated to ``spec.max_length`` tokens, with the model's own
    activation (sigmoid for the project's one-logit models).
    """

    def __init__(self, spec: RerankSpec, resolved: ResolvedModel | None = None):
        self.spec = spec
        self.resolved = resolved or resolve_model(spec)
        self._model = None
        self._lock = threading.Lock()
        self._sha: str | None = None

    @property
    def model(self):
        """The loaded ``CrossEncoder`` (loaded on first access)."""
        with self._lock:
            if self._model is None:
                from sentence_transformers import CrossEncoder

                self._model = CrossEncoder(self.resolved.location, device=self.spec.device,
                                           max_length=self.spec.max_length,
                                           local_files_only=self.resolved.local_files_only)
        return self._model

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        scores = self.model.predict([(query, t) for t in texts], batch_size=self.spec.batch_size,
                                    show_progress_bar=False, convert_to_numpy=True)
        return [float(s) for s in scores]

    def identity(self) -> dict[str, Any]:
        if self._sha is None:
            self._sha = weights_sha256(self.resolved.location)
        card = self.resolved.card or {}
        return {"model": self.resolved.location, "source": self.resolved.source,
                "weights_sha256": self._sha, "name": card.get("name"),
                "card": card or None}
