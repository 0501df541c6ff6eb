"""``MemoryEngine``: the facade researchers and services call.

    >>> eng = MemoryEngine.open(":memory:")                              # doctest: +SKIP
    >>> eng.create_space("payments", description="Payments team")       # doctest: +SKIP
    >>> mid = eng.write("payments", "The user prefers pnpm over npm.")  # doctest: +SKIP
    >>> eng.retrieve(query="Which package manager?", space_id="payments").results  # doctest: +SKIP

Every public call validates first and raises :class:`MemoryCoreError` before touching the
store; a write batch is one transaction.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memory_core import context as blocks
from memory_core import index_files, pipeline
from memory_core.cache import ResponseCache, TraceLog, cache_key
from memory_core.channels.dense import DenseIndex
from memory_core.config import EngineSpec
from memory_core.dedup import minhash_signature
from memory_core.embed import Embedder, build_embedder, content_hash
from memory_core.engine_routing import ROLES, RoutingMixin
from memory_core.entities import extract_entities
from memory_core.errors import MemoryCoreError, invalid, not_found
from memory_core.filters.compile import compile_filter
from memory_core.filters.scope import check_write_scopes
from memory_core.receipts import build_receipt, new_receipt_id
from memory_core.redact import Redactor
from memory_core.request import parse_request
from memory_core.rerank.cross_encoder import CrossEncoderReranker, Reranker
from memory_core.rerank.stacked import RelevanceModel, load_stacked
from memory_core.routing import Router, build_router
from memory_core.store import NewMemory, Store, rowid_of
from memory_core.times import (Clock, event_window, format_instant, normalize_instant,
                               system_clock)
from memory_core.types import (Memory, MemoryType, Mode, Receipt, RetrieveRequest,
                               RetrieveResponse, SearchedEntry, Space, Tier, frozen_map)
from memory_core.validate import (MAX_TAG_CHARS, check_clean, check_mapping, check_metadata,
                                  check_text, text_problem)
from memory_core.validate import check_reserved as _check_reserved

WRITE_FIELDS = ("content", "timestamp", "tags", "user_id", "agent_id", "session_id", "metadata",
                "document_id", "scopes")
MAX_WRITE_TAGS = 50
_SPACE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")


class MemoryEngine(RoutingMixin):
    """A memory store plus its retrieval pipeline."""

    def __init__(self, store: Store, dense: DenseIndex, embedder: Embedder, spec: EngineSpec,
                 clock: Clock = system_clock, reranker: Reranker | None = None,
                 rerank_unavailable: str | None = None, router: Router | None = None,
                 scorer: RelevanceModel | None = None):
        self.spec = spec
        self.store = store
        self.embedder = embedder
        self.clock = clock
        self.reranker = reranker   # the cross-encoder (scorer or stacked feature), if any
        self.scorer = scorer       # the stacked relevance model (rerank.scorer=stacked)
        # why accurate mode is unavailable (None when its scorer is present)
        self.rerank_unavailable = _accurate_unavailable(spec, reranker, scorer,
                                                        rerank_unavailable)
        self.redactor = Redactor.from_spec(spec.redact)  # a bad pattern fails here, at start
        self._components = pipeline.Components(store, dense, embedder, spec, reranker,
                                               clock=clock, scorer=scorer)
        # route="auto": the injected router, else the one spec.routing names
        self.router = router if router is not None else build_router(spec.routing, embedder)
        self.cache = ResponseCache(spec.cache)  # tier "cache" (memory_core/cache.py)
        self._traces = TraceLog(spec.trace.keep)

    # -- lifecycle ----------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, spec: EngineSpec | None = None,
             embedder: Embedder | None = None, clock: Clock = system_clock,
             reranker: Reranker | None = None, router: Router | None = None,
             scorer: RelevanceModel | None = None) -> MemoryEngine:
        """Open (or create) a store directory, or an in-memory store for ``":memory:"``.

        The vector index is built from the embeddings stored in SQLite on a space's first use;
        with ``channels.dense_persist`` it is saved to ``<dir>/vectors`` by :meth:`flush` and
        loaded from there when the file checks out (see :mod:`memory_core.channels.dense`).
        Accurate mode scores with
        ``spec.rerank.scorer``: ``stacked`` uses ``scorer`` when given, else the model folder
        ``rerank.stacked_model`` (default: the one shipped in the package; see
        :mod:`memory_core.rerank.stacked`); ``cross_encoder`` uses ``reranker`` when given, else
        the cross-encoder ``spec.rerank`` resolves to (found now, loaded on first use; see
        :mod:`memory_core.rerank.models`), which a stacked model trained with the cross-encoder
        feature needs too. When a needed model does not load, accurate mode is unavailable:
        asking for it is a 422 ``model_unavailable`` that says why (naming the path), and
        requests that omit ``mode`` are served in fast mode with that fallback recorded in the
        response and the receipt.
        """
        spec = spec or EngineSpec()
        embedder = embedder or build_embedder(spec.embed)
        unavailable = None
        stacked = spec.rerank.scorer == "stacked"
        if stacked and scorer is None:
            try:
                scorer = load_stacked(spec.rerank.stacked_model)
            except MemoryCoreError as exc:  # recorded: accurate mode reports it on every use
                unavailable = exc.message
        needs_ce = not stacked or (scorer is not None and scorer.uses_cross_encoder)
        if reranker is None and needs_ce:
            try:
                reranker = CrossEncoderReranker(spec.rerank)
            except MemoryCoreError as exc:  # recorded: accurate mode reports it on every use
                unavailable = exc.message
        if str(path) == ":memory:":
            store, vectors = Store(":memory:"), None
        else:
            root = Path(path)
            root.mkdir(parents=True, exist_ok=True)
            store = Store(root / "memory.sqlite")
            index_files.remove_legacy_files(root / "vectors")  # pre-issue-21 unchecked copies
            vectors = root / "vectors" if spec.channels.dense_persist else None
        dense = DenseIndex(store, embedder.dim, vectors, spec.channels)
        return cls(store, dense, embedder, spec, clock, reranker, unavailable, router, scorer)

    def flush(self) -> None:
        """Persist the vector index files when ``channels.dense_persist`` is on (SQLite, the
        one durable copy of every memory and embedding, needs no flush)."""
        self._components.dense.save()

    def close(self) -> None:
        self.flush()
        self.store.close()

    def __enter__(self) -> MemoryEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def available_modes(self) -> frozenset[Mode]:
        """Fast always; accurate when the engine has the scorer ``rerank.scorer`` needs."""
        return frozenset({Mode.FAST} if self.rerank_unavailable is not None
                         else {Mode.FAST, Mode.ACCURATE})

    # -- spaces -------------------------------------------------------------------------------
    def create_space(self, space_id: str, description: str = "", default: bool = False,
                     members: Mapping[str, str] | None = None) -> Space:
        """Create a space. Without ``members`` the store's owner owns it."""
        if not isinstance(space_id, str) or not _SPACE_ID.match(space_id):
            raise invalid("invalid_space_id", "space_id must be 1-128 characters of letters, "
                          "digits, '_', '.', ':' or '-', starting with a letter or digit",
                          "space_id")
        check_text(description, "description", self.spec.limits.max_content_chars,
                   allow_empty=True, limit_name="max_content_chars")
        if not isinstance(default, bool):
            raise invalid("wrong_type", "default must be a boolean", "default")
        if members is None:
            members = {self.spec.owner: "owner"}
        if not isinstance(members, Mapping) or not members or not all(
                isinstance(p, str) and p and isinstance(r, str) and r in ROLES
                for p, r in members.items()):
            raise invalid("invalid_members", f"members must map principals to one of "
                          f"{', '.join(ROLES)}", "members")
        for p in members:
            check_text(p, "members", self.spec.limits.max_id_chars, limit_name="max_id_chars")
        if self.store.get_space(space_id) is not None:
            raise invalid("space_exists", f"space {space_id!r} already exists", "space_id")
        space = Space(space_id, description, default, frozen_map(members),
                      format_instant(self.clock()))
        self.store.insert_space(space)
        return space

    def get_space(self, space_id: str) -> Space:
        space = self.store.get_space(space_id)
        if space is None:
            raise not_found("space", space_id)
        return space

    def list_spaces(self, principal: str | None = None) -> list[Space]:
        """The spaces ``principal`` (default: the store's owner) is a member of; a space one
        may not see is never listed (issue 21: no read outside one's principal)."""
        who = self.spec.owner if principal is None else check_text(
            principal, "principal", self.spec.limits.max_id_chars, limit_name="max_id_chars")
        return [s for s in self.store.list_spaces() if who in s.members]

    def _authorised(self, space_id: str, principal: str | None, need: str) -> Space:
        """The space, if ``principal`` holds at least role ``need`` in it; 404 otherwise
        (a space one may not see is reported exactly like a missing one)."""
        self._check_ids(space_id, principal)
        space = self.store.get_space(space_id)
        who = principal if principal is not None else self.spec.owner
        role = None if space is None else space.members.get(who)
        if space is None or role is None or ROLES.index(role) < ROLES.index(need):
            raise not_found("space", space_id)
        return space

    def _check_ids(self, space_id: Any, principal: Any) -> None:
        """A space id and a principal are short valid strings (422 before any lookup)."""
        ids = self.spec.limits.max_id_chars
        check_text(space_id, "space_id", ids, limit_name="max_id_chars")
        if principal is not None:
            check_text(principal, "principal", ids, limit_name="max_id_chars")

    # -- writes -------------------------------------------------------------------------------
    def write(self, space_id: str | None = None, content: str | None = None,
              timestamp: str | None = None, tags: Sequence[str] | None = None,
              user_id: str | None = None, agent_id: str | None = None,
              session_id: str | None = None, metadata: Mapping[str, Any] | None = None,
              document_id: str | None = None, principal: str | None = None,
              route: str | None = None, scopes: Sequence[str] | None = None) -> str:
        """Write one fact; returns its memory id.

        ``route="auto"`` instead of ``space_id`` files it into the space the router finds best
        among those where ``principal`` is a developer or owner, or into the default space when
        none fits (see :meth:`_route_write`); ``get_memory(id).space_id`` says where it went.
        ``scopes``: scope paths (``"org/acme/team/payments"``) a request's ``lens`` matches.
        """
        if route is not None or space_id is None:
            if isinstance(content, str):  # the router embeds it: checked first
                check_text(content, "content", self.spec.limits.max_content_chars,
                           limit_name="max_content_chars")
            if principal is not None:
                check_text(principal, "principal", self.spec.limits.max_id_chars,
                           limit_name="max_id_chars")
            space_id = self._route_write(space_id, route, content, principal)
        item = {"content": content, "timestamp": timestamp, "tags": tags, "user_id": user_id,
                "agent_id": agent_id, "session_id": session_id, "metadata": metadata,
                "document_id": document_id, "scopes": scopes}
        return self.write_many(space_id, [item], principal=principal)[0]

    def write_many(self, space_id: str, items: Sequence[Mapping[str, Any]],
                   principal: str | None = None) -> list[str]:
        """Write facts in one transaction; every item is validated before anything is stored."""
        self._authorised(space_id, principal, "developer")
        if not isinstance(items, Sequence) or isinstance(items, str | bytes):
            raise invalid("wrong_type", "items must be a list of mappings", "items")
        now = format_instant(self.clock())
        checked = [self._check_item(space_id, i, item, now) for i, item in enumerate(items)]
        if not checked:
            return []
        # a long write becomes several memories that share its passage (WriteSpec)
        pieces = [(c, i, text) for c in checked
                  for i, text in enumerate(split_text(c["content"],
                                                      self.spec.write.split_max_chars))]
        vectors = self.embedder.embed([text for _, _, text in pieces])
        new = [NewMemory(
            space_id=space_id, content=text, content_hash=content_hash(text),
            memory_type=MemoryType.FACT, passage=c["content"], passage_id=None,
            document_id=c["document_id"], metadata=c["metadata"],
            entities=extract_entities(text), timestamp=c["timestamp"], recorded_at=now,
            **_occurred(text, c["timestamp"]),
            user_id=c["user_id"], agent_id=c["agent_id"], session_id=c["session_id"],
            tags=c["tags"], source_rowids=(), embedding=vec,
            minhash=minhash_signature(text, self.spec.dedup), shares_passage=i > 0,
            scopes=c["scopes"], timestamp_sent=c["timestamp_sent"],
        ) for (c, i, text), vec in zip(pieces, vectors, strict=True)]
        with self._components.dense.writing(space_id):  # indexed once (channels/dense.py)
            rowids = self.store.insert_batch(new)
            self._components.dense.add(space_id, rowids, vectors)
        # one id per item: its first memory (the others follow it and share its passage)
        return [f"mem_{r}" for r, (_, i, _) in zip(rowids, pieces, strict=True) if i == 0]

    def observe(self, space_id: str, content: str, source_ids: Sequence[str],
                tags: Sequence[str] | None = None, principal: str | None = None) -> str:
        """Store an observation (a note built from facts). Its sources must be facts of the same
        space and the same user scope; the note inherits the scope its sources share."""
        self._authorised(space_id, principal, "developer")
        now = format_instant(self.clock())
        checked = self._check_item(space_id, 0, {"content": content, "tags": tags}, now)
        if not isinstance(source_ids, Sequence) or isinstance(source_ids, str) or not source_ids:
            raise invalid("wrong_type", "source_ids must be a non-empty list of memory ids",
                          "source_ids")
        rows = [rowid_of(s) for s in source_ids]
        found = self.store.get_memories(r for r in rows if r is not None)
        sources: list[Memory] = []
        for sid, row in zip(source_ids, rows, strict=True):
            m = found.get(row) if row is not None else None
            if m is None or m.space_id != space_id:
                raise invalid("unknown_source", f"source {sid!r} is not a memory of space "
                              f"{space_id!r}", "source_ids")
            if m.memory_type is not MemoryType.FACT:
                raise invalid("source_not_fact", f"source {sid!r} is not a fact", "source_ids")
            sources.append(m)
        scope = {}
        for key in ("user_id", "agent_id", "session_id"):
            values = {getattr(m, key) for m in sources}
            if key == "user_id" and len(values) > 1:
                raise invalid("mixed_users", "an observation must be built from one user's facts",
                              "source_ids")
            scope[key] = values.pop() if len(values) == 1 else None
        held = self.store.scopes_of(m.rowid for m in sources)
        shared = set(held.get(sources[0].rowid, []))
        for m in sources[1:]:
            shared &= set(held.get(m.rowid, []))
        vec = self.embedder.embed([checked["content"]])
        note_time = max(m.timestamp for m in sources)
        new = NewMemory(
            space_id=space_id, content=checked["content"],
            content_hash=content_hash(checked["content"]), memory_type=MemoryType.OBSERVATION,
            passage=None, passage_id=sources[0].passage_id, document_id=None, metadata={},
            entities=extract_entities(checked["content"]), timestamp=note_time, recorded_at=now,
            **_occurred(checked["content"], note_time), tags=checked["tags"],
            source_rowids=tuple(dict.fromkeys(m.rowid for m in sources)), embedding=vec[0],
            minhash=minhash_signature(checked["content"], self.spec.dedup), **scope,
            scopes=tuple(sorted(shared)),  # a note carries the scope paths all its sources share
        )
        with self._components.dense.writing(space_id):
            rowid = self.store.insert_batch([new])[0]
            self._components.dense.add(space_id, [rowid], vec)
        return f"mem_{rowid}"

    def _check_item(self, space_id: str, index: int, item: Mapping[str, Any], now: str
                    ) -> dict[str, Any]:
        where = f"items[{index}]"
        limits = self.spec.limits
        check_mapping(item, where)
        unknown = sorted(set(item) - set(WRITE_FIELDS))
        if unknown:
            raise invalid("unknown_field", f"{where}: unknown field(s) {', '.join(unknown)}",
                          unknown[0])
        content = item.get("content")
        if not isinstance(content, str) or not content.strip():
            raise invalid("empty_content", f"{where}.content must be a non-empty string",
                          "content")
        check_text(content, "content", limits.max_content_chars, limit_name="max_content_chars")
        tags = item.get("tags") or ()
        if isinstance(tags, str) or not isinstance(tags, Sequence) or not all(
                isinstance(t, str) and t.strip() for t in tags):
            raise invalid("wrong_type", f"{where}.tags must be a list of non-empty strings", "tags")
        if len(tags) > MAX_WRITE_TAGS:
            raise invalid("too_many_tags", f"{where}: at most {MAX_WRITE_TAGS} tags", "tags")
        for t in tags:
            check_text(t, "tags", MAX_TAG_CHARS, limit_name="max_tag_chars")
        self.check_reserved(tags)
        metadata = check_metadata(item.get("metadata"), "metadata", limits)
        check_clean(item, where)  # scopes and anything else: valid text only
        # redaction first: store, passage, index, entities and blocks see only redacted text
        out: dict[str, Any] = {"content": self.redactor.apply(content.strip()),
                               "tags": tuple(dict.fromkeys(tags)),
                               "metadata": metadata}
        for key in ("user_id", "agent_id", "session_id", "document_id"):
            value = item.get(key)
            if value is not None:
                check_text(value, key, limits.max_id_chars, limit_name="max_id_chars")
            out[key] = value
        ts = item.get("timestamp")
        out["timestamp"] = now if ts is None else normalize_instant(ts, "timestamp")
        # seed rule: the timestamp comes back exactly as sent; the parsed instant filters
        out["timestamp_sent"] = ts if isinstance(ts, str) else None
        out["scopes"] = check_write_scopes(item.get("scopes"))
        return out

    def check_reserved(self, tags: Sequence[str]) -> None:
        """Tags under the reserved prefix are the engine's own: 422 ``reserved_tag``."""
        _check_reserved(tags, self.spec.reserved_tag_prefix, "tags")

    # -- reads --------------------------------------------------------------------------------
    def retrieve(self, request: Mapping[str, Any] | None = None, /, **fields: Any
                 ) -> RetrieveResponse:
        """Retrieve memories for a question. Takes a request mapping or keyword fields.

        Tiers: the response cache answers first (``tier="cache"``) when an identical request
        was answered since the last write to any space it read (:mod:`memory_core.cache`);
        otherwise the hybrid channels (``tier="hybrid"``), escalated when thin or unconfident
        and ``escalate.enabled`` (``tier="escalated"``). Every response carries ``query_ms`` and
        a ``trace_id`` that :meth:`get_receipt` resolves to the trace.
        """
        return self._serve(self._body(request, fields))

    @staticmethod
    def _body(request: Mapping[str, Any] | None, fields: Mapping[str, Any]) -> dict[str, Any]:
        body = {} if request is None else dict(check_mapping(request, "request"))
        overlap = set(body) & set(fields)
        if overlap:
            raise invalid("duplicate_field", f"given twice: {', '.join(sorted(overlap))}")
        body.update(fields)
        return body

    def _serve(self, body: dict[str, Any], recent_session: str | None = None,
               session_scope: Mapping[str, str] | None = None, context_call: bool = False
               ) -> RetrieveResponse:
        """Validate, then answer from the cache or the pipeline; record the trace.
        ``recent_session``: :meth:`session_context`'s session, whose latest turns follow the
        block; ``session_scope``: the scope it took from the session (for the trace);
        ``context_call``: a context call (its context hits: ``context_entity_cards`` cards)."""
        t0 = time.perf_counter()
        req = parse_request(body, self.spec, self.available_modes,
                            {Mode.ACCURATE: self.rerank_unavailable or ""})
        if req.route is None:
            assert req.space_id is not None
            self._authorised(req.space_id, req.principal, "viewer")
        if req.fallback_space_id is not None:
            self._authorised(req.fallback_space_id, req.principal, "viewer")
        # one SQL read a request, only when a cache can use it
        versions = self.store.versions() if self.spec.cache.enabled else {}
        day = None if req.query_timestamp else format_instant(self.clock())[:10]
        key = cache_key(req, day, {"recent_session": recent_session, "mode_given":
                                   body.get("mode") is not None, "context_call": context_call})
        trace_id = new_receipt_id()
        now = format_instant(self.clock())
        entry = self.cache.get(key, versions)
        if entry is not None:
            trace = dataclasses.replace(
                entry.trace, receipt_id=trace_id, created_at=now,
                request=frozen_map(req.to_dict()),
                stages=frozen_map({**entry.trace.stages, "tier": Tier.CACHE.value,
                                   "cached_from": entry.trace.receipt_id}))
            self._record(trace, req.receipt)
            return dataclasses.replace(
                entry.response, tier=Tier.CACHE, trace_id=trace_id,
                receipt_id=trace_id if req.receipt else None,
                query_ms=round((time.perf_counter() - t0) * 1000, 3))
        searched = None
        if req.route is None:
            comp = self._components
            if context_call:  # the seed's context hits: neighbours (and the configured cards)
                hits = dataclasses.replace(self.spec.context_hits,
                                           entity_cards=self.spec.context_hits.context_entity_cards)
                comp = dataclasses.replace(comp, spec=dataclasses.replace(self.spec,
                                                                          context_hits=hits))
            out = pipeline.run(comp, req, [req.space_id])
        else:
            out, searched = self._routed_read(req)
        if body.get("mode") is None and req.mode.value != self.spec.default_mode:
            out.stages["fallback"] = {"stage": "mode", "requested": self.spec.default_mode,
                                      "used": req.mode.value,
                                      "reason": self.rerank_unavailable or "unavailable"}
        context, token_estimate = out.context, out.token_estimate
        if recent_session is not None and req.format == "block":
            out.stages["session_scope"] = dict(session_scope or {})
            context = self._append_recent(req, out, searched, recent_session)
            token_estimate = blocks.estimate_tokens(context, self.spec.context.chars_per_token)
        trace = build_receipt(trace_id, now, req, out.kept, out.drops, searched, out.stages)
        self._record(trace, req.receipt)
        response = RetrieveResponse(
            results=list(out.results), context=context, token_estimate=token_estimate,
            searched=searched, receipt_id=trace_id if req.receipt else None,
            fallback=out.stages.get("fallback"), tier=Tier(out.stages.get("tier", "hybrid")),
            query_ms=round((time.perf_counter() - t0) * 1000, 3), trace_id=trace_id,
            context_hits=out.context_hits)
        if not out.failed and "fallback" not in out.stages:  # partial answers are not kept
            read = versions if req.route is not None else {
                req.space_id: versions.get(req.space_id, 0)}
            self.cache.put(key, response, trace, read, exact=req.route is not None)
        return response

    def _record(self, trace: Receipt, persist: bool) -> None:
        self._traces.add(trace)
        if persist:
            self.store.save_receipt(trace)

    def _append_recent(self, req: RetrieveRequest, out: pipeline.PipelineOutput,
                       searched: list[SearchedEntry] | None, session_id: str) -> str:
        """The block plus the session's latest turns (``context_hits.recent_turns``), under the
        request's filter (its ``session_id`` aside) and, with ``context_max_tokens``, as many of
        the newest as fit after the recalled block; ``stages["recent_turns"]`` records them."""
        spaces = [req.space_id] if searched is None else [
            e.space_id for e in searched
            if e.space_id is not None and (e.reason is None or e.stage == "fallback")]
        shown = {r.memory_id for r in out.results}
        rows: list[int] = []
        for space_id in spaces:
            if space_id is None:
                continue
            flt = compile_filter(req, self.store, space_id, self.spec)
            rows.extend(r for r in self.store.recent_in_session(
                space_id, session_id, flt, self.spec.context_hits.recent_turns)
                if f"mem_{r}" not in shown)
        found = self.store.get_memories(rows)
        turns = sorted((found[r] for r in rows if r in found),
                       key=lambda m: (m.timestamp, m.rowid))
        text, left_out = blocks.fit_recent(out.context or "", [m.content for m in turns],
                                           session_id, req.context_max_tokens,
                                           self.spec.context.chars_per_token)
        out.stages["recent_turns"] = {
            "session_id": session_id, "shown": [m.memory_id for m in turns[left_out:]],
            "cut_for_budget": [m.memory_id for m in turns[:left_out]]}
        return text

    def get_context(self, request: Mapping[str, Any] | None = None, /, **fields: Any) -> str:
        """The block text only (``format="block"``); takes any request field but ``route``.

        Seed rules: ``get_context`` is addressed only (``route`` is 422 ``addressed_only``),
        and ``session_id`` is the strict scope it is in :meth:`retrieve`: only that session's
        memories are recalled and nothing is appended. For the second seed's session context
        (recall for the session's scope plus its recent turns) call :meth:`session_context`.
        Context calls ask for context hits (turn and section neighbours) unless the request
        sends ``context_hits=false`` (``context_hits.on_for_context``); they ride beside the
        block in :meth:`retrieve_context`'s response and never change the block. An empty
        query is 422.
        """
        return self.retrieve_context(request, **fields).context or ""

    def retrieve_context(self, request: Mapping[str, Any] | None = None, /, **fields: Any
                         ) -> RetrieveResponse:
        """What :meth:`get_context` renders, as the whole response (its ``trace_id``, ``tier``,
        ``query_ms`` and results beside the block)."""
        return self._serve(self._context_body(request, fields, "get_context"),
                           context_call=True)

    def session_context(self, space_id: str, session_id: str, query: str,
                        request: Mapping[str, Any] | None = None, **fields: Any
                        ) -> RetrieveResponse:
        """The second seed's session context: recall for the session's scope, then its recent
        turns (``POST /sessions/{session_id}/context``; CLI ``memory-core session-context``).

        - Recall: ``query`` in ``space_id`` with the other request fields (``request`` and
          keywords; not ``route`` or ``session_id``), *not* restricted to the
          session itself. The session's scope: when the request names no ``user_id``
          (``agent_id``) and every memory of the session carries the same one, the recall is
          scoped to it (``stages["session_scope"]`` in the trace says what was applied).
        - Recent turns: the session's latest ``context_hits.recent_turns`` memories that pass
          the request's filters and were not already recalled follow the block, oldest first,
          under the label ``Recent turns (session <id>):``; with ``context_max_tokens`` only
          as many of the newest as fit after the recalled block (the block is never cut for
          them; ``stages["recent_turns"]`` lists shown and cut turns).

        Returns the whole response (``context`` holds the block); an unknown session simply
        has no recent turns.
        """
        body = self._body(request, fields)
        for name in ("route", "session_id", "space_id", "query"):
            if name in body:
                raise invalid("unknown_field", f"session_context takes {name} as an argument "
                              "or not at all, not as a request field", name)
        if not isinstance(session_id, str) or not session_id.strip():
            raise invalid("wrong_type", "session_id must be a non-empty string", "session_id")
        check_text(session_id, "session_id", self.spec.limits.max_id_chars,
                   limit_name="max_id_chars")
        if not isinstance(space_id, str) or not space_id.strip():
            raise invalid("wrong_type", "space_id must be a non-empty string", "space_id")
        principal = body.get("principal")
        self._authorised(space_id, principal if isinstance(principal, str) else None, "viewer")
        body = self._context_body(body, {"space_id": space_id, "query": query},
                                  "session_context")
        applied: dict[str, str] = {}
        held = self.store.session_scopes(space_id, session_id)
        for key in ("user_id", "agent_id"):
            values = held.get(key, [])
            if body.get(key) is None and len(values) == 1 and values[0] is not None:
                body[key] = applied[key] = values[0]
        return self._serve(body, recent_session=session_id, session_scope=applied,
                           context_call=True)

    def _context_body(self, request: Mapping[str, Any] | None, fields: Mapping[str, Any],
                      call: str) -> dict[str, Any]:
        """A context call's request: addressed only (seed: ``route`` is 422), a block, and
        context hits unless the request says otherwise (``context_hits.on_for_context``)."""
        body = self._body(request, fields)
        if body.get("route") is not None:
            raise invalid("addressed_only", f"{call} is addressed only: give space_id, not "
                          "route (use retrieve(route='auto', format='block') for a routed "
                          "block)", "route")
        if body.get("format") is None:
            body["format"] = "block"
        if body.get("context_hits") is None:
            body["context_hits"] = self.spec.context_hits.on_for_context
        return body

    def get_receipt(self, receipt_id: str, principal: str | None = None) -> Receipt:
        """A receipt, or the trace of any recent retrieve by its ``trace_id`` (the last
        ``trace.keep`` are held in memory; ``receipt=True`` persists one in the store).

        Only the principal whose request left it may read it, and the store's owner (the
        operator: the dashboard and the workbench read every receipt); for anyone else it is
        404 exactly like a missing one. Without ``principal`` the caller is the owner."""
        if not isinstance(receipt_id, str) or text_problem(receipt_id) is not None:
            raise not_found("receipt", repr(receipt_id)[:80])
        who = self.spec.owner if principal is None else check_text(
            principal, "principal", self.spec.limits.max_id_chars, limit_name="max_id_chars")
        receipt = self._traces.get(receipt_id) or self.store.get_receipt(receipt_id)
        owner = None if receipt is None else (receipt.request.get("principal")
                                              or self.spec.owner)
        if receipt is None or who not in (owner, self.spec.owner):
            raise not_found("receipt", receipt_id)
        return receipt

    def get_memory(self, memory_id: str, principal: str | None = None) -> Memory:
        """A memory by id, if ``principal`` (default: the store's owner) may read its space;
        404 otherwise, exactly like a missing id (ids are sequential: every by-id read is
        authorised instead of relying on ids being hard to guess)."""
        if principal is not None:
            check_text(principal, "principal", self.spec.limits.max_id_chars,
                       limit_name="max_id_chars")
        row = rowid_of(memory_id)
        found = self.store.get_memories([row]) if row is not None else {}
        if row not in found:
            raise not_found("memory", repr(memory_id)[:80] if not isinstance(memory_id, str)
                            else memory_id)
        try:
            self._authorised(found[row].space_id, principal, "viewer")
        except MemoryCoreError:
            raise not_found("memory", memory_id) from None
        return found[row]

    def model_identity(self) -> dict[str, Any]:
        """Models in use, for reports (path or id plus a weights hash)."""
        reranker = (self.reranker.identity() if self.reranker is not None
                    else {"unavailable": self.rerank_unavailable or
                          "unused (rerank.scorer=stacked without the cross-encoder feature)"})
        out = {"embedder": self.embedder.identity(), "reranker": reranker}
        if self.spec.rerank.scorer == "stacked":
            out["scorer"] = (self.scorer.identity() if self.scorer is not None
                             else {"unavailable": self.rerank_unavailable})
        return out


