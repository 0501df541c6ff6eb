"""Where a response model is and how it is called: :class:`LLMSpec` (the ``llm`` config group,
and the judge's block beside it), filled from the environment by :func:`from_env`.

Nothing is configured by default: ``url`` and ``model`` are ``None`` until a config or the
environment names them (``MEMORY_CORE_LLM_URL``, ``MEMORY_CORE_LLM_MODEL``; the judge's
``MEMORY_CORE_JUDGE_URL``, ``MEMORY_CORE_JUDGE_MODEL``). The API key is never a config value:
it is read from ``<env_prefix>_API_KEY`` once, when a :class:`~memory_core.llm.ResponseModel`
is made (a key changed later is used by the next model object), and it is in no
``metrics.json`` and no log; the URL is recorded with any password in it masked.

Example:
    >>> LLMSpec().configured
    False
    >>> from_env(LLMSpec(), {"MEMORY_CORE_LLM_URL": "http://127.0.0.1:8000/v1",
    ...                      "MEMORY_CORE_LLM_MODEL": "m"}).endpoint
    'http://127.0.0.1:8000/v1/chat/completions'
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from memory_core.config import default_cache_dir
from memory_core.store.uri import redact_url

LLM_PREFIX = "MEMORY_CORE_LLM"
JUDGE_PREFIX = "MEMORY_CORE_JUDGE"


@dataclass(frozen=True)
class LLMSpec:
    """An OpenAI-compatible chat endpoint (OpenAI, vLLM, Ollama, llama.cpp's server)."""

    # the API's base (".../v1") or the full ".../chat/completions" address; None: not configured
    url: str | None = None
    model: str | None = None  # the model id sent in each request; None: not configured
    # the environment's names: <prefix>_URL, <prefix>_MODEL override url/model; <prefix>_API_KEY
    # is the bearer key (optional: a local server may need none)
    env_prefix: str = LLM_PREFIX
    timeout_s: float = 60.0        # one HTTP attempt (connect + read)
    max_retries: int = 4           # more attempts after a 429, a 5xx, a timeout or no connection
    backoff_s: float = 0.5         # first wait; doubled each retry; a Retry-After header wins
    max_backoff_s: float = 20.0
    max_concurrency: int = 4       # requests in flight at once, per model object
    temperature: float = 0.0
    max_tokens: int = 512
    cache: bool = True             # the on-disk (prompt, model) -> reply cache
    cache_dir: str | None = None   # None: <MEMORY_CORE_CACHE>/llm
    # cost accounting, USD per million tokens (0: not priced; tokens are counted anyway)
    price_input_per_mtok: float = 0.0
    price_output_per_mtok: float = 0.0

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.max_concurrency < 1 or self.timeout_s <= 0:
            raise ValueError(f"llm: max_retries >= 0, max_concurrency >= 1 and timeout_s > 0, "
                             f"got {self.max_retries}, {self.max_concurrency}, {self.timeout_s}")

    @property
    def configured(self) -> bool:
        """Whether both the endpoint and the model are named."""
        return bool(self.url) and bool(self.model)

    @property
    def endpoint(self) -> str:
        """The chat completions address."""
        base = (self.url or "").rstrip("/")
        return base if base.endswith("/chat/completions") else f"{base}/chat/completions"

    @property
    def api_key_env(self) -> str:
        return f"{self.env_prefix}_API_KEY"

    def api_key(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The bearer key from the environment, or ``None``."""
        return (os.environ if environ is None else environ).get(self.api_key_env) or None

    def cache_path(self) -> Path:
        return (Path(self.cache_dir).expanduser() if self.cache_dir
                else default_cache_dir() / "llm")

    def identity(self) -> dict[str, object]:
        """What ``metrics.json`` and a receipt record of the model (never the key; a password in
        the URL masked)."""
        return {"url": redact_url(self.url) if self.url else None, "model": self.model,
                "temperature": self.temperature, "max_tokens": self.max_tokens}

    def why_not(self, also: str | None = "the llm config group") -> str:
        """Why this spec names no model (for a 501's message); ``also``: where else the caller
        reads a model from (``None``: the environment only, as the CLI)."""
        missing = " and ".join(f"{self.env_prefix}_{name}" for name, value
                               in (("URL", self.url), ("MODEL", self.model)) if not value)
        return (f"no response model is configured: set {missing}"
                f" (an OpenAI-compatible chat endpoint and its model id; the key, if any, in "
                f"{self.api_key_env})" + (f" or {also}" if also else ""))


def from_env(spec: LLMSpec, environ: Mapping[str, str] | None = None) -> LLMSpec:
    """``spec`` with ``url``/``model`` taken from ``<env_prefix>_URL``/``_MODEL`` where set."""
    env = os.environ if environ is None else environ
    url = env.get(f"{spec.env_prefix}_URL") or spec.url
    model = env.get(f"{spec.env_prefix}_MODEL") or spec.model
    return dataclasses.replace(spec, url=url, model=model)


def judge_spec(spec: LLMSpec | None = None) -> LLMSpec:
    """The judge's spec: ``spec``'s settings under the ``MEMORY_CORE_JUDGE`` names."""
    return dataclasses.replace(spec or LLMSpec(), env_prefix=JUDGE_PREFIX)
