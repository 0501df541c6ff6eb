"""MinHash signatures as stored: uint32 on disk, uint64 in memory.

datasketch's hash values are below 2**32, so packing to uint32 is lossless and halves the bytes.
"""

from __future__ import annotations

import numpy as np

MINHASH_STORED = np.uint32  # on disk; read back as uint64 (what memory_core.results.dedup compares)


def pack_minhash(signature: bytes | None) -> bytes | None:
    """A uint64 MinHash signature (``memory_core.results.dedup``) as stored: uint32, half the bytes.

    Example:
        >>> sig = np.array([1, 2**32 - 1], dtype=np.uint64).tobytes()
        >>> unpack_minhash(pack_minhash(sig)) == sig
        True
    """
    if signature is None:
        return None
    values = np.frombuffer(signature, dtype=np.uint64)
    if values.size and int(values.max()) >= 2**32:
        raise ValueError("a MinHash value does not fit 32 bits")
    return values.astype(MINHASH_STORED).tobytes()


def unpack_minhash(stored: bytes | None) -> bytes | None:
    """The stored uint32 signature back as uint64 bytes (what the dedup stage compares)."""
    if stored is None:
        return None
    return np.frombuffer(stored, dtype=MINHASH_STORED).astype(np.uint64).tobytes()
