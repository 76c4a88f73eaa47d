"""The PostgreSQL inbox page's plan and cost: a throwaway cluster (tests/pg.py), one reader holding 1,000 unread
messages (as bench/scale.py's inbox case), then `EXPLAIN (ANALYZE, BUFFERS)` of the statement the inbox runs and
its mean time over 200 calls (unprepared: planning included).

    python bench/pg_inbox_plan.py [--unread 1000]
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coordserver import db  # noqa: E402
from coordserver.db import Store  # noqa: E402
from coordserver.domain import messages  # noqa: E402
from coordserver.sql import _placeholders  # noqa: E402
from tests import pg  # noqa: E402

KNOWN = frozenset({"bench", "reader"})


def inbox_statement(store_read: Any) -> tuple[str, list[Any]]:
    """The SQL and parameters the first unread page runs (caught on its way to the database)."""
    caught: dict[str, Any] = {}
    run = messages._rows

    def catching(sql: str, params: Any) -> Any:
        caught["sql"], caught["params"] = sql, list(params)
        return run(sql, params)
    messages._rows = catching
    try:
        store_read(messages.inbox_page, "reader", "unread", 50, None)
    finally:
        messages._rows = run
    return caught["sql"], caught["params"]


def explain(sql: str, params: list[Any], calls: int = 200) -> None:
    database = db.current_database()
    text = _placeholders(sql, database.param)
    for (line,) in database.execute_sql("EXPLAIN (ANALYZE, BUFFERS) " + text, params).fetchall():
        print(line)
    started = time.perf_counter()
    for _ in range(calls):
        database.execute_sql(text, params).fetchall()
    print(f"mean over {calls} calls: {(time.perf_counter() - started) / calls * 1000:.3f} ms")


async def main(unread: int) -> None:
    cluster = pg.PostgresCluster().start()
    try:
        store = Store(cluster.create_database())
        store.open()
        for i in range(unread):
            await store.write(messages.send, "bench", "reader", {"title": f"t{i}", "body": "b" * 200}, KNOWN)
        caught: list[Any] = []
        await store.read(lambda: caught.append(inbox_statement(lambda fn, *args: fn(*args))))
        sql, params = caught[0]
        await store.read(explain, sql, params)
        store.close()
    finally:
        cluster.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unread", type=int, default=1000)
    asyncio.run(main(parser.parse_args().unread))
