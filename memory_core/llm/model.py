"""One response model: any OpenAI-compatible ``/chat/completions`` endpoint.

:class:`ResponseModel` sends chat messages and returns a :class:`Reply` (or streams the text),
with a timeout per attempt, retries with exponential backoff on 429, 5xx, timeouts and
refused connections (a ``Retry-After`` header wins, capped), at most ``max_concurrency``
requests in flight, token and cost accounting (:class:`Usage`) and the on-disk reply cache
(:mod:`memory_core.llm.cache`): a request already answered is answered from disk, costs
nothing and sends nothing.

A model that cannot answer (no connection after the retries, a 4xx other than 429, a reply
that is not a chat completion) raises :class:`ModelUnavailable`: the engine's 422
``validation_error`` with reason ``model_unavailable`` and what failed in the message (a status
code, a timeout, a refused connection). The message reaches API clients and stored receipts, so
it never names the endpoint's address or quotes the upstream body (which may echo a key): those
go to this module's log, the address through :func:`~memory_core.store.uri.redact_url`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import httpx

from memory_core.errors import ErrorCode, MemoryCoreError
from memory_core.llm.cache import ReplyCache, cache_key
from memory_core.llm.spec import LLMSpec
from memory_core.store.uri import redact_url

Message = Mapping[str, str]
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
KEY_STRIPES = 64
log = logging.getLogger(__name__)


class ModelUnavailable(MemoryCoreError):
    """422 ``validation_error`` / ``model_unavailable``: the configured model did not answer."""

    def __init__(self, message: str):
        super().__init__(ErrorCode.VALIDATION_ERROR, "model_unavailable", message)


@dataclass(frozen=True)
class Reply:
    """One answer: its text, the tokens it cost and whether the cache gave it."""

    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    cached: bool
    key: str


@dataclass
class Usage:
    """Running totals of one model object (read with :meth:`ResponseModel.usage`)."""

    requests: int = 0        # HTTP requests sent (retries included)
    retries: int = 0
    replies: int = 0         # replies returned (from the server or the cache)
    cache_hits: int = 0
    prompt_tokens: int = 0   # tokens of replies from the server (a cached reply costs 0)
    completion_tokens: int = 0
    cost_usd: float = 0.0


class ResponseModel:
    """Calls one configured endpoint (module docstring). Safe to share between threads."""

    def __init__(self, spec: LLMSpec, transport: httpx.BaseTransport | None = None,
                 sleep: Any = time.sleep):
        if not spec.configured:
            raise ValueError(spec.why_not())
        self.spec = spec
        self.cache = ReplyCache(spec.cache_path()) if spec.cache else None
        key = spec.api_key()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(timeout=spec.timeout_s, headers=headers, transport=transport)
        self._slots = threading.BoundedSemaphore(spec.max_concurrency)
        # one request per key at a time: a second caller of a key in flight waits, then reads
        # the cache (striped: a fixed number of locks, keys spread by their hash)
        self._keys = [threading.Lock() for _ in range(KEY_STRIPES)]
        self._lock = threading.Lock()
        self._usage = Usage()
        self._sleep = sleep

    @property
    def model(self) -> str:
        return str(self.spec.model)

    def usage(self) -> dict[str, Any]:
        with self._lock:
            out = asdict(self._usage)
        out["cost_usd"] = round(out["cost_usd"], 6)
        return out

    def identity(self) -> dict[str, Any]:
        """The model as ``metrics.json`` records it, with the cache's digest so far."""
        return {**self.spec.identity(), "cache": self.spec.cache,
                "cache_hash": self.cache.digest() if self.cache else None}

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> ResponseModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one answer -------------------------------------------------------------------------

    def key(self, messages: Sequence[Message], max_tokens: int | None = None) -> str:
        return cache_key(self.model, messages, self.spec.temperature,
                         max_tokens or self.spec.max_tokens)

    def _one_at_a_time(self, key: str) -> threading.Lock | contextlib.nullcontext[None]:
        return (self._keys[int(key[:8], 16) % KEY_STRIPES] if self.cache is not None
                else contextlib.nullcontext())

    def complete(self, messages: Sequence[Message], max_tokens: int | None = None) -> Reply:
        """The reply to ``messages``, from the cache when it holds it (asked once even when
        several threads want it at the same time)."""
        key = self.key(messages, max_tokens)
        with self._one_at_a_time(key):
            return self._complete(key, messages, max_tokens)

    def _complete(self, key: str, messages: Sequence[Message], max_tokens: int | None
                  ) -> Reply:
        hit = self._cached(key)
        if hit is not None:
            return hit
        body = self._body(messages, max_tokens, stream=False)
        return self._completion(key, self._parsed(self._post(body).text))

    def stream(self, messages: Sequence[Message], max_tokens: int | None = None,
               on_reply: Callable[[Reply], object] | None = None) -> Iterator[str]:
        """The reply's text in pieces as the server sends them (server-sent events); a cached
        reply comes as one piece. The whole reply is cached and counted when it ends, and
        given to ``on_reply``."""
        key = self.key(messages, max_tokens)
        with self._one_at_a_time(key):
            yield from self._stream(key, messages, max_tokens, on_reply or (lambda _: None))

    def _stream(self, key: str, messages: Sequence[Message], max_tokens: int | None,
                on_reply: Callable[[Reply], object]) -> Iterator[str]:
        hit = self._cached(key)
        if hit is not None:
            on_reply(hit)
            yield hit.text
            return
        body = self._body(messages, max_tokens, stream=True)
        parts: list[str] = []
        rest: list[str] = []  # lines that are no event: a server that ignored stream=true
        events = 0
        usage: dict[str, Any] = {}
        model = self.model
        with self._slots:
            response = self._send(body, stream=True)
            try:
                for line in response.iter_lines():
                    if not line.startswith("data:"):
                        rest.append(line)
                        continue
                    events += 1
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    chunk = self._parsed(data)
                    usage = _object(chunk.get("usage") or usage)
                    model = str(chunk.get("model") or model)
                    for piece in _pieces(chunk):
                        parts.append(piece)
                        yield piece
            except httpx.HTTPError as exc:
                log.warning("the response model at %s: the stream broke off (%s: %s)",
                            redact_url(self.spec.endpoint), type(exc).__name__, exc)
                raise ModelUnavailable(f"the response model {self.model!r}: the stream broke "
                                       f"off ({type(exc).__name__})") from None
            finally:
                response.close()
        if not events:  # no event at all: a plain completion (answered whole) or nothing usable
            reply = self._completion(key, self._parsed("\n".join(rest)), empty=False)
            yield reply.text
            on_reply(reply)
            return
        on_reply(self._answered(key, "".join(parts), model,
                                int(usage.get("prompt_tokens") or 0),
                                int(usage.get("completion_tokens") or 0)))

    # -- internals --------------------------------------------------------------------------

    def _parsed(self, text: str) -> dict[str, Any]:
        """``text`` as a JSON object, else :class:`ModelUnavailable` (the text is logged)."""
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            log.warning("the response model at %s sent something that is not a JSON object: "
                        "%.200r", redact_url(self.spec.endpoint), text)
            raise ModelUnavailable(f"the response model {self.model!r} answered something that "
                                   f"is not a JSON object")
        return data

    def _completion(self, key: str, data: dict[str, Any], empty: bool = True) -> Reply:
        """The reply in one chat completion (cached), else :class:`ModelUnavailable` (also for
        an empty one unless ``empty``)."""
        try:
            content = data["choices"][0]["message"]["content"]
            if not (empty or content):
                raise ValueError("an empty reply")
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            log.warning("the response model at %s: not a chat completion (%s: %s)",
                        redact_url(self.spec.endpoint), type(exc).__name__, exc)
            raise ModelUnavailable(f"the response model {self.model!r} answered something that "
                                   f"is not a chat completion") from None
        usage = _object(data.get("usage"))
        return self._answered(key, str(content or ""), str(data.get("model") or self.model),
                              int(usage.get("prompt_tokens") or 0),
                              int(usage.get("completion_tokens") or 0))

    def _body(self, messages: Sequence[Message], max_tokens: int | None,
              stream: bool) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": [dict(m) for m in messages],
                                "temperature": self.spec.temperature,
                                "max_tokens": max_tokens or self.spec.max_tokens}
        if stream:
            body.update(stream=True, stream_options={"include_usage": True})
        return body

    def _cached(self, key: str) -> Reply | None:
        if self.cache is None:
            return None
        entry = self.cache.get(key)
        if entry is None:
            return None
        with self._lock:
            self._usage.replies += 1
            self._usage.cache_hits += 1
        return Reply(str(entry["text"]), str(entry.get("model") or self.model),
                     int(entry.get("prompt_tokens") or 0),
                     int(entry.get("completion_tokens") or 0), 0.0, True, key)

    def _answered(self, key: str, text: str, model: str, prompt_tokens: int,
                  completion_tokens: int) -> Reply:
        s = self.spec
        cost = (prompt_tokens * s.price_input_per_mtok
                + completion_tokens * s.price_output_per_mtok) / 1e6
        with self._lock:
            u = self._usage
            u.replies += 1
            u.prompt_tokens += prompt_tokens
            u.completion_tokens += completion_tokens
            u.cost_usd += cost
        if self.cache is not None:
            self.cache.put(key, {"text": text, "model": model, "prompt_tokens": prompt_tokens,
                                 "completion_tokens": completion_tokens})
        return Reply(text, model, prompt_tokens, completion_tokens, cost, False, key)

    def _post(self, body: dict[str, Any]) -> httpx.Response:
        with self._slots:
            response = self._send(body, stream=False)
            response.read()
            return response

    def _send(self, body: dict[str, Any], stream: bool) -> httpx.Response:
        """One request with its retries (the caller holds a slot); the response's status is
        2xx, else :class:`ModelUnavailable` naming the last cause."""
        s = self.spec
        cause = ""
        for attempt in range(s.max_retries + 1):
            if attempt:
                with self._lock:
                    self._usage.retries += 1
            with self._lock:
                self._usage.requests += 1
            wait = min(s.max_backoff_s, s.backoff_s * 2 ** attempt)
            try:
                request = self._client.build_request("POST", s.endpoint, json=body)
                response = self._client.send(request, stream=stream)
            except httpx.TimeoutException as exc:
                cause = f"no answer within {s.timeout_s:g} s ({type(exc).__name__})"
                log.warning("the response model at %s: %s", redact_url(s.endpoint), cause)
            except httpx.TransportError as exc:
                cause = f"cannot connect ({type(exc).__name__})"
                log.warning("the response model at %s: cannot connect (%s: %s)",
                            redact_url(s.endpoint), type(exc).__name__, exc)
            else:
                if response.status_code < 400:
                    return response
                detail = response.read().decode("utf-8", "replace")[:200]
                response.close()
                cause = f"HTTP {response.status_code}"
                log.warning("the response model at %s answered HTTP %d: %s",
                            redact_url(s.endpoint), response.status_code, detail)
                if response.status_code not in RETRY_STATUS:
                    break
                wait = _retry_after(response, wait, s.max_backoff_s)
            if attempt < s.max_retries:
                self._sleep(wait)
        raise ModelUnavailable(f"the response model {self.model!r} did not answer: {cause}")


def _object(value: object) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (a missing or odd usage block)."""
    return value if isinstance(value, dict) else {}


def _pieces(chunk: dict[str, Any]) -> Iterator[str]:
    """The text pieces of one stream event (a choice or delta that is no object has none)."""
    choices = chunk.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        piece = _object(_object(choice).get("delta")).get("content")
        if isinstance(piece, str) and piece:
            yield piece


def _retry_after(response: httpx.Response, default: float, cap: float) -> float:
    value = response.headers.get("retry-after")
    try:
        return min(cap, max(0.0, float(value))) if value is not None else default
    except ValueError:
        return default


def response_model(spec: LLMSpec | None) -> ResponseModel | None:
    """The model ``spec`` names, or ``None`` when it names none."""
    return ResponseModel(spec) if spec is not None and spec.configured else None
