import pytest

from memory_core import context
from memory_core.config import DedupSpec
from memory_core.results.dedup import collapse_duplicates, jaccard_estimate, minhash_signature
from memory_core.results.cuts import cut_limit, cut_min_score
from memory_core.rerank.identity import rank_scores, score_by_rank
from memory_core.types import BlockOrder, Candidate, Channel, DropReason, Ranked, Result


def _ranked(n):
    return Ranked(tuple(Candidate(f"m{i}", 1.0 / (i + 1), i + 1, Channel.FUSED) for i in range(n)))


def test_rank_scores_spread_evenly_over_page():
    assert rank_scores(4, 4) == [4 / 4, 3 / 4, 2 / 4, 1 / 4]
    assert rank_scores(6, 4) == [1.0, 0.75, 0.5, 0.25, 0.0, 0.0]
    assert rank_scores(2, 10) == [1.0, 0.5]  # the page is min(limit, n)
    assert rank_scores(0, 5) == []


def test_min_score_then_limit_record_drops():
    ranked = score_by_rank(_ranked(6), limit=4)
    after = cut_limit(cut_min_score(ranked, 0.5), 4)
    assert [c.memory_id for c in after.candidates] == ["m0", "m1", "m2"]
    reasons = {d.memory_id: d.reason for d in after.drops}
    assert reasons == {"m3": DropReason.MIN_SCORE, "m4": DropReason.MIN_SCORE,
                       "m5": DropReason.MIN_SCORE}
    assert next(d for d in after.drops if d.memory_id == "m3").score == 0.25


def test_limit_drops_keep_rank_and_score():
    after = cut_limit(_ranked(5), 2)
    assert [(d.memory_id, d.rank, d.reason) for d in after.drops] == [
        ("m2", 3, DropReason.LIMIT), ("m3", 4, DropReason.LIMIT), ("m4", 5, DropReason.LIMIT)]


def test_exact_and_near_duplicates_are_dropped():
    spec = DedupSpec()
    texts = {"m0": "Alice works at Globex since 2024.", "m1": "Alice works at Globex since 2024!",
             "m2": "Bob likes green tea in the morning.", "m3": "Alice works at Globex since 2024."}
    sigs = {m: (t, minhash_signature(t, spec)) for m, t in texts.items()}
    sigs["m3"] = (texts["m0"], None)  # exact copy of m0: caught by hash, no signature needed
    ranked = Ranked(tuple(Candidate(m, 1.0, i + 1, Channel.FUSED) for i, m in enumerate(texts)))
    out = collapse_duplicates(ranked, sigs, spec)
    assert [c.memory_id for c in out.candidates] == ["m0", "m2"]
    details = {d.memory_id: d.detail for d in out.drops}
    assert details["m1"] == "near_duplicate_of:m0"
    assert details["m3"] == "exact_duplicate_of:m0"
    assert all(d.reason is DropReason.DEDUP for d in out.drops)


def test_minhash_jaccard_estimate_separates():
    spec = DedupSpec()
    a = minhash_signature("The payments team migrated invoices to Stripe in March", spec)
    b = minhash_signature("The payments team migrated invoices to Stripe in March!", spec)
    c = minhash_signature("Our mobile app rewrite starts next quarter in Swift", spec)
    assert jaccard_estimate(a, b) == 1.0
    assert jaccard_estimate(a, c) < 0.3


def _result(mid, content, recorded):
    return Result(mid, "s", content, "fact", 1.0, (), None, {}, None, (), (), recorded,
                  recorded, None, None, None, None, None)


def test_block_numbered_without_header_and_budget_drops_lowest_first():
    rs = [_result("a", "first memory text", "2024-01-02"), _result("b", "second one", "2024-01-01"),
          _result("c", "third", "2024-01-03")]
    block = context.render_block(rs, BlockOrder.RELEVANCE)
    assert block == "1. first memory text\n2. second one\n3. third"
    assert context.estimate_tokens(block, 4.0) == -(-len(block) // 4)
    kept, cut = context.fit_budget(rs, BlockOrder.RELEVANCE, 10, 4.0)
    assert [r.memory_id for r in kept] == ["a", "b"] and [r.memory_id for r in cut] == ["c"]
    kept, cut = context.fit_budget(rs, BlockOrder.RELEVANCE, 1, 4.0)
    assert kept == [] and [r.memory_id for r in cut] == ["a", "b", "c"]


def test_stable_block_orders_by_record_time_with_bullets():
    rs = [_result("a", "A", "2024-01-02"), _result("b", "B", "2024-01-01")]
    assert context.render_block(rs, BlockOrder.STABLE) == "- B\n- A"


@pytest.mark.parametrize("text,n", [("", 0), ("abcd", 1), ("abcde", 2)])
def test_token_estimate(text, n):
    assert context.estimate_tokens(text, 4.0) == n


def test_shared_permutations_give_datasketchs_own_signature():
    """Signatures reuse one seeded MinHash's permutations: the values are those a fresh
    ``MinHash(num_perm, seed=1)`` gives (stored signatures stay comparable)."""
    import numpy as np
    from datasketch import MinHash

    from memory_core.config import DedupSpec
    from memory_core.results.dedup import shingles

    for num_perm in (16, 64):
        spec = DedupSpec(num_perm=num_perm)
        for text in ("Alice moved the red piano", "", "naïve café 42 times", "a b c d e f"):
            fresh = MinHash(num_perm=num_perm, seed=1)
            fresh.update_batch(list(shingles(text, spec.shingle_words)))
            want = np.asarray(fresh.hashvalues, dtype=np.uint64).tobytes()
            assert minhash_signature(text, spec) == want