def _occurred(text: str, timestamp: str) -> dict[str, str | None]:
    """``occurred_start/end`` from the dates the text names (relative ones read against the
    memory's timestamp); both None when it names none."""
    start, end = event_window(text, timestamp)
    return {"occurred_start": start, "occurred_end": end}


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_text(text: str, max_chars: int | None) -> list[str]:
    """``text`` cut into pieces of at most ``max_chars`` characters: whole sentences packed
    greedily, a longer sentence cut at spaces, a longer word cut hard (``None``: one piece).

    Example:
        >>> split_text("One two. Three four five. Six.", 16)
        ['One two.', 'Three four five.', 'Six.']
    """
    if max_chars is None or len(text) <= max_chars:
        return [text]
    if max_chars < 1:
        raise ValueError(f"split_max_chars must be >= 1, got {max_chars}")
    units: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        while len(sentence) > max_chars:
            cut = sentence.rfind(" ", 0, max_chars + 1)
            cut = cut if cut > 0 else max_chars
            units.append(sentence[:cut].strip())
            sentence = sentence[cut:].strip()
        if sentence:
            units.append(sentence)
    pieces: list[str] = []
    for unit in units:
        if pieces and len(pieces[-1]) + 1 + len(unit) <= max_chars:
            pieces[-1] = f"{pieces[-1]} {unit}"
        else:
            pieces.append(unit)
    return [p for p in pieces if p]


def _accurate_unavailable(spec: EngineSpec, reranker: Reranker | None,
                          scorer: RelevanceModel | None, reason: str | None) -> str | None:
    """Why accurate mode cannot run with these parts (None when it can)."""
    if spec.rerank.scorer == "stacked":
        if scorer is None:
            return reason or "no stacked relevance model was given to this engine"
        if scorer.uses_cross_encoder and reranker is None:
            return reason or ("the stacked relevance model uses a cross-encoder feature and "
                              "this engine has no cross-encoder")
        return None
    return None if reranker is not None else (
        reason or "no cross-encoder was given to this engine")
