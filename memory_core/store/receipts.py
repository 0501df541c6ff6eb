"""Stored retrieval receipts (JSON bodies keyed by receipt id)."""

from __future__ import annotations

import json

from memory_core.store.db import Database
from memory_core.receipts import Receipt


class ReceiptQueries(Database):
    """Save, fetch and list receipts, newest first."""

    def save_receipt(self, receipt: Receipt) -> None:
        with self.transaction() as c:
            c.execute("INSERT INTO receipts VALUES (?, ?, ?)",
                      (receipt.receipt_id, receipt.created_at, json.dumps(receipt.to_dict())))

    def update_receipt(self, receipt: Receipt) -> None:
        """Rewrite a stored receipt's body (an answer recorded after its read); a receipt the
        store does not hold is not added."""
        with self.transaction() as c:
            c.execute("UPDATE receipts SET body = ? WHERE receipt_id = ?",
                      (json.dumps(receipt.to_dict()), receipt.receipt_id))

    def get_receipt(self, receipt_id: str) -> Receipt | None:
        rows = self._query("SELECT body FROM receipts WHERE receipt_id = ?", (receipt_id,))
        return Receipt.from_dict(json.loads(rows[0]["body"])) if rows else None

    def list_receipts(self, limit: int = 100) -> list[Receipt]:
        rows = self._query("SELECT body FROM receipts ORDER BY created_at DESC LIMIT ?", (limit,))
        return [Receipt.from_dict(json.loads(r["body"])) for r in rows]
