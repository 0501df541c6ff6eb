"""``eval.answer=true`` end to end on the tiny synthetic world against scripted local servers
(tests/llm_server.py; real HTTP): answers and grades per category with intervals, the modes
paired on answer_accuracy, the judge audit's false-accept rate as the scripted judge makes it,
prompts, model ids and cache hashes in metrics.json, a second run answered from the cache, and
the refusals before any work."""

from __future__ import annotations

import json

import pytest

from llm_server import ScriptedLLM, accept_all, exact_judge, first_memory
from experiments.answers import JUDGE_PROMPT_VERSION, METRIC, judge_messages, verdict
from experiments.judge_audit import change_date, change_name, change_number, wrong_answers

pytestmark = pytest.mark.model  # the run embeds with MiniLM

BASE = ["data=synthetic_tiny", "progress=false", "eval.n_resamples=200", "eval.plots=false",
        "eval.pool_ks=[]", "paths.output_dir=/unused", "paths.root_dir=/unused",
        "eval.limit_queries=12"]


def _run(overrides, run_dir):
    from experiments.config import compose_config
    from experiments.run import run_experiment

    return run_experiment(compose_config("config", [*BASE, *overrides]), run_dir)


@pytest.fixture
def no_env(monkeypatch):
    for prefix in ("MEMORY_CORE_LLM", "MEMORY_CORE_JUDGE"):
        for name in ("URL", "MODEL", "API_KEY"):
            monkeypatch.delenv(f"{prefix}_{name}", raising=False)


def _models(llm, judge, cache, judge_model="judge-1"):
    return ["eval.answer=true", f"llm.url={llm.url}", "llm.model=answerer-1",
            f"llm.cache_dir={cache}", f"judge.url={judge.url}", f"judge.model={judge_model}",
            f"judge.cache_dir={cache}"]


def test_answers_judged_per_category_audited_and_cached(tmp_path, no_env):
    cache = tmp_path / "llm-cache"
    with ScriptedLLM(first_memory) as llm, ScriptedLLM(exact_judge) as judge:
        meta = _run(_models(llm, judge, cache), tmp_path / "one")
        sent = (len(llm.requests), len(judge.requests))
        again = _run(_models(llm, judge, cache), tmp_path / "two")
        assert (len(llm.requests), len(judge.requests)) == sent  # nothing sent the second time
        judge.reply = accept_all  # another judge model id: its own cache keys
        lenient = _run(_models(llm, judge, cache, judge_model="judge-lenient"),
                       tmp_path / "three")
    a = meta["answers"]
    assert a["denominators"]["with_gold"] == 12 and a["denominators"]["answers"] == 24
    lines = [json.loads(x) for x in (tmp_path / "one" / "answers.jsonl").read_text().splitlines()]
    # fast and accurate may give one question the same block: one prompt, asked once
    asked = {(x["question"], tuple(x["memory_ids"])) for x in lines}
    assert sent[0] == a["usage"]["response"]["requests"] == len(asked)
    assert a["usage"]["response"]["replies"] == 24
    assert sent[1] == a["usage"]["judge"]["requests"] <= 24 + 12 + sum(a["audit"]["made"].values())
    assert a["prompts"]["judge"]["version"] == JUDGE_PROMPT_VERSION
    assert a["models"]["response"]["model"] == "answerer-1"
    assert a["models"]["judge"]["model"] == "judge-1" and a["judge_note"] is None
    assert a["usage"]["response"]["prompt_tokens"] > 0
    # the scripted answerer repeats the top memory; the exact judge accepts it when it is the
    # gold: accuracy is the share of questions whose evidence is ranked first (recall@1 here:
    # one gold memory each, the tiny world has no multi-fact questions in the first 12)
    cell = meta["metrics"]["fast"]["raw_turns"]["all"]
    assert cell[METRIC]["mean"] == pytest.approx(cell["recall@1"]["mean"])
    assert cell[METRIC]["ci_low"] <= cell[METRIC]["mean"] <= cell[METRIC]["ci_high"]
    kinds = [k for k in meta["metrics"]["fast"]["raw_turns"] if k != "all"]
    assert kinds and all(METRIC in meta["metrics"]["fast"]["raw_turns"][k] for k in kinds)
    assert meta["metrics"]["fast"]["with_observations"]["all"][METRIC] is None
    assert METRIC in meta["mode_comparison"]["raw_turns"]["all"]  # fast vs accurate, paired
    assert len(lines) == 24 and all(x["cited_ids"] == x["memory_ids"][:1] for x in lines)
    # the audit: this judge accepts the gold and nothing else
    assert a["audit"]["gold_accept"]["mean"] == 1.0 and a["audit"]["false_accept"]["mean"] == 0.0
    assert a["audit"]["made"]["not_mentioned"] == 12
    summary = (tmp_path / "one" / "summary.md").read_text()
    assert "### Judge audit" in summary and "| all | 0.000 [0.000, 0.000]" in summary
    # the second run: every reply from the cache, the same answers, the same hashes
    b = again["answers"]
    assert b["usage"]["response"]["requests"] == b["usage"]["judge"]["requests"] == 0
    assert b["usage"]["response"]["cache_hits"] == 24
    assert b["cache_hash"] == a["cache_hash"]
    assert again["metrics"]["fast"]["raw_turns"]["all"][METRIC] == cell[METRIC]
    # a judge that accepts everything: false accept 1.0, on every kind of wrong answer
    audit = lenient["answers"]["audit"]
    assert audit["false_accept"]["mean"] == 1.0
    assert all(v["mean"] == 1.0 for v in audit["false_accept_by_kind"].values())
    assert "| all | 1.000 [1.000, 1.000]" in (tmp_path / "three" / "summary.md").read_text()


