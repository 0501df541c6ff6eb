"""``eval.answer=true``: end-to-end answer accuracy, judged by a model, with the judge audited.

After the retrieval run, every scored question that has a gold answer is asked again in each
mode, in the headline view, as a block (``format="block"``, ``eval.answer_limit`` memories);
the response model (the ``llm`` config group or ``MEMORY_CORE_LLM_*``) answers from that block
with the fixed prompt :data:`memory_core.llm.prompts.ANSWER_PROMPT_VERSION`, and the judge
(the ``judge`` block or ``MEMORY_CORE_JUDGE_*``; the response model itself when none is named,
and then said so) grades the answer against the gold with :data:`JUDGE_PROMPT_VERSION`. Each
question's 0/1 grade is the per-query column ``answer_accuracy``: the run's summary gives it
per category with bootstrap intervals, and ``mode_comparison`` pairs the modes on it, exactly
as for recall.

Gold answers: the data set's ``answer`` (LoCoMo, LongMemEval, a JSONL set); a question without
one there is not answered (``denominators.no_gold``: LoCoMo's adversarial category). A data set
with no answers at all (the synthetic world) is graded against the text of each question's
evidence memories; ``answers.gold_source`` counts which.

Judge audit (``eval.judge_audit``, on by default): the judge also grades wrong answers made
from each gold (:mod:`experiments.judge_audit`) and the gold itself; the run reports the share
of wrong answers it accepted (``false_accept``, per kind and overall, with intervals) and the
share of golds it accepted (``gold_accept``). A verdict that is neither CORRECT nor WRONG is
left out of those rates (counting it as a rejection would flatter ``false_accept``) and counted
per kind under ``unparsed``. Everything goes through the reply cache, so a
second run of the same questions sends nothing (``usage.requests`` 0).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from experiments.data.schema import Dataset, QueryDef
from experiments.evaluate import VIEWS, request_fields
from experiments.judge_audit import AUDIT_VERSION, wrong_answers
from experiments.specs import EvalSpec
from experiments.stats import bootstrap_ci
from memory_core import MemoryEngine
from memory_core.llm import LLMSpec, Reply, ResponseModel, from_env
from memory_core.llm.prompts import ANSWER_PROMPT_VERSION, ANSWER_SYSTEM, answer_messages, cited

METRIC = "answer_accuracy"
ANSWERS_FILE = "answers.jsonl"
JUDGE_PROMPT_VERSION = "judge-v1"
JUDGE_SYSTEM = (
    "You grade an answer to a question about a user's stored memories against the gold "
    "answer. The answer is CORRECT if it states the same fact as the gold answer: wording may "
    "differ, and extra detail is fine if nothing in it contradicts the gold. It is WRONG if it "
    "contradicts the gold (another person, number, date, place or thing), is vaguer than the "
    "question needs, or does not answer (for example, says the information is not mentioned). "
    "Reply with exactly one word: CORRECT or WRONG.")
_VERDICT = re.compile(r"\b(CORRECT|WRONG)\b")


def judge_messages(question: str, gold: str, answer: str) -> list[dict[str, str]]:
    """The chat messages of :data:`JUDGE_PROMPT_VERSION` (each field on one line)."""
    def line(text: str) -> str:
        return " ".join(text.split())
    return [{"role": "system", "content": JUDGE_SYSTEM},
            {"role": "user", "content": f"Question: {line(question)}\nGold answer: "
                                        f"{line(gold)}\nAnswer to grade: {line(answer)}"}]


def verdict(reply: str) -> float | None:
    """1.0 for CORRECT, 0.0 for WRONG (the first of the two words), ``None`` for neither.

    >>> verdict("CORRECT."), verdict("wrong"), verdict("maybe")
    (1.0, 0.0, None)
    """
    found = _VERDICT.search(reply.upper())
    return None if found is None else float(found[1] == "CORRECT")


def models_for(llm: LLMSpec, judge: LLMSpec) -> tuple[ResponseModel, ResponseModel, str | None]:
    """The response model and the judge, from the config and the environment; the note when
    the judge is the response model itself. No response model: ``ValueError`` saying how to
    name one."""
    spec = from_env(llm)
    if not spec.configured:
        raise ValueError(f"eval.answer=true needs a response model: {spec.why_not()}")
    judged = from_env(judge)
    note = None
    if not judged.configured:
        note = (f"the judge is the response model itself ({judged.why_not()}): a model "
                "grading its own answers")
        judged = spec
    return ResponseModel(spec), ResponseModel(judged), note


def check(llm: LLMSpec, local: bool) -> None:
    """Refuse ``eval.answer=true`` before a run does any work: no response model named, or a
    sharded run (the answers are asked of the run's one store)."""
    if not local:
        raise ValueError("eval.answer=true asks the run's one store again: use "
                         "eval.executor=local")
    spec = from_env(llm)
    if not spec.configured:
        raise ValueError(f"eval.answer=true needs a response model: {spec.why_not()}")


def gold_answer(q: QueryDef, content: Mapping[str, str], has_answers: bool
                ) -> tuple[str, str] | None:
    """``(gold, source)``: the data set's answer; in a data set that has no answers at all
    (the synthetic world), the evidence memories' text. A question without an answer in a
    data set that has them (LoCoMo's adversarial category) has no gold: not answered here."""
    answer = q.metadata.get("answer")
    if answer not in (None, ""):
        return str(answer), "answer"
    if has_answers:
        return None
    texts = [content[k] for k in q.gold_keys if k in content]
    return (" / ".join(texts), "evidence") if texts else None


def _parallel(fn: Callable[[Any], Reply], items: Sequence[Any], workers: int, desc: str,
              progress: bool) -> list[Reply]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(tqdm(pool.map(fn, items), total=len(items), desc=desc,
                         disable=not progress))


def _rate(values: Sequence[float], clusters: Sequence[str], n_resamples: int,
          seed: int) -> dict[str, Any] | None:
    if not values:
        return None
    ci = bootstrap_ci(list(values), clusters=list(clusters), n_resamples=n_resamples, seed=seed)
    return {"mean": ci.mean, "ci_low": ci.low, "ci_high": ci.high, "n": ci.n}


def run_answers(engine: MemoryEngine, dataset: Dataset, queries: Sequence[QueryDef],
                modes: Sequence[str], view: str, llm: LLMSpec, judge: LLMSpec, ev: EvalSpec,
                *, rows: list[dict[str, Any]], run_dir: Path, seed: int,
                progress: bool) -> dict[str, Any]:
    """Answer, judge and audit (module docstring); sets ``answer_accuracy`` on every row of
    ``rows`` (``None`` outside the answered view), writes ``answers.jsonl`` and returns the
    ``answers`` record of ``metrics.json``."""
    content = {m.key: m.content for m in dataset.memories}
    has_answers = any(q.metadata.get("answer") not in (None, "") for q in dataset.queries)
    golds = {q.query_id: g for q in queries
             if (g := gold_answer(q, content, has_answers)) is not None}
    asked = [q for q in queries if q.query_id in golds]
    limit, n_resamples = int(ev.answer_limit), int(ev.n_resamples)
    tasks: list[dict[str, Any]] = []
    for q in asked:
        for mode in modes:
            resp = engine.retrieve({**request_fields(q, ev, limit), "mode": mode,
                                    **VIEWS[view], "format": "block"})
            tasks.append({"query_id": q.query_id, "mode": mode, "view": view, "kind": q.kind,
                          "category": q.category, "conversation": q.conversation,
                          "question": q.text, "gold": golds[q.query_id][0],
                          "gold_source": golds[q.query_id][1],
                          "memory_ids": [r.memory_id for r in resp.results],
                          "block": resp.context or ""})
    model, judge_model, judge_note = models_for(llm, judge)
    with model, judge_model:
        workers = model.spec.max_concurrency
        replies = _parallel(lambda t: model.complete(answer_messages(t["question"], t["block"])),
                            tasks, workers, "answer", progress)
        grades = _parallel(lambda tr: judge_model.complete(judge_messages(
            tr[0]["question"], tr[0]["gold"], tr[1].text)), list(zip(tasks, replies,
                                                                     strict=True)),
            judge_model.spec.max_concurrency, "judge", progress)
        unparsed = 0
        graded: dict[tuple[str, str], float] = {}
        with (run_dir / ANSWERS_FILE).open("w", encoding="utf-8") as fh:
            for t, reply, grade in zip(tasks, replies, grades, strict=True):
                v = verdict(grade.text)
                unparsed += v is None
                graded[(t["query_id"], t["mode"])] = v or 0.0
                record = {k: t[k] for k in t if k != "block"}
                fh.write(json.dumps({**record, "answer": reply.text,
                                     "cited_ids": cited(reply.text, t["memory_ids"]),
                                     "judge_reply": grade.text, "correct": v or 0.0,
                                     "answer_cached": reply.cached,
                                     "judge_cached": grade.cached}) + "\n")
        for r in rows:
            r[METRIC] = (graded.get((r["query_id"], r["mode"])) if r["view"] == view
                         else None)
        audit_record = (_audit(judge_model, asked, golds, n_resamples, seed, progress)
                        if ev.judge_audit else None)
        record: dict[str, Any] = {
            "metric": METRIC, "view": view, "modes": list(modes), "limit": limit,
            "prompts": {"answer": {"version": ANSWER_PROMPT_VERSION, "system": ANSWER_SYSTEM},
                        "judge": {"version": JUDGE_PROMPT_VERSION, "system": JUDGE_SYSTEM},
                        "audit": AUDIT_VERSION},
            "models": {"response": model.identity(), "judge": judge_model.identity()},
            "judge_note": judge_note,
            "usage": {"response": model.usage(), "judge": judge_model.usage()},
            "denominators": {"scored": len(queries), "with_gold": len(asked),
                             "no_gold": len(queries) - len(asked), "answers": len(tasks),
                             "unparsed_verdicts": unparsed},
            "gold_source": dict(Counter(g[1] for g in golds.values())),
            "audit": audit_record,
            "file": ANSWERS_FILE,
        }
        record["cache_hash"] = {"response": record["models"]["response"]["cache_hash"],
                                "judge": record["models"]["judge"]["cache_hash"]}
    return record


def _audit(judge: ResponseModel, asked: Sequence[QueryDef],
           golds: Mapping[str, tuple[str, str]], n_resamples: int, seed: int,
           progress: bool) -> dict[str, Any]:
    """The judge grades each gold and each wrong answer made from it, once per question."""
    items = []
    made: Counter[str] = Counter()
    for q in asked:
        gold = golds[q.query_id][0]
        items.append((q, "gold", gold, gold))
        for kind, wrong in wrong_answers(gold).items():
            made[kind] += 1
            items.append((q, kind, gold, wrong))
    grades = _parallel(lambda it: judge.complete(judge_messages(it[0].text, it[2], it[3])),
                       items, judge.spec.max_concurrency, "judge audit", progress)
    by_kind: dict[str, list[tuple[float, str]]] = {}
    unparsed: Counter[str] = Counter()
    for (q, kind, _, _), grade in zip(items, grades, strict=True):
        graded = verdict(grade.text)
        if graded is None:  # unreadable: neither an acceptance nor a rejection
            unparsed[kind] += 1
            continue
        by_kind.setdefault(kind, []).append((graded, q.conversation or q.query_id))
    wrong = [v for kind, vs in by_kind.items() if kind != "gold" for v in vs]

    def rate(pairs: Sequence[tuple[float, str]]) -> dict[str, Any] | None:
        return _rate([p[0] for p in pairs], [p[1] for p in pairs], n_resamples, seed)

    return {"version": AUDIT_VERSION,
            "false_accept": rate(wrong),
            "false_accept_by_kind": {k: rate(by_kind.get(k, [])) for k in made},
            "gold_accept": rate(by_kind.get("gold", [])),
            "made": dict(made), "questions": len(asked),
            "unparsed": {k: unparsed[k] for k in ("gold", *made)},
            "note": "false_accept: the share of deliberately wrong answers (made from the gold: "
                    "one number, date or name changed, or 'not mentioned') the judge graded "
                    "CORRECT; gold_accept: the share of gold answers it graded CORRECT; a "
                    "verdict neither CORRECT nor WRONG is in neither rate, counted in "
                    "unparsed (per kind)"}


def ci_text(cell: Mapping[str, Any] | None) -> str:
    if not cell:
        return "-"
    return f"{cell['mean']:.3f} [{cell['ci_low']:.3f}, {cell['ci_high']:.3f}] (n={cell['n']})"


def markdown(record: Mapping[str, Any]) -> str:
    """The ``summary.md`` section of an answer run: models, prompts, the audit, the cost."""
    models, usage, den = record["models"], record["usage"], record["denominators"]
    audit = record.get("audit") or {}
    lines = ["## Answers judged by a model (eval.answer=true)", "",
             f"- `{METRIC}` in the tables above: the judge's grade of each answer, view "
             f"`{record['view']}`, {record['limit']} memories a block; "
             f"{den['answers']} answers to {den['with_gold']} questions "
             f"({den['no_gold']} without a gold answer, {den['unparsed_verdicts']} verdicts "
             "neither CORRECT nor WRONG, graded wrong)",
             f"- response model `{models['response']['model']}` at {models['response']['url']}; "
             f"judge `{models['judge']['model']}` at {models['judge']['url']}"
             + (f" ({record['judge_note']})" if record.get("judge_note") else ""),
             f"- prompts: {record['prompts']['answer']['version']}, "
             f"{record['prompts']['judge']['version']}, {record['prompts']['audit']}",
             f"- requests sent: response {usage['response']['requests']}, judge "
             f"{usage['judge']['requests']} (cache hits {usage['response']['cache_hits']} / "
             f"{usage['judge']['cache_hits']}); cost USD {usage['response']['cost_usd']} / "
             f"{usage['judge']['cost_usd']}",
             f"- cache hashes: {record['cache_hash']['response']} / "
             f"{record['cache_hash']['judge']}", ""]
    if audit:
        unparsed = audit.get("unparsed") or {}
        lines += ["### Judge audit", "",
                  "| wrong answers | false accept | unparsed verdicts (left out) |",
                  "|---|---|---|",
                  f"| all | {ci_text(audit['false_accept'])} | "
                  f"{sum(n for k, n in unparsed.items() if k != 'gold')} |",
                  *[f"| {kind} | {ci_text(cell)} | {unparsed.get(kind, 0)} |"
                    for kind, cell in audit["false_accept_by_kind"].items()],
                  "", f"Gold answers accepted: {ci_text(audit['gold_accept'])} "
                  f"({unparsed.get('gold', 0)} unparsed verdicts left out).", ""]
    return "\n".join(lines)
