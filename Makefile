# Every target creates .venv and installs the project when missing (or when pyproject.toml changed).
PY := .venv/bin/python
STAMP := .venv/.installed
export RAGAS_DO_NOT_TRACK := true
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export MEM0_TELEMETRY := False

.PHONY: run test lint app bench bench-scale regress serve serve-pg stop-pg bench-serve clean-venv

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,ray,postgres,systems]'
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m experiments.run $(ARGS)

test: $(STAMP)
	$(PY) -m pytest $(ARGS)

# ruff over the repository, pyright (basic) over memory_core/, experiments/, benchmarks/, app.py; rules and the temporary
# exclude lists are in pyproject.toml ([tool.ruff], [tool.pyright])
lint: $(STAMP)
	.venv/bin/ruff check .
	.venv/bin/pyright

app: $(STAMP)
	$(PY) -m streamlit run app.py --browser.gatherUsageStats false $(ARGS)

bench: $(STAMP)
	$(PY) -m benchmarks.perf $(ARGS)

# one space at 10k / 100k / 1M memories: latency, RSS, disk, index, ANN recall (benchmarks/scale.py)
bench-scale: $(STAMP)
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 nice -n 10 $(PY) -m benchmarks.scale $(ARGS)

regress: $(STAMP)
	$(PY) -m experiments.regress $(ARGS)

# the HTTP service on 127.0.0.1 (README: "HTTP service"); keys: memory-core keys create
STORE ?= outputs/store
PORT ?= 8080
serve: $(STAMP)
	$(PY) -m memory_core.cli serve --store $(STORE) --port $(PORT) $(ARGS)

# the same service on a local PostgreSQL (pgserver, data in PGDATA; it stays up after the
# service stops: `make stop-pg`); keys, kept in the database: memory-core keys create --store URI
PGDATA ?= outputs/pgdata
serve-pg: $(STAMP)
	$(PY) -m memory_core.cli serve --store "$$($(PY) -m memory_core.store.pg.local $(PGDATA))" \
		--port $(PORT) $(ARGS)

stop-pg: $(STAMP)
	$(PY) -m memory_core.store.pg.local $(PGDATA) --stop

bench-serve: $(STAMP)
	$(PY) -m benchmarks.serve_load $(ARGS)

clean-venv:
	rm -rf .venv
