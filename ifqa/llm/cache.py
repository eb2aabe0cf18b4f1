"""A persistent response cache for LLM calls (SQLite), so reruns and resumed runs resend nothing.

The key is a SHA-256 of the model, the prompt and every generation parameter (never the API key
or the endpoint's credentials); the value is the completion and its token counts.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from ifqa.errors import IfqaError
from ifqa.paths import cache_dir


def key(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


class ResponseCache:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else cache_dir() / "llm-cache.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        if self.path.is_dir():
            raise IfqaError("is a folder; --cache names the response cache file", self.path)
        try:
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(responses)")}
        except sqlite3.DatabaseError as exc:
            raise IfqaError(f"not a response cache (an SQLite file): {exc}", self.path) from None
        if not {"key", "value"} <= columns:  # another program's database that happens to have the table name
            self._db.close()
            raise IfqaError(
                f"not a response cache (its 'responses' table has columns {', '.join(sorted(columns))}, not "
                "key and value); name another --cache file",
                self.path,
            )

    def get(self, cache_key: str) -> dict | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM responses WHERE key = ?", (cache_key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, cache_key: str, value: dict) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO responses (key, value) VALUES (?, ?)",
                (cache_key, json.dumps(value, ensure_ascii=False)),
            )
