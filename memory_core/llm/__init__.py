"""The response model (DESIGN.md "Response model"): an OpenAI-compatible chat endpoint, named
by the ``llm`` config group or ``MEMORY_CORE_LLM_URL`` / ``_MODEL`` / ``_API_KEY``; nothing by
default. :class:`ResponseModel` calls it (retries, a concurrency cap, token and cost
accounting, the on-disk reply cache); :mod:`.prompts` holds the fixed, versioned prompts."""

from memory_core.llm.model import ModelUnavailable, Reply, ResponseModel, Usage, response_model
from memory_core.llm.spec import JUDGE_PREFIX, LLM_PREFIX, LLMSpec, from_env, judge_spec

__all__ = ["JUDGE_PREFIX", "LLM_PREFIX", "LLMSpec", "ModelUnavailable", "Reply",
           "ResponseModel", "Usage", "from_env", "judge_spec", "response_model"]
