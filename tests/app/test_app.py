"""The dashboard's views, driven through ``streamlit.testing.v1.AppTest`` on a tiny run.

Expected values are read independently from the run's files and store (not through the app),
so each test checks what the page shows against the data it claims to show.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

from experiments.compare import compare, load_run
from experiments.dashboard.live import field_support
from experiments.rundir import open_run_store
from experiments.stats import paired_test
from memory_core import MemoryEngine
from memory_core.trace import ExpansionTrace, RerankRow, RerankTrace
from memory_core.types import SearchedEntry

APP = Path(__file__).resolve().parents[2] / "app.py"
pytestmark = pytest.mark.model


@pytest.fixture
def app(tiny_outputs, monkeypatch):
    monkeypatch.setenv("MEMORY_CORE_OUTPUTS", str(tiny_outputs["outputs"]))
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    assert not at.exception
    return at


def _select_run(at: AppTest, run: Path) -> AppTest:
    at.selectbox(key="run").set_value(str(run)).run()
    assert not at.exception
    return at


def _per_query(run: Path) -> pl.DataFrame:
    return pl.read_parquet(run / "per_query.parquet")


def _frame(at: AppTest, *columns: str):
    """The first dataframe on the page that has all ``columns`` (AppTest exposes no key)."""
    for df in at.dataframe:
        if set(columns) <= set(df.value.columns):
            return df.value
    raise AssertionError(f"no dataframe with columns {columns}")


def _table_with(at: AppTest, *columns: str):
    """The first static table on the page that has all ``columns``."""
    for t in at.table:
        if set(columns) <= set(t.value.columns):
            return t.value
    raise AssertionError(f"no table with columns {columns}")


def _hypothetical_answers(run: Path) -> set[str]:
    """The texts tier 4 embedded as hypothetical answers in the run's escalated reads (the
    top hits it names in each receipt's escalation record, joined as the rewrite joins them)."""
    with open_run_store(run) as eng:
        records = [r.trace.escalation for r in eng.list_receipts(limit=100_000)
                   if r.trace.escalation is not None]
        found = eng.memories([m for e in records for m in e.hyde_from])
    return {" ".join(found[m].content for m in e.hyde_from) for e in records if e.hyde_from}


def _markdowns(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown]


def test_per_query_view_one_candidate_table(app, tiny_outputs):
    run = tiny_outputs["smoke"]
    _select_run(app, run)
    pq = _per_query(run)
    # a query whose receipt cut by limit as well as by dedup
    with MemoryEngine.open(run / "store") as eng:
        receipts = {rid: eng.get_receipt(rid) for rid in pq["receipt_id"].to_list()}
        rid, receipt = next((r, rc) for r, rc in receipts.items()
                            if {"limit", "dedup"} <= {d.reason.value for d in rc.dropped})
        content = {m: eng.get_memory(m).content
                   for m in [k.memory_id for k in receipt.kept]
                   + [d.memory_id for d in receipt.dropped]}
    app.selectbox(key="q_series").set_value("all modes and views").run()
    app.selectbox(key="receipt_id").set_value(rid).run()
    assert not app.exception

    row = pq.filter(pl.col("receipt_id") == rid).row(0, named=True)
    assert app.subheader[0].value == row["text"]
    table = _frame(app, "memory_id", "content", "final_rank", "cut")
    assert list(table.columns[:2]) == ["memory_id", "content"]  # id and content first
    assert len(table) == len({k.memory_id for k in receipt.kept}
                             | {d.memory_id for d in receipt.dropped})
    kept = table[table["final_rank"].notna()]
    assert list(kept["memory_id"]) == [k.memory_id for k in receipt.kept]
    assert list(kept["final_rank"]) == [k.rank for k in receipt.kept]
    assert list(kept["final_score"]) == pytest.approx([k.score for k in receipt.kept])
    for k in receipt.kept:  # the rank each channel gave, from the receipt
        got = table[table["memory_id"] == k.memory_id].iloc[0]
        for channel, rank in k.channel_ranks.items():
            assert got[f"{channel}_rank"] == rank
    assert all(content[m][:40].split()[0] in c for m, c in zip(table["memory_id"],
                                                                 table["content"], strict=True))
    # every drop: its reason, stage, and the score and rank it had when cut
    dropped = table[table["cut"].notna()].set_index("memory_id")
    for d in receipt.dropped:
        got = dropped.loc[d.memory_id]
        assert (got["cut"], got["stage"]) == (d.reason.value, d.stage)
        assert got["score_at_cut"] == pytest.approx(d.score)
        assert got["rank_at_cut"] == d.rank
        # cut before scoring: a fused score; after: the fast-mode position
        assert got["cut_scale"] == ("fused" if d.stage in ("dedup", "prefer_observations")
                                    else "position")
    counts = Counter(d.reason.value for d in receipt.dropped)
    md = _markdowns(app)
    assert (f"#### Candidates ({len(table)}: kept {len(receipt.kept)}, "
            f"dropped {len(receipt.dropped)})") in md
    captions = [c.value for c in app.caption]
    assert any(c.startswith("Dropped: " + " · ".join(f"{r} {n}" for r, n in counts.items()))
               and "final scores are **position**" in c for c in captions)
    assert any(c.startswith("Score scales: **position**") and "**fused**" in c
               for c in captions)

    # gold rows: the gold-only toggle keeps exactly the rows flagged gold
    gold_ids = set(table.loc[table["gold"].fillna(False).astype(bool), "memory_id"])
    if row["recall@5"] == 1.0:
        assert gold_ids
    app.toggle(key="cand_gold_only").set_value(True).run()
    only = _frame(app, "memory_id", "final_rank", "cut")
    assert set(only["memory_id"]) == gold_ids and len(only) == len(gold_ids)
    app.toggle(key="cand_gold_only").set_value(False).run()

    block = app.code[0].value.splitlines()
    assert len(block) == len(receipt.kept) and block[0].startswith("1. ")
    # the raw stages record only on request (it is large on real runs)
    n_json = len(app.json)
    app.toggle(key="show_stages").set_value(True).run()
    assert len(app.json) == n_json + 1
    assert set(json.loads(app.json[-1].value)) == set(receipt.stages)


