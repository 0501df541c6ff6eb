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
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from memory_core import access, index_files, reads
from memory_core.access import Role
from memory_core.cache import ResponseCache, TraceLog
from memory_core.channels.dense import DenseIndex
from memory_core.pipeline import Components
from memory_core.channels.query_adapter import adapter_from_ref
from memory_core.config import EngineSpec, RoutingSpec
from memory_core.embed import Embedder, build_embedder
from memory_core.engine_routing import RoutePlanner
from memory_core.errors import MemoryCoreError, conflict, invalid, not_found
from memory_core.receipts import Receipt
from memory_core.redact import Redactor
from memory_core.rerank.cross_encoder import CrossEncoderReranker, Reranker
from memory_core.rerank.stacked import RelevanceModel
from memory_core.routing import RouteDecision, Router, build_router
from memory_core.rerank.loading import accurate_unavailable, load_scorers, models_in_use
from memory_core.serve import Reader
from memory_core.store import StoreBackend, rowid_of
from memory_core.store.location import open_location
from memory_core.times import Clock, format_instant, system_clock
from memory_core.types import Memory, Mode, RetrieveResponse, Space, frozen_map
from memory_core.validate import check_reserved as _check_reserved
from memory_core.requests import parse_item
from memory_core.validate import check_text, text_problem
from memory_core.write import Writer, WriteReport


