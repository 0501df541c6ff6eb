"""The dashboard's Compare view takes two systems as it takes two modes (issue 50): a
memory_core run against a bm25 run of the hand-written data set, rows equal to
experiments.compare's, each side naming its system, the outside side saying it keeps no
receipts (its receipt button disabled)."""

from __future__ import annotations

from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "examples" / "team_notes"
APP = Path(__file__).resolve().parents[2] / "app.py"
TINY = ["progress=false", "eval.n_resamples=200", "eval.plots=false", "eval.modes=[fast]",
        "paths.output_dir=/unused", "paths.root_dir=/unused", "data=jsonl",
        f"data.path={EXAMPLE}"]

pytestmark = [pytest.mark.model, pytest.mark.slow]


def test_compare_view_pairs_memory_core_with_bm25(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from experiments.compare import compare, load_run
    from experiments.config import compose_config
    from experiments.run import run_experiment

    mc = tmp_path / "outputs" / "run" / "runs" / "a_memory_core"
    bm = tmp_path / "outputs" / "run" / "runs" / "b_bm25"
    run_experiment(compose_config("config", ["system=memory_core", *TINY]), mc)
    run_experiment(compose_config("config", ["system=bm25", *TINY]), bm)
    monkeypatch.setenv("MEMORY_CORE_OUTPUTS", str(tmp_path / "outputs"))
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    at.radio(key="view").set_value("Compare").run()
    assert not at.exception
    at.selectbox(key="cmp_run_A").set_value(str(mc)).run()
    at.selectbox(key="cmp_run_B").set_value(str(bm)).run()
    assert at.selectbox(key="cmp_mode_A").value == "fast"
    assert at.selectbox(key="cmp_mode_B").value == "bm25"
    assert at.selectbox(key="cmp_view").options == ["raw_turns"]
    at.multiselect(key="cmp_metrics").set_value(["recall@5", "mrr"]).run()
    assert not at.exception
    captions = " ".join(c.value for c in at.caption)
    assert "System A: **memory_core**" in captions and "System B: **bm25**" in captions
    assert any("B is bm25, an outside system: no receipts" in i.value for i in at.info)
    rows, _ = compare(load_run(mc), load_run(bm), metrics=["recall@5", "mrr"],
                      mode_a="fast", mode_b="bm25", views=["raw_turns"], intersect=True,
                      n_resamples=2000, seed=0)
    shown = next(d.value for d in at.dataframe if "p_holm" in d.value.columns)
    assert len(shown) == len(rows)
    for r, (_, got) in zip(rows, shown.iterrows(), strict=True):
        assert (got["group"], got["metric"], got["n"]) == (r.group, r.metric, r.n)
        assert got["delta"] == pytest.approx(r.delta)
        assert got["p_holm"] == pytest.approx(r.p_holm)
    at.toggle(key="cmp_ties").set_value(True).run()
    assert at.button(key="cmp_open_b").disabled
    assert not at.button(key="cmp_open_a").disabled
