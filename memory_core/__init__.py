"""memory_core: an agent-memory retrieval engine with receipts.

    from memory_core import MemoryEngine, MemoryCoreError
"""

from memory_core.engine import MemoryEngine
from memory_core.errors import ErrorCode, MemoryCoreError

__all__ = ["ErrorCode", "MemoryCoreError", "MemoryEngine"]
