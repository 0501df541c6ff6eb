"""The routing experiment (``runner: routing``).

    python -m experiments.run experiment=routing     # synthetic world + real sets in the data dir
    python -m experiments.run experiment=expand      # multi-subject questions, flag off vs on

**Routing** (``runner: routing``, settings under ``routing_eval``). Per dataset with natural
spaces (the synthetic world; LoCoMo, one space per conversation; MemoryBank, one space per user;
a LongMemEval subset, one space per question haystack), each present in the data directory:

1. *Split* (seeded, :func:`make_cases`). A share ``holdout_share`` of the spaces is held out of
   the candidate set: their questions become unanswerable (the right answer is to abstain), as
   are the dataset's own unanswerable questions. The candidate spaces are split into training
   and test spaces (``train_share``) and every question follows its gold space, so no question
   used for training or calibration is scored (with fewer than ``min_split_spaces`` candidate
   spaces the questions themselves are split). Unanswerable questions are split at random.
   A question is only offered candidate spaces: the run's principal is a viewer of those alone.
2. *Score* every question with the description and evidence routers through
   ``MemoryEngine.route`` (the engine's own eligibility: never the default space).
3. *Calibrate* on the training split: each softmax router's temperature (minimum NLL of the
   gold space, temperature scaling), the learned router (``StandardScaler -> LogisticRegression``
   in ``CalibratedClassifierCV``, saved with joblib in ``models/``), and per router the
   thresholds ``min_fit``, ``min_confidence``, ``extra_confidence`` by grid search maximising
   ``utility = accuracy - cost_weight * mean spaces searched``, where a question is handled
   correctly when a gold space is searched (answerable) or the router abstains (unanswerable).
4. *Evaluate* on the test split: top-1 accuracy (answerable), accuracy when a gold space is
   among those searched, mean spaces searched per question (abstention = 0), abstention
   precision / recall (positive = unanswerable), expected calibration error and a reliability
   diagram of the top confidence (correct = the top space holds the answer; an unanswerable
   question's top space never does), and end-to-end recall@10 of routed reads
   (``route="auto"`` on an engine configured with the calibrated router) beside addressed reads
   of the gold space, on answerable test questions with evidence.

Thresholds are also calibrated on the training splits of all datasets pooled, written to
``routing_thresholds.yaml`` (the values ``conf/routing/*.yaml`` carry) and scored on every test
split under ``routing["pooled"]``. Outputs: ``metrics.json`` (``routing`` key),
``per_query.parquet`` (one row per dataset / router / question), ``reliability.png``, TREC runs
of the end-to-end reads with ``qrels.txt``, ``summary.md``, a printed table.

Modules: :mod:`~experiments.routing.split` (step 1), :mod:`~experiments.routing.calibration`
(step 3), :mod:`~experiments.routing.metrics` (step 4), :mod:`~experiments.routing.runner`
(the run), :mod:`~experiments.routing.report` (table, summary, plot). The ``expand_query``
experiment lives in :mod:`experiments.expand`.
"""

from experiments.routing.calibration import (BASE_ROUTERS, Calibrated, calibrate,
                                             calibrate_thresholds, fit_temperature,
                                             learned_scores, training_rows, with_temperature)
from experiments.routing.metrics import reliability, routing_metrics
from experiments.routing.report import RELIABILITY_PLOT, comparison_table, plot_reliability
from experiments.routing.runner import (PRINCIPAL, end_to_end, pooled_calibration, run_dataset,
                                        run_routing)
from experiments.routing.split import RoutingCase, Split, gold_spaces, make_cases

__all__ = ["BASE_ROUTERS", "PRINCIPAL", "RELIABILITY_PLOT", "Calibrated", "RoutingCase",
           "Split", "calibrate", "calibrate_thresholds", "comparison_table", "end_to_end",
           "fit_temperature", "gold_spaces", "learned_scores", "make_cases", "plot_reliability",
           "pooled_calibration", "reliability", "routing_metrics", "run_dataset", "run_routing",
           "training_rows", "with_temperature"]