def test_per_query_receipt_filters(app, tiny_outputs):
    """The receipt list narrows to one mode/view, and to the queries that missed gold at the
    run's largest recall@k."""
    run = tiny_outputs["smoke"]
    _select_run(app, run)
    pq = _per_query(run)
    assert app.selectbox(key="q_series").value == "fast/raw_turns"  # the first, not all
    app.selectbox(key="q_series").set_value("fast/with_observations").run()
    part = pq.filter(pl.col("view") == "with_observations")
    ids = app.selectbox(key="receipt_id").options
    assert len(ids) == part.height
    assert all(" · fast/with_observations · " in o for o in ids)
    app.toggle(key="q_missed").set_value(True).run()
    assert app.toggle(key="q_missed").label == "only queries that missed gold (recall@5 < 1)"
    missed = part.filter(pl.col("recall@5") < 1.0)
    if missed.height:
        assert set(app.selectbox(key="receipt_id").options) <= {
            o for o in ids if any(q in o for q in missed["query_id"])}
        assert len(app.selectbox(key="receipt_id").options) == missed.height
    else:
        assert any("No query matches" in i.value for i in app.info)



def test_per_query_drop_targets_link_and_focus(app, tiny_outputs):
    """A dedup drop points at the memory it collapsed into: the link opens this receipt on it,
    and the memory panel's button moves the focus there."""
    run = tiny_outputs["smoke"]
    _select_run(app, run)
    pq = _per_query(run)
    with MemoryEngine.open(run / "store") as eng:
        receipts = {rid: eng.get_receipt(rid) for rid in pq["receipt_id"].to_list()}
        rid, drop = next((r, d) for r, rc in receipts.items() for d in rc.dropped
                         if d.detail and ":" in d.detail and d.reason.value == "dedup")
        target = drop.detail.split(":", 1)[1]
        target_text = eng.get_memory(target).content
    app.selectbox(key="q_series").set_value("all modes and views").run()
    app.selectbox(key="receipt_id").set_value(rid).run()
    table = _frame(app, "memory_id", "target")
    link = table.set_index("memory_id").loc[drop.memory_id, "target"]
    assert link.startswith("?") and f"receipt={rid}" in link and link.endswith(f"focus={target}")

    app.selectbox(key="focus").set_value(drop.memory_id).run()
    assert not app.exception
    assert any(m.value.startswith(f"**dropped: dedup at {drop.stage}**")
               for m in app.markdown)
    app.button(key="focus_target").click().run()
    assert app.selectbox(key="focus").value == target
    assert target_text in [t.value for t in app.text]


