"""What the revisit schedule holds: how many ended URLs are due now, soon and later (`status`, dashboard)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

HOUR, DAY = 3600.0, 86400.0


@dataclass(frozen=True, slots=True)
class Due:
    now: int = 0
    within_hour: int = 0
    within_day: int = 0
    later: int = 0
    next_at: float | None = None
    """When the first URL not due yet becomes due (epoch seconds)."""

    @property
    def total(self) -> int:
        return self.now + self.within_hour + self.within_day + self.later


def due_counts(conn: sqlite3.Connection, crawl_id: int, now: float) -> Due:
    """Ended URLs by when their revisit is due (from `urls_due`: URLs with a due time only)."""
    row = conn.execute(
        "SELECT COUNT(*) FILTER (WHERE next_due <= ?1), "
        "COUNT(*) FILTER (WHERE next_due > ?1 AND next_due <= ?1 + ?2), "
        "COUNT(*) FILTER (WHERE next_due > ?1 + ?2 AND next_due <= ?1 + ?3), "
        "COUNT(*) FILTER (WHERE next_due > ?1 + ?3), MIN(next_due) FILTER (WHERE next_due > ?1) "
        "FROM urls WHERE crawl_id = ?4 AND next_due IS NOT NULL AND state IN (2, 3)",
        (now, HOUR, DAY, crawl_id),
    ).fetchone()
    return Due(*row)