def test_refused_before_any_work(tmp_path, no_env):
    with pytest.raises(ValueError, match="needs a response model: .*MEMORY_CORE_LLM_URL"):
        _run(["eval.answer=true"], tmp_path / "a")
    assert not (tmp_path / "a" / "store").exists()
    with pytest.raises(ValueError, match="eval.executor=local"):
        _run(["eval.answer=true", "llm.url=http://127.0.0.1:9/v1", "llm.model=m",
              "eval.executor=ray"], tmp_path / "b")
    with pytest.raises(ValueError, match="does not answer"):
        _run(["eval.answer=true", "system=bm25", "eval.modes=[bm25]"], tmp_path / "c")


def test_the_judge_uses_its_own_model_or_says_it_does_not(tmp_path, no_env):
    from experiments.answers import models_for
    from memory_core.llm import LLMSpec, judge_spec

    llm = LLMSpec(url="http://127.0.0.1:9/v1", model="a", cache_dir=str(tmp_path))
    model, judge, note = models_for(llm, judge_spec())
    assert judge.model == "a" and note and "grading its own answers" in note
    model, judge, note = models_for(llm, LLMSpec(url=llm.url, model="j",
                                                 env_prefix="MEMORY_CORE_JUDGE"))
    assert (model.model, judge.model, note) == ("a", "j", None)


def test_gold_answers_come_from_the_data_set_else_from_the_evidence():
    from experiments.answers import gold_answer
    from experiments.data.schema import QueryDef

    content = {"k1": "Alice works at Globex.", "k2": "Since 2024."}
    with_answer = QueryDef("q1", "Where?", "s", ("k1",), metadata={"answer": "Globex"})
    without = QueryDef("q2", "Since when?", "s", ("k1", "k2"))
    assert gold_answer(with_answer, content, True) == ("Globex", "answer")
    assert gold_answer(without, content, True) is None  # the set has answers: no gold here
    assert gold_answer(without, content, False) == ("Alice works at Globex. / Since 2024.",
                                                    "evidence")


def test_wrong_answers_from_a_gold():
    gold = "On 2024-03-05, the billing API went down for 42 minutes; Dana Whitfield led it."
    made = wrong_answers(gold)
    assert made["changed_date"] == gold.replace("2024-03-05", "2024-03-12")
    assert made["changed_number"] == gold.replace("42", "49")
    assert "Dana" not in made["changed_name"] and "Whitfield" in made["changed_name"]
    assert made["not_mentioned"] == "not mentioned"
    assert change_number("in 2024") is None and change_date("no date here") is None
    assert change_date("cut in March") == "cut in April"
    assert change_name("Nothing to change.") is None
    assert verdict("  correct ") == 1.0 and verdict("WRONG, because") == 0.0
    assert verdict("I am not sure") is None
    user = judge_messages("Q?", "g\nold", "an\nswer")[1]["content"]
    assert user.splitlines() == ["Question: Q?", "Gold answer: g old", "Answer to grade: an swer"]


def test_the_audit_leaves_unreadable_verdicts_out_and_counts_them(tmp_path):
    """A judge that accepts every wrong answer but mumbles on 'not mentioned': its false-accept
    rate is 1.0 over the verdicts it gave, not lowered by counting the mumbles as rejections."""
    import httpx

    from experiments.answers import _audit, markdown
    from experiments.data.schema import QueryDef
    from memory_core.llm import LLMSpec, ResponseModel

    def judge(request: httpx.Request) -> httpx.Response:
        answer = json.loads(request.content)["messages"][-1]["content"].rsplit(": ", 1)[1]
        text = "I cannot tell" if answer == "not mentioned" else "CORRECT"
        return httpx.Response(200, json={"choices": [{"message": {"content": text}}]})

    spec = LLMSpec(url="http://judge.invalid/v1", model="mumbler", cache=False)
    asked = [QueryDef(f"q{i}", f"Where did Ana move in question {i}?", None,
                      conversation=f"c{i}") for i in range(4)]
    golds = {q.query_id: (f"Ana moved to Lisbon on {i + 1} May 2023.", "data")
             for i, q in enumerate(asked)}
    with ResponseModel(spec, transport=httpx.MockTransport(judge)) as model:
        audit = _audit(model, asked, golds, n_resamples=50, seed=0, progress=False)
    assert audit["made"]["not_mentioned"] == 4 and audit["unparsed"]["not_mentioned"] == 4
    assert audit["unparsed"]["gold"] == 0 and audit["gold_accept"]["mean"] == 1.0
    assert audit["false_accept"]["mean"] == 1.0  # was 0.75 with the mumbles graded WRONG
    assert audit["false_accept"]["n"] == sum(audit["made"].values()) - 4
    assert audit["false_accept_by_kind"]["not_mentioned"] is None  # nothing readable
    record = {"view": "raw_turns", "limit": 5, "judge_note": None, "audit": audit,
              "models": {k: {"model": "m", "url": "u"} for k in ("response", "judge")},
              "prompts": {"answer": {"version": "a"}, "judge": {"version": "j"}, "audit": "x"},
              "usage": {k: {"requests": 0, "cache_hits": 0, "cost_usd": 0.0}
                        for k in ("response", "judge")},
              "denominators": {"answers": 0, "with_gold": 0, "no_gold": 0,
                               "unparsed_verdicts": 0},
              "cache_hash": {"response": None, "judge": None}}
    summary = markdown(record)
    assert "| all | 1.000 [1.000, 1.000] (n=12) | 4 |" in summary
    assert "| not_mentioned | - | 4 |" in summary
