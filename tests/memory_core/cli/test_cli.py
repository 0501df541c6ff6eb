"""The ``memory-core`` command line: in-process on the hash embedder, plus one end-to-end run of
the installed console script on the packaged MiniLM (marker ``model``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memory_core import MemoryEngine
from memory_core.cli import build_parser, main

FOOTER = re.compile(r"^tier=(cache|hybrid|escalated) query_ms=\d+\.\d "
                    r"trace_id=(?!None\b)(\S+)", re.M)


@pytest.fixture
def store(tmp_path):
    return str(tmp_path / "store")


@pytest.fixture
def opener(hash_embedder):
    """Engine factory on the hash embedder; records every store it opened."""
    opened: list[str] = []

    def open_engine(path):
        opened.append(path)
        return MemoryEngine.open(path, embedder=hash_embedder)

    open_engine.opened = opened
    return open_engine


@pytest.fixture
def cli(opener, capsys):
    """``cli(*argv) -> (exit status, stdout, stderr)``."""

    def run(*argv, stdin=None):
        if stdin is not None:
            sys.stdin = stdin
        try:
            code = main(list(argv), open_engine=opener)
        finally:
            sys.stdin = sys.__stdin__
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def filled(cli, store):
    ids = []
    for text, extra in [("The user prefers pnpm over npm.", ["--tags", "project:alpha"]),
                        ("Invoices are sent monthly through Stripe.", []),
                        ("The quarterly billing report is due in March.", [])]:
        code, out, err = cli("write", "--store", store, "--space", "payments", "--create-space",
                             "--description", "Payments team", text, *extra)
        assert code == 0, err
        ids.append(out.strip())
    return ids


def _open(store, hash_embedder):
    return MemoryEngine.open(store, embedder=hash_embedder)


# -- write ------------------------------------------------------------------------------------
def test_write_creates_space_and_prints_id(filled, store, hash_embedder, cli):
    assert all(re.fullmatch(r"mem_\d+", i) for i in filled) and len(set(filled)) == 3
    code, out, _ = cli("write", "--store", store, "--space", "payments", "--json",
                       "--timestamp", "2024-06-15T10:00:00Z", "--user-id", "alice",
                       "--session-id", "s1", "--document-id", "doc-7", "--metadata",
                       '{"turn": 3}', "Alice works at Globex since 2024.")
    assert code == 0
    body = json.loads(out)
    assert body["space_id"] == "payments" and body["created_space"] is False
    with _open(store, hash_embedder) as eng:
        assert eng.get_space("payments").description == "Payments team"
        m = eng.get_memory(body["memory_id"])
        assert (m.user_id, m.session_id, m.document_id) == ("alice", "s1", "doc-7")
        assert m.timestamp.startswith("2024-06-15T10:00:00") and dict(m.metadata) == {"turn": 3}
        assert eng.get_memory(filled[0]).tags == ("project:alpha",)


def test_write_reads_stdin(cli, store, hash_embedder):
    import io

    code, out, err = cli("write", "--store", store, "--space", "notes", "--create-space", "-",
                         stdin=io.StringIO("Bob likes tea.\n"))
    assert code == 0, err
    with _open(store, hash_embedder) as eng:
        assert eng.get_memory(out.strip()).content == "Bob likes tea."


def test_refused_write_with_create_space_leaves_nothing(cli, store, hash_embedder):
    code, out, err = cli("write", "--store", store, "--space", "notes", "--create-space",
                         "--tags", "anona:secret", "text")
    assert code == 1 and out == ""
    assert err.startswith("error: reserved_tag/reserved_prefix: ")
    with _open(store, hash_embedder) as eng:
        assert eng.list_spaces() == []


def test_write_to_missing_space_or_store_is_an_error(cli, store, filled, tmp_path):
    code, _, err = cli("write", "--store", store, "--space", "nope", "x")
    assert code == 1 and err.startswith("error: not_found/space_missing: ")
    missing = str(tmp_path / "missing")
    code, _, err = cli("recall", "--store", missing, "--space", "payments", "q")
    assert code == 1 and err.startswith("error: not_found/store_missing: ")
    assert not Path(missing).exists()


def test_description_of_existing_space_is_not_silently_ignored(cli, store, filled):
    code, out, err = cli("write", "--store", store, "--space", "payments", "--create-space",
                         "--description", "Something else", "x")
    assert code == 1 and "error: conflict/space_exists: " in err


# -- flags ------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["recall", "--store", "S", "--space", "p", "q", "--bogus"], "unrecognized arguments: --bogus"),
    (["recall", "--store", "S", "--space", "p", "q", "--lim", "3"], "unrecognized arguments"),
    (["recall", "--sto", "S", "--space", "p", "q"], "unrecognized arguments: --sto"),
    (["recall", "--space", "p", "q"], "the following arguments are required: --store"),
    (["recall", "x", "--min-trust", "0.5"], "unrecognized arguments: --min-trust"),
    (["recall", "--store", "S", "--space", "p"], "the following arguments are required: query"),
    (["recall", "--store", "S", "--space", "p", "q", "--mode", "fast", "--mode", "accurate"],
     "at most one scoring mode"),
    (["recall", "--store", "S", "--space", "p", "q", "--mode", "bm25", "--channels", "vector"],
     "give one of the two"),
    (["recall", "--store", "S", "--space", "p", "q", "--mode", "dense"], "invalid choice"),
    (["session-context", "--store", "S", "--space", "p", "q"], "needs --session-id"),
    (["session-context", "--store", "S", "--route", "auto", "--session-id", "s", "q"],
     "addressed only"),
    (["recall", "--store", "S", "--url", "http://127.0.0.1:1", "--space", "p", "q"],
     "give exactly one of --store DIR and --url URL"),
    (["recall", "--store", "S", "--api-key", "k", "--space", "p", "q"],
     "--api-key applies only with --url"),
    (["write", "--url", "http://127.0.0.1:1", "--space", "p", "--create-space", "x"],
     "--create-space works on a local --store only"),
    (["recall", "--store", "S", "--space", "p", "--route", "auto", "q"], "not allowed with"),
    (["recall", "--store", "S", "q"],
     "one of the arguments --space --route --context-id (or $MEMORY_CORE_CONTEXT_ID) is required"),
    (["recall", "--store", "S", "--space", "p", "--context-id", "p", "q"], "not allowed with"),
    (["entities", "--store", "S", "--space", "p", "--memories", "3"], "give its NAME"),
    (["entities", "--store", "S", "--space", "p", "Alice", "--contains", "a"], "without NAME"),
    (["entities", "--store", "S", "--space", "p", "--route", "auto"], "unrecognized"),
    (["recall", "--store", "S", "--space", "p", "q", "--include", "facts,notes"],
     "unknown part(s) notes"),
    (["recall", "--store", "S", "--space", "p", "q", "--channels", "dense"], "invalid choice"),
    (["recall", "--store", "S", "--space", "p", "q", "--limit", "ten"], "invalid int value"),
    (["context", "--store", "S", "--space", "p", "q", "--context-hits"], "unrecognized"),
    (["write", "--store", "S", "--space", "p", "x", "--description", "d"],
     "--description applies only with --create-space"),
    (["write", "--store", "S", "--route", "auto", "--create-space", "x"],
     "--create-space needs --space"),
    (["write", "--store", "S", "--space", "p", "x", "--metadata", "[1]"], "JSON object"),
    (["receipt", "--store", "S", "r1", "--limit", "3"], "unrecognized arguments: --limit"),
    (["forget", "--store", "S"], "invalid choice: 'forget'"),
])
def test_unsupported_flags_are_rejected(cli, opener, argv, message):
    code, out, err = cli(*argv)
    assert code == 2 and out == ""
    assert message in err and err.startswith("usage: memory-core")
    assert opener.opened == []  # rejected before any store is opened


def test_include_maps_to_request_values():
    parse = build_parser().parse_args
    base = ["recall", "--store", "S", "--space", "p", "q", "--include"]
    assert parse([*base, "facts,passages"]).include == "both"
    assert parse([*base, "passages, facts"]).include == "both"
    assert parse([*base, "passages"]).include == "passages"
    assert parse([*base, "facts"]).include == "facts"


@pytest.fixture
def retrieve_calls(monkeypatch):
    """The keyword fields of every MemoryEngine.retrieve call (the call still runs)."""
    seen = []
    original = MemoryEngine.retrieve

    def spy(self, request=None, /, **fields):
        seen.append(fields)
        return original(self, request, **fields)

    monkeypatch.setattr(MemoryEngine, "retrieve", spy)
    return seen


def test_only_given_flags_reach_the_request(cli, store, filled, retrieve_calls):
    seen = retrieve_calls
    code, _, err = cli("recall", "--store", store, "--space", "payments", "billing report",
                       "--json")
    assert code == 0, err
    assert seen[-1] == {"query": "billing report", "space_id": "payments", "receipt": True}
    code, _, err = cli("recall", "--store", store, "--space", "payments", "billing report",
                       "--json", "--limit", "2", "--mode", "fast", "--min-score", "0.4",
                       "--tags", "project:alpha,x", "--tags-match", "any", "--user-id", "u",
                       "--agent-id", "a", "--session-id", "s", "--principal", "owner",
                       "--expand-query", "--as-of", "2030-01-01T00:00:00Z",
                       "--query-timestamp", "2024-07-01T00:00:00Z",
                       "--occurred-after", "2024-01-01T00:00:00Z",
                       "--occurred-before", "2031-01-01T00:00:00Z", "--channels", "bm25",
                       "--include", "facts,passages", "--include-duplicates", "--context-hits",
                       "--lens", "org/acme", "--lens", "team/a,project/b")
    assert code == 0, err
    assert seen[-1] == {
        "query": "billing report", "space_id": "payments", "receipt": True, "limit": 2,
        "mode": "fast", "min_score": 0.4, "tags": ["project:alpha", "x"], "tags_match": "any",
        "user_id": "u", "agent_id": "a", "session_id": "s", "principal": "owner",
        "expand_query": True, "as_of": "2030-01-01T00:00:00Z",
        "query_timestamp": "2024-07-01T00:00:00Z", "occurred_after": "2024-01-01T00:00:00Z",
        "occurred_before": "2031-01-01T00:00:00Z", "channels": "bm25", "include": "both",
        "include_duplicates": True, "context_hits": True,
        "lens": [["org/acme"], ["team/a", "project/b"]]}


def test_seed_004_flags_map_onto_request_fields(cli, store, filled, retrieve_calls):
    seen = retrieve_calls
    code, _, err = cli("recall", "--store", store, "--space", "payments", "billing", "--json",
                       "--mode", "bm25", "--mode", "fast", "--at-instant", "2030-01-01T00:00:00Z",
                       "--valid-from", "2024-01-01T00:00:00Z",
                       "--valid-until", "2031-01-01T00:00:00Z", "--labels", "urgent,billing",
                       "--scope-view", "crossTeam")
    assert code == 0, err
    assert seen[-1] == {
        "query": "billing", "space_id": "payments", "receipt": True, "mode": "fast",
        "channels": "bm25", "as_of": "2030-01-01T00:00:00Z",
        "occurred_after": "2024-01-01T00:00:00Z", "occurred_before": "2031-01-01T00:00:00Z",
        "labels": ["urgent", "billing"], "scope_view": "crossTeam"}


def test_store_may_come_from_the_environment(cli, store, filled, monkeypatch):
    monkeypatch.setenv("MEMORY_CORE_STORE", store)
    code, out, err = cli("recall", "--space", "payments", "--mode", "fast", "--json", "pnpm")
    assert code == 0, err
    assert json.loads(out)["results"][0]["memory_id"] == filled[0]
    code, out, err = cli("recall", "--space", "payments", "pnpm", "--min-trust", "0.5")
    assert code == 2 and "unrecognized arguments: --min-trust 0.5" in err


# -- recall / context / receipt -----------------------------------------------------------------
def test_scopes_and_lens(cli, store):
    for text, scopes in [("Deploys run on Fridays.", "org/acme/team/a"),
                         ("Deploys run on Mondays.", "org/other")]:
        code, _, err = cli("write", "--store", store, "--space", "ops", "--create-space",
                           "--scopes", scopes, text)
        assert code == 0, err
    code, out, err = cli("recall", "--store", store, "--space", "ops", "--mode", "fast",
                         "--json", "When do deploys run?", "--lens", "org/acme")
    assert code == 0, err
    assert [r["content"] for r in json.loads(out)["results"]] == ["Deploys run on Fridays."]


def test_routed_recall_reports_searched(cli, store, filled):
    code, out, err = cli("recall", "--store", store, "--route", "auto", "--mode", "fast",
                         "Which package manager does the user prefer, pnpm?")
    assert code == 0, err
    assert out.startswith("searched: ") and FOOTER.search(out)


def test_recall_prints_table_and_footer(cli, store, filled):
    code, out, err = cli("recall", "--store", store, "--space", "payments", "--mode", "fast",
                         "Which package manager does the user prefer, pnpm?", "--limit", "2")
    assert code == 0, err
    lines = out.splitlines()
    header = next(line for line in lines if "memory id" in line)
    assert all(col in header for col in ("rank", "score", "space", "content"))
    first = next(line for line in lines if filled[0] in line)
    assert "1.000" in first and "payments" in first and "pnpm over npm" in first
    assert FOOTER.search(out) and lines[-1].startswith("tier=")


def test_recall_json_then_receipt(cli, store, filled):
    code, out, err = cli("recall", "--store", store, "--space", "payments", "--mode", "fast",
                         "--json", "billing invoices Stripe report", "--limit", "1")
    assert code == 0, err
    body = json.loads(out)
    assert len(body["results"]) == 1 and body["results"][0]["memory_id"] in filled
    assert body["tier"] in ("cache", "hybrid", "escalated") and body["query_ms"] >= 0
    assert "searched" not in body  # an addressed read
    # a later process (here: a fresh engine) finds the trace by id
    code, out, err = cli("receipt", "--store", store, body["trace_id"])
    assert code == 0, err
    trace = json.loads(out)
    assert trace["receipt_id"] == body["trace_id"] == body["receipt_id"]
    assert [k["memory_id"] for k in trace["kept"]] == [body["results"][0]["memory_id"]]
    assert trace["request"]["query"] == "billing invoices Stripe report"


def test_context_prints_the_block(cli, store, filled):
    code, out, err = cli("context", "--store", store, "--space", "payments", "--mode", "fast",
                         "Which package manager does the user prefer, pnpm?")
    assert code == 0, err
    assert out.startswith("1. The user prefers pnpm over npm.\n2. ")
    assert "trace_id=rcpt_" in err and "trace_id" not in out  # the footer goes to stderr
    code, out, err = cli("context", "--store", store, "--space", "payments", "--mode", "fast",
                         "--max-tokens", "9", "--json", "pnpm package manager")
    assert code == 0, err
    body = json.loads(out)
    assert body["context"] == "1. The user prefers pnpm over npm."
    # tier 4: one shared word is a cosine under escalate.min_top_cosine on the hash embedder
    assert body["tier"] == "escalated" and body["trace_id"].startswith("rcpt_")
    code, out, err = cli("receipt", "--store", store, body["trace_id"])
    assert code == 0 and json.loads(out)["request"]["context_max_tokens"] == 9


def test_session_context_is_the_conversation_in_progress(cli, store, filled):
    code, _, err = cli("write", "--store", store, "--space", "payments", "--session-id", "s1",
                       "--timestamp", "2024-06-20T10:00:00Z", "We agreed to ship on Friday.")
    assert code == 0, err
    code, out, err = cli("session-context", "--store", store, "--space", "payments", "--mode",
                         "fast", "--limit", "1", "--session-id", "s1", "pnpm package manager")
    assert code == 0, err
    assert out.startswith("1. The user prefers pnpm over npm.")
    assert "Recent turns (session s1):" in out and "We agreed to ship on Friday." in out
    # context --session-id is the strict scope of get_context: only s1's memories, no turns
    code, out, err = cli("context", "--store", store, "--space", "payments", "--mode", "fast",
                         "--limit", "1", "--session-id", "s1", "pnpm package manager")
    assert code == 0, err
    assert out == "1. We agreed to ship on Friday.\n"
    code, out, err = cli("session-context", "--store", store, "--space", "payments", "--mode",
                         "fast", "--limit", "1", "--session-id", "s1", "--json",
                         "We agreed to ship")
    assert code == 0, err
    body = json.loads(out)
    assert body["context"] == "1. We agreed to ship on Friday."  # the only turn: recalled
    assert "context_hits" not in body  # none to add (a lone turn): the key is omitted
    code, out, err = cli("context", "--store", store, "--route", "auto", "pnpm")
    assert code == 1 and "validation_error/addressed_only" in err


def test_engine_errors_exit_1(cli, store, filled):
    code, out, err = cli("recall", "--store", store, "--space", "payments", "q", "--limit", "0")
    assert code == 1 and out == ""
    assert err == "error: validation_error/out_of_range: limit must be 1-50, got 0\n"
    code, out, err = cli("recall", "--store", store, "--space", "payments", "q", "--limit", "0",
                         "--json")
    assert code == 1 and err == ""
    assert json.loads(out) == {"error": {"status": 422, "code": "validation_error",
                                         "reason": "out_of_range", "field": "limit",
                                         "message": "limit must be 1-50, got 0"}}
    code, out, err = cli("receipt", "--store", store, "rcpt_nope")
    assert code == 1 and err.startswith("error: not_found/")


# -- the installed console script, real models -------------------------------------------------
@pytest.mark.model
def test_console_script_end_to_end(tmp_path):
    exe = Path(sys.executable).parent / "memory-core"
    if not exe.exists():
        pytest.fail(f"{exe} is missing: run `.venv/bin/pip install -e . --no-deps`")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    store = str(tmp_path / "store")

    def run(*argv):
        done = subprocess.run([str(exe), *argv], capture_output=True, text=True, env=env,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout

    first = run("write", "--store", store, "--space", "notes", "--create-space",
                "--description", "Personal notes", "Alice prefers pnpm over npm.").strip()
    run("write", "--store", store, "--space", "notes", "The billing report is due in March.")
    body = json.loads(run("recall", "--store", store, "--space", "notes", "--mode", "fast",
                          "--json", "Which package manager does Alice use?"))
    assert body["results"][0]["memory_id"] == first
    trace = json.loads(run("receipt", "--store", store, body["trace_id"]))
    assert trace["kept"][0]["memory_id"] == first


def test_all_spaces_failing_is_handled_like_every_other_error(cli, store, filled, monkeypatch):
    from memory_core.pipeline import SearchFailed

    def failing(self, request=None, /, **fields):
        raise SearchFailed({"payments": "RuntimeError: index is corrupt"})

    monkeypatch.setattr(MemoryEngine, "retrieve", failing)
    code, out, err = cli("recall", "--store", store, "--route", "auto", "Stripe")
    assert code == 1 and out == ""
    assert err.startswith("error: search_failed/all_spaces_failed: every searched space failed")
    code, out, err = cli("recall", "--store", store, "--route", "auto", "Stripe", "--json")
    assert code == 1 and err == ""
    body = json.loads(out)["error"]
    assert (body["status"], body["code"]) == (503, "search_failed")
    assert body["details"] == {"failures": {"payments": "RuntimeError: index is corrupt"}}


# -- the agent-memory seed's CLI (issue 54 item 2) ------------------------------------------------
def test_seed_recall_flags_context_id_limit_cap_and_json(cli, store, filled):
    """The seed's example ``recall "..." --json --context-id ... --limit 10`` (locally; the
    ``--url``/``--api-key`` half is tests/service/test_cli_url.py): ``--context-id`` is the
    agent-memory API's call, and ``--json`` prints its body; ``--limit`` above 50 is capped
    with a notice, not refused."""
    code, out, err = cli("recall", "Which package manager?", "--json", "--store", store,
                         "--context-id", "payments", "--limit", "10")
    body = json.loads(out)
    assert code == 0 and err == ""
    assert list(body)[:2] == ["tier", "hits"] and set(body["trace"]) == {"traceId"}
    assert {h["memoryId"] for h in body["hits"]} == set(filled)
    assert {h["source"] for h in body["hits"]} == {"memory_chunk"}
    code, out, err = cli("recall", "Which package manager?", "--json", "--store", store,
                         "--context-id", "payments", "--limit", "100")
    assert code == 0 and err == "notice: --limit 100 is capped at 50\n"
    assert len(json.loads(out)["hits"]) == 3  # every memory: the cap is not an error
    code, out, err = cli("context", "pnpm over npm", "--store", store, "--context-id",
                         "payments", "--limit", "1")
    assert code == 0 and out.startswith("1. The user prefers pnpm") and "traceId=" in err
    code, out, _ = cli("recall", "package manager", "--store", store, "--context-id",
                       "payments", "--limit", "1")
    assert code == 0 and "memory_chunk" in out and "traceId=" in out


def test_seed_cli_reads_the_service_and_space_from_the_environment(cli, store, filled,
                                                                   monkeypatch):
    monkeypatch.setenv("MEMORY_CORE_STORE", store)
    monkeypatch.setenv("MEMORY_CORE_CONTEXT_ID", "payments")
    code, out, _ = cli("recall", "pnpm", "--json", "--limit", "1")
    assert code == 0 and json.loads(out)["hits"][0]["memoryId"] == filled[0]
    code, out, _ = cli("recall", "pnpm", "--json", "--limit", "1", "--space", "payments")
    assert code == 0 and "results" in json.loads(out)  # --space: the first seed's call
    code, out, _ = cli("write", "Refunds take five days.")  # the space from the environment
    assert code == 0 and out.startswith("mem_")
    monkeypatch.delenv("MEMORY_CORE_STORE")
    monkeypatch.setenv("MEMORY_CORE_URL", "http://127.0.0.1:9")  # nothing listens there
    code, _, err = cli("recall", "pnpm")
    assert code == 1 and "cannot reach the service at http://127.0.0.1:9" in err