def test_run_view_metrics_curves_and_worst_queries(app, tiny_outputs):
    run = tiny_outputs["smoke"]
    _select_run(app, run)
    app.radio(key="view").set_value("Run").run()
    assert not app.exception
    pq = _per_query(run)

    metrics = json.loads((run / "metrics.json").read_text())
    # what was run: the dataset files' sha256 from metrics.json
    identity = _frame(app, "what", "value").set_index("what")["value"]
    for name, sha in metrics["dataset"]["sha256"].items():
        assert identity[f"dataset.sha256.{name}"] == sha
    # metrics with their 95% CIs, as metrics.json has them
    metrics_table = _frame(app, "mode", "view", "kind", "n", "recall@1")
    assert set(metrics_table["kind"]) == {"all", *pq["kind"].unique().to_list()}
    cell = metrics["metrics"]["fast"]["raw_turns"]["all"]["recall@1"]
    shown = metrics_table[(metrics_table["view"] == "raw_turns")
                          & (metrics_table["kind"] == "all")]["recall@1"].iloc[0]
    assert shown == f"{cell['mean']:.3f} [{cell['ci_low']:.3f}, {cell['ci_high']:.3f}]"
    # the latency column is timed after the warm-up, and says so; the warm-up's own figures
    # are labelled apart (issue 33: the first mode used to pay every query embedding)
    assert "latency_ms_p50" in metrics_table.columns
    latency = metrics["latency"]
    # every query vector was cached before timing; what the timed reads embedded is tier 4's
    # hypothetical answers (one per distinct text of the escalated reads' top hits)
    assert latency["computed_while_timed"] == len(_hypothetical_answers(run))
    assert set(latency["first_retrieve_ms"]) == {"fast"}
    note = next(c.value for c in app.caption if c.value.startswith("p50 ms (warm): "))
    assert "query embedding p50" in note and "model load and first use included): fast" in note
    curves = _frame(app, "k", "mean", "ci_low", "ci_high", "n_clusters")
    # every k up to the limit (per-query recall_curve) or the scored cut-offs
    assert {1, 3, 5} <= set(curves["k"]) <= {1, 2, 3, 4, 5}
    raw = pq.filter(pl.col("view") == "raw_turns")
    for k in (1, 3, 5):  # the curve agrees with the run's scored recall@k columns
        got = curves[(curves["view"] == "raw_turns") & (curves["k"] == k)].iloc[0]
        assert got["mean"] == pytest.approx(raw[f"recall@{k}"].mean())
        assert got["ci_low"] <= got["mean"] <= got["ci_high"]
        assert got["n_clusters"] == raw["conversation"].n_unique()

    # breakdown per category / question type: the per-group means of the per-query rows
    app.selectbox(key="bd_metric").set_value("recall@3")
    app.selectbox(key="bd_by").set_value("kind").run()
    bd = _frame(app, "kind", "mean", "ci_low", "ci_high", "n")
    expected = raw.group_by("kind").agg(pl.col("recall@3").mean(), pl.len())
    for kind, mean, n in expected.iter_rows():
        got = bd[(bd["view"] == "raw_turns") & (bd["kind"] == kind)].iloc[0]
        assert (got["mean"], got["n"]) == (pytest.approx(mean), n)
    # histograms: density by default, log counts on request
    assert app.radio(key="hist_scale").value == "density"
    app.radio(key="hist_scale").set_value("log count").run()
    assert not app.exception

    app.selectbox(key="worst_metric").set_value("recall@1").run()
    worst = _frame(app, "open", "receipt_id")
    missed = pq.filter(pl.col("recall@1") < 1.0)
    assert len(worst) == missed.height > 0
    assert (worst["recall@1"] < 1.0).all()
    assert all(u.startswith("?") and "receipt=rcpt_" in u for u in worst["open"])

    # filter by kind: only multi-subject questions remain
    app.multiselect(key="run_kinds").set_value(["multi_subject"]).run()
    worst = _frame(app, "open", "receipt_id")
    assert set(worst["kind"]) == {"multi_subject"}
    assert len(worst) == missed.filter(pl.col("kind") == "multi_subject").height

    # open a worst query's receipt in the per-query view
    pick = worst["receipt_id"].iloc[0]
    app.selectbox(key="worst_pick").set_value(pick).run()
    app.button(key="open_worst").click().run()
    assert not app.exception
    assert app.radio(key="view").value == "Per-query"
    assert app.selectbox(key="receipt_id").value == pick
    text = pq.filter(pl.col("receipt_id") == pick)["text"][0]
    assert app.subheader[0].value == text


