"""Fusion's spec (``fusion``): the method, the norm, the channel weights, the boosts after
fusion and score completion (:mod:`memory_core.fusion`), and its two closed choices
(:class:`FusionMethod`, :class:`Norm`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from memory_core.config.choices import parse_choice


class FusionMethod(StrEnum):
    """``fusion.method``: how the channels' lists become one (:data:`memory_core.fusion.FUSERS`)."""

    RRF = "rrf"
    WEIGHTED = "weighted"


class Norm(StrEnum):
    """``fusion.norm``: how the weighted sum puts a list's scores on a common scale
    (:func:`memory_core.fusion.normalize.normalize`, whose docstring has the formulas)."""

    MINMAX = "minmax"
    ZSCORE = "zscore"
    THEORETICAL = "theoretical"
    ANCHORED = "anchored"


# the channels whose scores fusion.complete can fill in for pooled memories they did not list
COMPLETABLE = ("dense", "keyword")


@dataclass(frozen=True)
class FusionSpec:
    """Fusion over the union of every channel's candidates.

    ``method`` (:class:`FusionMethod`): ``rrf`` (reciprocal rank, ``rrf_k``) or ``weighted``
    (weighted sum of per-channel scores normalised by ``norm``, :class:`Norm`: ``minmax`` |
    ``zscore`` | ``theoretical`` | ``anchored``; a channel missing from ``weights`` weighs 1.0).
    See ``memory_core/fusion/``.
    """

    # default: a weighted sum (RRF let the weaker MiniLM list dilute BM25 on conversation
    # turns; docs/recorded_figures_archive.md "First stage on conversation turns") of scores
    # normalised by the theoretical min-max (s / max,
    # floor 0: a channel's weakest hit keeps what it scored above a memory the channel did not
    # list, which min-max mapped to the same 0, and a small cosine spread is not stretched to
    # a whole unit; issue 33's code-word case, tests/memory_core/fusion/test_fusion_codeword.py).
    # Among the norms that keep a hit apart from a miss, the weights (dense 0.7-3, temporal
    # 0.25-1, graph 0-1) and person_weight were chosen on LongMemEval oracle outside S
    # (data=longmemeval_pooled) and the synthetic world; docs/recorded_figures_archive.md
    # "Fusion that keeps a hit apart from a miss"
    method: FusionMethod = FusionMethod.WEIGHTED
    rrf_k: int = 60
    norm: Norm = Norm.THEORETICAL
    weights: Mapping[str, float] = field(default_factory=lambda: {
        "dense": 1.0, "keyword": 1.0, "temporal": 0.5, "graph": 0.25, "recency": 0.2})
    # after fusion (memory_core/fusion/boost.py): a memory also scores by the best fused score
    # of its session (hierarchical evidence) and when the query names its speaker
    # (``metadata[speaker_key]``); 0 = off
    # both off by default (docs/recorded_figures_archive.md "First stage on conversation
    # turns"): session evidence lowered
    # LongMemEval S turn recall; the speaker boost helps LoCoMo's categories 1-4 but costs its
    # adversarial category 5 more (questions that name the wrong person), net negative overall
    session_weight: float = 0.0
    speaker_weight: float = 0.0
    speaker_key: str = "speaker"
    # the question's grammatical person names whose turns hold the answer: what "you" said
    # before -> the agent's turns (metadata[role_key] == agent_role), else "I/my/me" or a
    # request to "you" -> the asker's (== asker_role); memories without that metadata and
    # third-person questions are left alone (memory_core/fusion/person.py). 0.75 chosen on
    # LongMemEval oracle questions outside the S subset (0 / 0.1 / 0.25 / 0.5 / 0.75 / 1 under
    # the theoretical min-max; docs/recorded_figures_archive.md), never on LoCoMo (whose turns carry
    # no role)
    person_weight: float = 0.75
    # a turn that replies to a pooled question (the next turn of its session after a turn
    # holding "?") also scores by that question's fused score: "How did you two meet?" ->
    # "It happened at yoga in the park." (memory_core/fusion/boost.py); 0 = off. Only between
    # turns without a chat role (metadata[role_key]): in LongMemEval's user-assistant chats
    # it cost oracle turn recall_all@10 0.924 -> 0.875 at 0.5. 0.25 chosen on LoCoMo by 2-fold
    # cross-fitting over its conversations under the theoretical min-max (0.125 / 0.25 / 0.5 /
    # 1: 0.25 on every half of three seeded deals, by recall@10; no other data set has
    # conversations between people with evidence labels; docs/recorded_figures_archive.md)
    reply_weight: float = 0.25
    # a session whose turns at alternate positions differ in median length by this factor or
    # more (both sides >= 2 turns) is read as a user's chat with an assistant
    # (memory_core/fusion/chat.py): its questions' replies are not lifted (as between turns
    # that carry a chat role) and, with infer_roles, its pooled turns without a role take the
    # one their position gives (the longer side the agent_role's) for the person term. 0 =
    # never (every session without roles is a conversation between people, as before). 3:
    # LongMemEval's chats (oracle outside S, the choice set) read as chats at 98.9%,
    # MemoryBank's user-companion sessions at 1.4% (docs/recorded_figures_archive.md, issue 38)
    chat_length_ratio: float = 3.0
    infer_roles: bool = True
    # score completion: every memory of the pool is also scored by each channel named here
    # that did not list it ("dense": its cosine; "keyword": its BM25 on the same words and
    # statistics, none when it holds no query word), and that channel is normalised over the
    # whole pool, so a find of another channel is not scored as if this one had nothing to say
    # of it (memory_core/channels/pool.py completed_scores, memory_core/fusion/weighted.py). The
    # weighted sum only: RRF fuses ranks, which a completed score does not have. Both on:
    # chosen on LongMemEval oracle questions outside S with pooled haystacks
    # (conf/data/longmemeval_pooled.yaml; docs/recorded_figures_archive.md "Score completion")
    complete: tuple[str, ...] = ("dense", "keyword")
    role_key: str = "role"
    asker_role: str = "user"
    agent_role: str = "assistant"

    def __post_init__(self) -> None:
        for name in ("session_weight", "speaker_weight", "person_weight", "reply_weight"):
            w = getattr(self, name)
            if not (isinstance(w, (int, float)) and 0.0 <= w <= 10.0):
                raise ValueError(f"fusion.{name} must be within [0, 10], got {w!r}")
        if not (isinstance(self.chat_length_ratio, (int, float))
                and (self.chat_length_ratio == 0 or 1.0 < self.chat_length_ratio <= 100.0)):
            raise ValueError(f"fusion.chat_length_ratio must be 0 (off) or within (1, 100], "
                             f"got {self.chat_length_ratio!r}")
        if not isinstance(self.infer_roles, bool):
            raise ValueError(f"fusion.infer_roles must be true or false, got "
                             f"{self.infer_roles!r}")
        for name in ("speaker_key", "role_key"):
            key = getattr(self, name)
            if not key or any(ch in key for ch in '"\\'):
                raise ValueError(f"fusion.{name} must be a non-empty metadata key without "
                                 f"quotes or backslashes, got {key!r}")
        for name in ("asker_role", "agent_role"):
            if not getattr(self, name):
                raise ValueError(f"fusion.{name} must be a non-empty role name")
        if self.asker_role == self.agent_role:
            raise ValueError("fusion.asker_role and fusion.agent_role must differ")
        object.__setattr__(self, "method", parse_choice(FusionMethod, self.method,
                                                        "fusion.method"))
        object.__setattr__(self, "norm", parse_choice(Norm, self.norm, "fusion.norm"))
        if isinstance(self.complete, str) or not isinstance(self.complete, (list, tuple)) \
                or not all(isinstance(c, str) for c in self.complete):
            raise ValueError(f"fusion.complete must be a list of channel names, got "
                             f"{self.complete!r}")
        object.__setattr__(self, "complete", tuple(self.complete))
        bad = sorted(set(self.complete) - set(COMPLETABLE))
        if bad:
            raise ValueError(f"fusion.complete: unknown channel(s) {', '.join(bad)}; valid: "
                             f"{', '.join(COMPLETABLE)}")