class MemoryEngine(reads.SeedReads):
    """A memory store plus its retrieval pipeline (the agent-memory seed's reads and the
    entity graph: :class:`memory_core.reads.SeedReads`)."""

    def __init__(self, store: StoreBackend, dense: DenseIndex, embedder: Embedder, spec: EngineSpec,
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
        self.rerank_unavailable = accurate_unavailable(spec, reranker, scorer,
                                                       rerank_unavailable)
        self.redactor = Redactor.from_spec(spec.redact)  # a bad pattern fails here, at start
        # channels.query_adapter: a missing or bad file is a 422 here, at open, never skipped
        self.query_adapter = adapter_from_ref(spec.channels.query_adapter, embedder.dim)
        # route="auto": the injected router, else the one spec.routing names
        self.router = router if router is not None else build_router(spec.routing, embedder)
        self.cache = ResponseCache(spec.cache)  # tier "cache" (memory_core/cache.py)
        self._traces = TraceLog(spec.trace.keep)
        self._components = Components(store, dense, embedder, spec, reranker, clock=clock,
                                      scorer=scorer, query_adapter=self.query_adapter)

    @property
    def _components(self) -> Components:
        """The parts the pipeline is given; setting them (configure_routing, a test's fake)
        builds the write path, the route planner and the read path over them, once."""
        return self._parts

    @_components.setter
    def _components(self, parts: Components) -> None:
        self._parts = parts
        self._writer = Writer(self.store, parts.dense, self.embedder, self.spec, self.redactor,
                              self.clock)
        self._planner = RoutePlanner(self.spec, self.store, self.embedder, self.router, parts,
                                     self.redactor, self.available_modes, self._authorised)
        self._reader = Reader(self.spec, self.store, self.clock, self.cache, self._traces,
                              parts, self._planner, self.available_modes,
                              self.rerank_unavailable, self._authorised)

    # -- lifecycle ----------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, spec: EngineSpec | None = None,
             embedder: Embedder | None = None, clock: Clock = system_clock,
             reranker: Reranker | None = None, router: Router | None = None,
             scorer: RelevanceModel | None = None) -> MemoryEngine:
        """Open (or create) a store directory, or an in-memory store for ``":memory:"``; a
        URL is never a directory (:mod:`memory_core.store.location`).

        The vector index is built from the embeddings stored in SQLite on a space's first use;
        with ``channels.dense_persist`` it is saved to ``<dir>/vectors`` by :meth:`flush` and
        loaded from there when the file checks out (see :mod:`memory_core.channels.dense`).
        Accurate mode's models (``rerank.scorer``) are the given ones or those
        :func:`memory_core.rerank.loading.load_scorers` finds. When a needed model does not load,
        accurate mode is unavailable: asking for it is a 422 ``model_unavailable`` that says why
        (naming the path), and requests that omit ``mode`` are served in fast mode with that
        fallback recorded in the response and the receipt.
        """
        spec = spec or EngineSpec()
        embedder = embedder or build_embedder(spec.embed)
        reranker, scorer, unavailable = load_scorers(spec, reranker, scorer,
                                                     CrossEncoderReranker)
        store, root = open_location(path, spec.store.cache_mb)  # a URL is never a directory
        vectors = None
        if root is not None:
            index_files.remove_legacy_files(root / "vectors")  # pre-issue-21 unchecked copies
            vectors = root / "vectors" if spec.channels.dense_persist else None
        dense = DenseIndex(store, embedder.dim, vectors, spec.channels)
        return cls(store, dense, embedder, spec, clock, reranker, unavailable, router, scorer)

    def flush(self) -> None:
        """Persist the vector index files when ``channels.dense_persist`` is on (SQLite, the
        one durable copy of every memory and embedding, needs no flush) and the embedding
        cache's rows still waiting in memory (:class:`memory_core.embed.CachedEmbedder`)."""
        self._components.dense.save()
        flush_cache = getattr(self._components.embedder, "flush", None)
        if callable(flush_cache):
            flush_cache()

    def close(self) -> None:
        try:
            self.flush()
        finally:  # a failed flush still closes the store (and then raises)
            self.store.close()

    def __enter__(self) -> MemoryEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def cache_report(self) -> dict[str, Any]:  # what this process keeps (store.cache_mb)
        return self.store.budget.report()

    @property
    def available_modes(self) -> frozenset[Mode]:
        """Fast always; accurate when the engine has the scorer ``rerank.scorer`` needs."""
        return frozenset({Mode.FAST} if self.rerank_unavailable is not None
                         else {Mode.FAST, Mode.ACCURATE})

    # -- spaces -------------------------------------------------------------------------------
    def create_space(self, space_id: str, description: str = "", default: bool = False,
                     members: Mapping[str, str] | None = None) -> Space:
        """Create a space. Without ``members`` the store's owner owns it."""
        members = access.check_new_space(self.spec, space_id, description, default, members)
        if self.store.get_space(space_id) is not None:
            raise conflict("space_exists", f"space {space_id!r} already exists", "space_id")
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
        who = self._principal(principal)
        return [s for s in self.store.list_spaces() if who in s.members]

    def _authorised(self, space_id: str, principal: str | None, need: Role | str) -> Space:
        """The space, if ``principal`` holds at least role ``need`` in it; 404 otherwise
        (:func:`memory_core.access.authorise`)."""
        return access.authorise(self.store, self.spec.limits, self.spec.owner, space_id,
                                principal, need)

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
        none fits (see :meth:`memory_core.engine_routing.RoutePlanner.route_write`);
        ``get_memory(id).space_id`` says where it went.
        ``scopes``: scope paths (``"org/acme/team/payments"``) a request's ``lens`` matches."""
        item = {"content": content, "timestamp": timestamp, "tags": tags, "user_id": user_id,
                "agent_id": agent_id, "session_id": session_id, "metadata": metadata,
                "document_id": document_id, "scopes": scopes}
        if route is None and space_id is not None:
            return self.write_many(space_id, [item], principal=principal)[0]
        # a routed write: the item is checked once, first (the router embeds its content)
        parsed, _ = parse_item(item, 0, self.spec, None), self._principal(principal)
        space_id = self._planner.route_write(space_id, route, parsed.content, principal)
        self._authorised(space_id, principal, Role.DEVELOPER)
        return self._writer.write_batch(space_id, [item], [parsed]).memory_ids[0]

    def write_many(self, space_id: str, items: Sequence[Mapping[str, Any]],
                   principal: str | None = None) -> list[str]:
        """Write facts in one transaction; every item is validated before anything is stored
        (the write path: :class:`memory_core.write.Writer`); :meth:`write_batch`'s ids."""
        return self.write_batch(space_id, items, principal).memory_ids

    def write_batch(self, space_id: str, items: Sequence[Mapping[str, Any]],
                    principal: str | None = None) -> WriteReport:
        """:meth:`write_many` with its report: a byte-identical upload of a document already
        in the space is not stored again, its id is the stored one's, and ``collapsed`` says
        so (:meth:`memory_core.write.Writer.write_batch`)."""
        self._authorised(space_id, principal, Role.DEVELOPER)
        return self._writer.write_batch(space_id, items)

    def observe(self, space_id: str, content: str, source_ids: Sequence[str],
                tags: Sequence[str] | None = None, principal: str | None = None) -> str:
        """Store an observation (a note built from facts). Its sources must be facts of the same
        space and the same user scope; the note inherits the scope its sources share."""
        self._authorised(space_id, principal, Role.DEVELOPER)
        return self._writer.observe(space_id, content, source_ids, tags)

    def check_reserved(self, tags: Sequence[str]) -> None:
        """Tags under the reserved prefix are the engine's own: 422 ``reserved_tag``."""
        _check_reserved(tags, self.spec.reserved_tag_prefix, "tags")

    # -- routing ------------------------------------------------------------------------------
    def configure_routing(self, routing: RoutingSpec | None = None,
                          router: Router | None = None) -> None:
        """Swap the routing settings and/or the router (the routing experiment compares routers
        on one store). A new ``routing`` spec without a ``router`` builds the router it names."""
        if routing is not None:
            self.spec = dataclasses.replace(self.spec, routing=routing)
        if router is not None:
            self.router = router
        elif routing is not None:
            self.router = build_router(self.spec.routing, self.embedder)
        self._components = dataclasses.replace(self._components, spec=self.spec)  # rebuilds
        self.cache.clear()  # cached routed answers were decided by the previous router

    def eligible_spaces(self, principal: str | None = None, need: Role | str = Role.VIEWER
                        ) -> list[Space]:
        """The spaces a routed request may consider: every non-default space where ``principal``
        (default: the store's owner) holds at least role ``need``."""
        return self._planner.eligible_spaces(principal, Role(need))

    def route(self, query: str, principal: str | None = None, max_targets: int | None = None,
              router: Router | None = None) -> RouteDecision:
        """A dry run of routing: which spaces a routed read of ``query`` would search (nothing
        is searched). ``router`` overrides the engine's. Raises 422 ``no_route_target`` when the
        router cannot name a target (reasons as for a routed read without a fallback)."""
        return self._planner.route(query, principal, max_targets, router)

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
        return self._reader.serve(request, fields)

    def _serve(self, body: dict[str, Any], recent_session: str | None = None,
               session_scope: Mapping[str, str] | None = None, context_call: str | None = None,
               sections_only: bool = False, fold_sections: bool = False
               ) -> RetrieveResponse:
        """A body already merged, answered (:meth:`memory_core.serve.Reader.serve`)."""
        return self._reader.serve(body, None, recent_session, session_scope, context_call,
                                  sections_only, fold_sections)

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
        return self._serve(reads.context_body(request, fields), context_call="get_context")

    def session_context(self, space_id: str, session_id: str, query: str,
                        request: Mapping[str, Any] | None = None, **fields: Any
                        ) -> RetrieveResponse:
        """The second seed's session context: recall for the session's scope, then its recent
        turns (``POST /sessions/{session_id}/context``; CLI ``memory-core session-context``).

        - Recall: ``query`` in ``space_id`` with the other request fields (``request`` and
          keywords; not ``route`` or ``session_id``), *not* restricted to the
          session itself. The session's scope: when the request names no ``user_id``
          (``agent_id``) and every memory of the session carries the same one, the recall is
          scoped to it (the trace's ``session_scope`` says what was applied).
        - Recent turns: the session's latest ``context_hits.recent_turns`` memories that pass
          the request's filters and were not already recalled follow the block, oldest first,
          under the label ``Recent turns (session <id>):``; with ``context_max_tokens`` only
          as many of the newest as fit after the recalled block (the block is never cut for
          them; the trace's ``recent_turns`` lists shown and cut turns).

        Returns the whole response (``context`` holds the block); an unknown session simply
        has no recent turns."""
        return self._session_read(space_id, session_id, query, request, fields, False)

    def get_receipt(self, receipt_id: str, principal: str | None = None) -> Receipt:
        """A receipt, or the trace of any recent retrieve by its ``trace_id`` (the last
        ``trace.keep`` are held in memory; ``receipt=True`` persists one in the store).

        Only the principal whose request left it may read it, and the store's owner (the
        operator: the dashboard and the workbench read every receipt); for anyone else it is
        404 exactly like a missing one. Without ``principal`` the caller is the owner."""
        if not isinstance(receipt_id, str) or text_problem(receipt_id) is not None:
            raise not_found("receipt", repr(receipt_id)[:80])
        who = self._principal(principal)
        receipt = self._traces.get(receipt_id) or self.store.get_receipt(receipt_id)
        if receipt is None or not access.may_read_receipt(receipt, who, self.spec.owner):
            raise not_found("receipt", receipt_id)
        return receipt

    def get_memory(self, memory_id: str, principal: str | None = None) -> Memory:
        """A memory by id, if ``principal`` (default: the store's owner) may read its space;
        404 otherwise, exactly like a missing id (ids are sequential: every by-id read is
        authorised instead of relying on ids being hard to guess)."""
        self._principal(principal)
        row = rowid_of(memory_id)
        found = self.store.get_memories([row]) if row is not None else {}
        if row not in found:
            raise not_found("memory", repr(memory_id)[:80] if not isinstance(memory_id, str)
                            else memory_id)
        try:
            self._authorised(found[row].space_id, principal, Role.VIEWER)
        except MemoryCoreError:
            raise not_found("memory", memory_id) from None
        return found[row]

    def list_receipts(self, limit: int = 100, principal: str | None = None) -> list[Receipt]:
        """The newest ``limit`` persisted receipts (``receipt=True``), newest first; another
        principal than the owner sees only its own requests' (as :meth:`get_receipt` allows)."""
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise invalid("wrong_type", "limit must be a positive integer", "limit")
        who = self._principal(principal)
        return [r for r in self.store.list_receipts(limit=limit)
                if access.may_read_receipt(r, who, self.spec.owner)]

    def iter_memories(self, space_id: str | None = None, principal: str | None = None
                      ) -> Iterator[Memory]:
        """Every memory of ``space_id``, or of every space ``principal`` (default: the owner)
        is a member of, by space then row; a space one may not read is 404 like a missing one."""
        if space_id is not None:
            spaces = [self._authorised(space_id, principal, Role.VIEWER).space_id]
        else:
            spaces = [s.space_id for s in self.list_spaces(principal)]
        yield from reads.iter_space_memories(self.store, spaces)

    def memories(self, memory_ids: Sequence[str]) -> dict[str, Memory]:
        """The store's memories among ``memory_ids`` in one batched read, by id (an id it lacks
        is absent): the owner's view (the dashboard resolves the ids a receipt names)."""
        return reads.memories_by_id(self.store, memory_ids)

    def count_memories(self, space_id: str | None = None) -> int:
        """How many memories ``space_id`` (None: the whole store) holds."""
        return self.store.count_memories(space_id)

    @property
    def store_path(self) -> str:
        """Where the store lives: its SQLite file, ``:memory:``, or its URI (no password)."""
        return str(self.store.path)

    def _principal(self, principal: str | None) -> str:
        """The acting principal: the store's owner when None, else a checked id."""
        return self.spec.owner if principal is None else check_text(
            principal, "principal", self.spec.limits.max_id_chars, limit_name="max_id_chars")

    def model_identity(self) -> dict[str, Any]:
        """Models in use, for reports (path or id plus a weights hash;
        :func:`memory_core.rerank.loading.models_in_use`)."""
        return models_in_use(self.spec, self.embedder, self.reranker, self.scorer,
                             self.query_adapter, self.rerank_unavailable)