def test_playground_runs_live_queries_and_shows_errors(app, tiny_outputs):
    run = tiny_outputs["smoke"]
    _select_run(app, run)
    app.radio(key="view").set_value("Playground").run()
    assert not app.exception
    with MemoryEngine.open(run / "store") as eng:
        modes = sorted(m.value for m in eng.available_modes)
        spaces = {s.space_id: s.description for s in eng.list_spaces()}
    assert app.selectbox(key="pg_mode").options == modes
    # every space with its description; the page opens on the run's first space (that of its
    # first question: payments, not the first listed nor the store's default, inbox)
    listed = _frame(app, "space_id", "description", "memories")
    assert dict(zip(listed["space_id"], listed["description"], strict=True)) == spaces
    first = _per_query(run)["space_id"][0]
    assert first == "payments" and sorted(spaces)[0] != first
    assert app.selectbox(key="pg_space").value == first
    app.slider(key="pg_limit").set_value(3)
    app.text_input(key="pg_query").input("Who owns the pricing table?").run()
    assert not app.exception and not app.error
    assert not any("Choose a space" in i.value for i in app.info)  # a first query answers
    assert not app.exception and not app.error
    results = _frame(app, "rank", "score", "content")
    assert list(results.columns[:3]) == ["rank", "score", "content"]  # content up front
    assert 0 < len(results) <= 3
    assert "pricing table" in results["content"].iloc[0]
    assert any(c.value.startswith("score = **position**") for c in app.caption)  # fast mode
    md = _markdowns(app)
    assert any(m.startswith("#### Candidates (") and f"kept {len(results)}," in m
               for m in md)  # the live receipt is shown
    assert any(c.value.startswith("Dropped: ") and "limit" in c.value for c in app.caption)

    # min_score is bounded to the scores' range [0, 1]
    assert (app.number_input(key="pg_min").min, app.number_input(key="pg_min").max) == (0.0, 1.0)
    # a min_score floor: every cut below it is a min_score drop in the receipt
    app.toggle(key="pg_use_min").set_value(True).run()
    app.number_input(key="pg_min").set_value(0.7).run()
    results = _frame(app, "rank", "content")
    assert (results["score"] >= 0.7).all()
    assert any(c.value.startswith("Dropped: ") and "min_score" in c.value for c in app.caption)

    # fast vs accurate side by side: offered only when the engine has both modes
    both = {"fast", "accurate"} <= set(modes)
    assert app.toggle(key="pg_side").disabled == (not both)
    if both:
        app.toggle(key="pg_side").set_value(True).run()
        assert not app.exception
        fast, accurate = _frame(app, "rank", "content"), app.dataframe[-1].value
        assert len(fast) <= 3 and len(accurate) <= 3
        app.toggle(key="pg_side").set_value(False).run()

    # unsupported toggles are disabled with the engine's reason, and never sent
    with MemoryEngine.open(run / "store") as eng:
        expand_off = field_support(eng, "expand_query", True, "payments")
        route_off = field_support(eng, "route", "auto", None)
    assert app.toggle(key="pg_expand").disabled == (expand_off is not None)
    assert app.toggle(key="pg_route").disabled == (route_off is not None)
    if expand_off is None and route_off is None:  # both built: a routed, expanded read
        app.toggle(key="pg_use_min").set_value(False)
        app.toggle(key="pg_route").set_value(True)
        app.toggle(key="pg_expand").set_value(True)
        app.text_input(key="pg_query").input(
            "Who owns the pricing table and when did the refund flow move?").run()
        assert not app.exception and not app.error
        md = _markdowns(app)
        assert "#### Routing: spaces searched" in md and "#### Expansion subjects" in md
        assert "Every eligible space's score:" in md
        assert "- Who owns the pricing table\n- when did the refund flow move" in md
        searched = _frame(app, "order", "space_id", "confidence")
        assert set(searched["space_id"]) <= {"payments", "mobile"}
        app.toggle(key="pg_route").set_value(False)
        app.toggle(key="pg_expand").set_value(False).run()

    # a request the engine refuses is shown as its error, nothing else
    app.text_input(key="pg_query").input("   ").run()
    assert not app.exception
    assert "validation_error" in app.error[0].value and "empty_query" in app.error[0].value
    assert not [d for d in app.dataframe if "rank" in d.value.columns]  # no results shown

    # the playground's receipts are kept in the store: the per-query view lists them
    app.radio(key="view").set_value("Per-query").run()
    app.selectbox(key="q_series").set_value("all modes and views").run()
    assert len(app.selectbox(key="receipt_id").options) == _per_query(run).height
    app.toggle(key="all_receipts").set_value(True).run()
    assert any(o.endswith("· payments · Who owns the pricing table?")
               for o in app.selectbox(key="receipt_id").options)


