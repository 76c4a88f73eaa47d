"""The PostgreSQL inbox page's plan and cost: a throwaway cluster (tests/pg.py), one reader holding 1,000 unread
messages (as bench/scale.py's inbox case), then `EXPLAIN (ANALYZE, BUFFERS)` of the statement the inbox runs and
its mean time over 200 calls (unprepared: planning included). `--plan-modes`: the statement prepared as the
server prepares it, timed under each `plan_cache_mode`, with how many generic and custom plans it ran.

    python bench/pg_inbox_plan.py [--unread 1000] [--plan-modes]
    python bench/pg_inbox_plan.py --url postgresql://... [--plan-modes]   (a database as a bench run left it)
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
from coordserver.sql import _numbered, _placeholders  # noqa: E402
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


def plan_modes(sql: str, params: list[Any], calls: int = 400) -> None:
    database = db.current_database()
    execute = "EXECUTE page (" + ", ".join(["%s"] * len(params)) + ")"
    for mode in ("auto", "force_generic_plan", "force_custom_plan"):
        database.execute_sql(f"SET plan_cache_mode = {mode}")
        database.execute_sql("DEALLOCATE ALL")
        database.execute_sql("PREPARE page AS " + _numbered(sql))
        for _ in range(10):  # past the five custom plans `auto` tries first
            database.execute_sql(execute, params).fetchall()
        started = time.perf_counter()
        for _ in range(calls):
            database.execute_sql(execute, params).fetchall()
        mean = (time.perf_counter() - started) / calls * 1e6
        (generic, custom), = database.execute_sql(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'page'").fetchall()
        print(f"{mode:20} {mean:6.0f} us a call  (generic plans {generic}, custom plans {custom})")


async def on_database(url: str, modes: bool) -> None:
    """The same for a database that exists (e.g. a bench server's, as a scale run left it): nothing seeded, and
    no ANALYZE, so the plan is the one its statistics give now."""
    store = Store(url)
    store.open()
    caught: list[Any] = []
    await store.read(lambda: caught.append(inbox_statement(lambda fn, *args: fn(*args))))
    sql, params = caught[0]
    await store.read(plan_modes if modes else explain, sql, params)
    store.close()


async def main(unread: int, modes: bool) -> None:
    cluster = pg.PostgresCluster().start()
    try:
        store = Store(cluster.create_database())
        store.open()
        for i in range(unread):
            await store.write(messages.send, "bench", "reader", {"title": f"t{i}", "body": "b" * 200}, KNOWN)
        caught: list[Any] = []
        await store.read(lambda: caught.append(inbox_statement(lambda fn, *args: fn(*args))))
        sql, params = caught[0]
        await store.read(lambda: db.current_database().execute_sql("ANALYZE"))
        await store.read(plan_modes if modes else explain, sql, params)
        store.close()
    finally:
        cluster.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unread", type=int, default=1000)
    parser.add_argument("--plan-modes", action="store_true", help="time the prepared statement under each plan_cache_mode")
    parser.add_argument("--url", help="an existing database (its reader's inbox) instead of a throwaway cluster")
    arguments = parser.parse_args()
    if arguments.url:
        asyncio.run(on_database(arguments.url, arguments.plan_modes))
    else:
        asyncio.run(main(arguments.unread, arguments.plan_modes))
