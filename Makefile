# Every target creates .venv and installs the project when missing (or when pyproject.toml changed).
PY := .venv/bin/python
STAMP := .venv/.installed
export RAGAS_DO_NOT_TRACK := true
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: run test app bench regress clean-venv

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m experiments.run $(ARGS)

test: $(STAMP)
	$(PY) -m pytest $(ARGS)

app: $(STAMP)
	$(PY) -m streamlit run app.py --browser.gatherUsageStats false $(ARGS)

bench: $(STAMP)
	$(PY) -m benchmarks.perf $(ARGS)

regress: $(STAMP)
	$(PY) -m experiments.regress $(ARGS)

clean-venv:
	rm -rf .venv