def test_playground_opens_on_each_runs_first_space(app, tiny_outputs):
    """Another space chosen, then another run: the playground starts on that run's first
    space again (and a store of no run on its default space: the side-by-side test)."""
    _select_run(app, tiny_outputs["smoke"])
    app.radio(key="view").set_value("Playground").run()
    app.selectbox(key="pg_space").set_value("mobile").run()
    assert app.selectbox(key="pg_space").value == "mobile"  # the user's choice holds
    other = tiny_outputs["keyword_only"]
    _select_run(app, other)
    assert app.selectbox(key="pg_space").value == _per_query(other)["space_id"][0]
    app.text_input(key="pg_query").input("Who owns the pricing table?").run()
    assert not app.exception and not app.error
    assert "pricing table" in _frame(app, "rank", "content")["content"].iloc[0]


def test_compare_view_matches_experiments_compare(app, tiny_outputs):
    app.radio(key="view").set_value("Compare").run()
    assert not app.exception
    a, b = tiny_outputs["keyword_only"], tiny_outputs["smoke"]
    # by default B is another run than A (the newest other one)
    assert app.selectbox(key="cmp_run_A").value == str(a)
    assert app.selectbox(key="cmp_run_B").value == str(b)
    app.selectbox(key="cmp_view").set_value("with_observations")
    app.multiselect(key="cmp_metrics").set_value(["recall@1", "recall@5", "mrr"]).run()
    assert not app.exception

    # every (group, metric) row is what experiments.compare computes on the same runs
    rows, _ = compare(load_run(a), load_run(b), metrics=["recall@1", "recall@5", "mrr"],
                      mode_a="fast", mode_b="fast", views=["with_observations"],
                      intersect=True, n_resamples=2000, seed=0)
    shown = _frame(app, "group", "metric", "n_clusters", "p_value", "p_holm")
    assert len(shown) == len(rows)
    for r, (_, got) in zip(rows, shown.iterrows(), strict=True):
        assert (got["group"], got["metric"], got["n"], got["n_clusters"]) == (
            r.group, r.metric, r.n, r.n_clusters)
        assert got["delta"] == pytest.approx(r.delta)
        assert (got["ci_low"], got["ci_high"]) == (pytest.approx(r.ci_low),
                                                   pytest.approx(r.ci_high))
        assert (got["p_value"], got["p_holm"]) == (pytest.approx(r.p_value),
                                                   pytest.approx(r.p_holm))
        assert (got["wins"], got["losses"], got["ties"]) == (r.wins, r.losses, r.ties)
        excludes = r.ci_low > 0 or r.ci_high < 0
        assert (got["disagreement"] != "agree") == (excludes != (r.p_value < 0.05))
    # the clustering is stated: method and clusters per row
    n_clusters = {r.n_clusters for r in rows}
    assert any("randomization test" in c.value and "clusters" in c.value
               and str(min(n_clusters)) in c.value for c in app.caption)

    # per-query deltas of the chosen metric: the paired test on the same selections
    app.selectbox(key="cmp_metric").set_value("recall@1").run()

    def scores(run):
        df = _per_query(run).filter(pl.col("view") == "with_observations")
        return dict(zip(df["query_id"], df["recall@1"], strict=True))

    expected = paired_test(scores(a), scores(b), n_resamples=200, seed=0)
    table = _frame(app, "outcome", "delta")
    assert len(table) == expected.wins + expected.losses
    assert set(table["outcome"]) <= {"win", "loss"}
    app.toggle(key="cmp_ties").set_value(True).run()
    assert len(_frame(app, "outcome", "delta")) == expected.n

    # the same selection on both sides is refused, not compared with itself
    app.selectbox(key="cmp_run_B").set_value(str(a)).run()
    assert app.selectbox(key="cmp_mode_B").value == "fast"
    assert any("same selection" in w.value for w in app.warning)


def test_store_directory_shows_routing_and_subjects(tiny_outputs, tmp_path, hash_embedder,
                                                    monkeypatch):
    """A receipt with ``searched`` entries and expansion subjects (as routing and expand_query
    will write them) is shown in full; the store is opened as a plain store directory."""
    store = tmp_path / "store"
    with MemoryEngine.open(store, embedder=hash_embedder) as eng:
        eng.create_space("payments", description="Payments team")
        for text in ("Priya owns the pricing table.", "The payments team moved to Stripe.",
                     "Bob cut failed charges by 24 percent."):
            eng.write("payments", text)
        resp = eng.retrieve(query="Who owns pricing and what moved?", space_id="payments",
                            limit=2, receipt=True)
        base = eng.get_receipt(resp.receipt_id)
        routed = dataclasses.replace(
            base, receipt_id="rcpt_routed",
            searched=(SearchedEntry("payments", 0.91, None), SearchedEntry("mobile", 0.12,
                                                                           "search_failed")),
            trace=dataclasses.replace(base.trace, expansion=ExpansionTrace(
                True, ("who owns pricing", "what moved"))))
        eng.store.save_receipt(routed)
    monkeypatch.setenv("MEMORY_CORE_OUTPUTS", str(tmp_path / "no-outputs"))
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    assert at.sidebar.warning  # no run under the outputs directory: said so
    at.radio(key="source").set_value("Store directory").run()
    at.text_input(key="store_dir").input(str(store)).run()
    at.selectbox(key="receipt_id").set_value("rcpt_routed").run()
    assert not at.exception
    md = _markdowns(at)
    assert "#### Routing: spaces searched" in md
    searched = _frame(at, "order", "space_id", "confidence")
    assert list(searched["space_id"]) == ["payments", "mobile"]
    assert list(searched["confidence"]) == pytest.approx([0.91, 0.12])
    assert list(searched["reason"])[1] == "search_failed"
    assert "- who owns pricing\n- what moved" in md
    assert f"#### Candidates ({len(base.kept) + len(base.dropped)}: kept {len(base.kept)}, " \
        f"dropped {len(base.dropped)})" in md


def test_learned_scorer_receipt_shows_features_and_calibrated_scale(tmp_path, hash_embedder,
                                                                   monkeypatch):
    """A receipt in the learned scorer's shape (the trace's ``rerank`` with ``scorer: stacked``,
    feature names and per-candidate rows) shows its rerank rank and score, one column per
    feature (blank where missing) and says the scores are calibrated probabilities."""
    store = tmp_path / "store"
    with MemoryEngine.open(store, embedder=hash_embedder) as eng:
        eng.create_space("payments", description="Payments team")
        ids = [eng.write("payments", t) for t in ("Priya owns the pricing table.",
                                                   "The payments team moved to Stripe.",
                                                   "Bob cut failed charges by 24 percent.")]
        resp = eng.retrieve(query="Who owns pricing?", space_id="payments", limit=2,
                            receipt=True)
        base = eng.get_receipt(resp.receipt_id)
        order = [k.memory_id for k in base.kept]
        names = ["dense_cos", "bm25", "ce_logit"]
        values = {order[0]: [0.71, 4.2, 2.5], order[1]: [0.33, None, -1.0]}
        scores = {order[0]: 0.93, order[1]: 0.08}
        kept = tuple(dataclasses.replace(k, score=scores[k.memory_id]) for k in base.kept)
        stacked = dataclasses.replace(
            base, receipt_id="rcpt_stacked", kept=kept,
            trace=dataclasses.replace(base.trace, rerank=RerankTrace(
                "ok", "stacked", pool=3, scored=2, model="stacked-test", ms=0.4,
                features=tuple(names),
                rows=tuple(RerankRow(m, scores[m], i, tuple(values[m]))
                           for i, m in enumerate(order, start=1)))))
        eng.store.save_receipt(stacked)
    assert len(ids) == 3
    monkeypatch.setenv("MEMORY_CORE_OUTPUTS", str(tmp_path / "no-outputs"))
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    at.radio(key="source").set_value("Store directory").run()
    at.text_input(key="store_dir").input(str(store)).run()
    at.selectbox(key="receipt_id").set_value("rcpt_stacked").run()
    assert not at.exception
    table = _frame(at, "memory_id", "rerank_rank", "rerank_score", "f_dense_cos")
    kept = table[table["final_rank"].notna()].set_index("memory_id")
    for i, m in enumerate(order, start=1):
        assert kept.loc[m, "rerank_rank"] == i
        assert kept.loc[m, "rerank_score"] == pytest.approx(scores[m])
        for name, v in zip(names, values[m], strict=True):
            got = kept.loc[m, f"f_{name}"]
            assert (got != got) if v is None else got == pytest.approx(v)  # NaN = missing
    assert any("final scores are **calibrated probability** (stacked)" in c.value
               for c in at.caption)


class _LengthReranker:
    """A stand-in cross-encoder (no model): longer memories score higher, in (0, 1)."""

    def __init__(self, spec=None):
        self.spec = spec

    def score(self, query, texts):
        return [len(t) / (len(t) + 40.0) for t in texts]

    def identity(self):
        return {"model": "lengths (test)"}


def test_playground_fast_and_accurate_side_by_side(tiny_outputs, tmp_path, monkeypatch):
    """With both modes available, one query runs in each; accurate results carry the stacked
    scorer's calibrated probabilities (sorted), fast ones positions, and each opens its own
    receipt whose table has rerank columns only in accurate mode."""
    import shutil

    import memory_core.engine

    store = tmp_path / "store"
    shutil.copytree(tiny_outputs["smoke"] / "store", store)
    monkeypatch.setattr(memory_core.engine, "CrossEncoderReranker", _LengthReranker)
    monkeypatch.setenv("MEMORY_CORE_OUTPUTS", str(tmp_path / "no-outputs"))
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    at.radio(key="source").set_value("Store directory").run()
    at.text_input(key="store_dir").input(str(store)).run()
    at.radio(key="view").set_value("Playground").run()
    assert at.selectbox(key="pg_mode").options == ["accurate", "fast"]
    assert not at.toggle(key="pg_side").disabled
    with MemoryEngine.open(store) as eng:  # no run: the store's default space
        default = [s.space_id for s in eng.list_spaces() if s.default]
    assert at.selectbox(key="pg_space").value == default[0] == "inbox"
    at.selectbox(key="pg_space").set_value("payments")
    at.slider(key="pg_limit").set_value(4)
    at.toggle(key="pg_side").set_value(True)
    at.text_input(key="pg_query").input("Who owns the pricing table?").run()
    assert not at.exception and not at.error
    assert [m.value for m in at.markdown if m.value.startswith("##### mode=")] == [
        "##### mode=fast", "##### mode=accurate"]
    fast, accurate = [d.value for d in at.dataframe if "rank" in d.value.columns]
    assert list(fast["score"]) == pytest.approx([1.0, 0.75, 0.5, 0.25])  # (P - i) / P, P = 4
    assert list(accurate["score"]) == sorted(accurate["score"], reverse=True)
    assert all(0.0 <= s <= 1.0 for s in accurate["score"])
    captions = [c.value for c in at.caption]
    assert any(c.startswith("score = **position**") for c in captions)
    assert any(c.startswith("score = **calibrated probability**") for c in captions)

    at.button(key="pg_open_accurate").click().run()
    assert at.radio(key="view").value == "Per-query"
    table = _frame(at, "memory_id", "rerank_rank", "rerank_score", "final_rank")
    kept = table[table["final_rank"].notna()]
    assert list(kept["rerank_score"]) == pytest.approx(list(accurate["score"]), abs=1e-5)
    assert list(kept["rerank_rank"]) == [1, 2, 3, 4]


def test_deep_link_opens_a_receipt(tiny_outputs, monkeypatch):
    """A linked receipt opens in its own mode/view (not the list's default one)."""
    run = tiny_outputs["smoke"]
    pq = _per_query(run)
    rid = pq.filter(pl.col("view") == "with_observations")["receipt_id"][3]
    monkeypatch.setenv("MEMORY_CORE_OUTPUTS", str(tiny_outputs["outputs"]))
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.query_params["view"] = "query"
    at.query_params["run"] = str(run)
    at.query_params["receipt"] = rid
    at.run()
    assert not at.exception
    assert at.selectbox(key="run").value == str(run)
    assert at.selectbox(key="receipt_id").value == rid
    assert at.selectbox(key="q_series").value == "fast/with_observations"
