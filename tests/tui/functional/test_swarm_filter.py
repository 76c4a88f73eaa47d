"""Issue 24: Swarm's `/` filter keeps up with typing on a big board. Each key filters the cards already built
(a column changes only where the match did: narrowing adds no row, rows kept are the same rows), the box shows
every key at once, keys typed faster than the board filters are applied together, and the final filter is
exact, also when the text gets shorter again."""
from __future__ import annotations

from coordtui.panes.swarm import SwarmPane
from coordtui.tables import PlainTable
from tests.conftest import client
from tests.tui.helpers import make_app, row_keys, wait_for, wait_idle

TASKS = 120


def expected(titles: dict[str, str], text: str) -> list[str]:
    words = text.casefold().split()
    return [task_id for task_id, title in titles.items() if all(w in f"{title} alice".casefold() for w in words)]


async def test_typing_a_filter_narrows_the_built_rows_in_place(server, monkeypatch):
    titles: dict[str, str] = {}
    with client(server, "alice") as alice:
        for n in range(TASKS):
            task = alice.post("/api/swarm/tasks", json={"title": f"Filter bench {n}", "assigneeUserId": "alice"}).json()
            titles[task["id"]] = task["title"]
    app = make_app(server, "alice")
    async with app.run_test(size=(120, 35)) as pilot:
        await pilot.press("4")
        swarm = app.pane_of(SwarmPane)
        await wait_for(pilot, lambda: len(row_keys(app, "#col-ready")) >= TASKS, what="the board")
        await wait_idle(pilot, app)
        column = app.query_one("#col-ready", PlainTable)
        order = row_keys(app, "#col-ready")
        added: list[str] = []
        original = PlainTable.add_row

        def counting_add_row(table, *cells, **kwargs):
            if table is column:
                added.append(kwargs.get("key"))
            return original(table, *cells, **kwargs)
        monkeypatch.setattr(PlainTable, "add_row", counting_add_row)
        kept_row = column.rows[next(k for k in column.rows if titles[k.value] == "Filter bench 11")]

        await pilot.press("slash", *"bench 1")  # in one go: the keys may outrun the board
        box = app.query_one("#swarm-filter")
        assert box.value == "bench 1"
        await wait_for(pilot, lambda: swarm.filtered_as == "bench 1", what="the filter applied")
        want = [k for k in order if k in expected(titles, "bench 1")]
        assert row_keys(app, "#col-ready") == want
        assert added == [], "narrowing the filter rebuilt rows"
        assert column.rows[kept_row.key] is kept_row

        await pilot.press("1")
        await wait_for(pilot, lambda: swarm.filtered_as == "bench 11", what="narrowed")
        assert row_keys(app, "#col-ready") == [k for k in order if k in expected(titles, "bench 11")]  # 11, 110-119
        assert added == []

        await pilot.press("backspace", "backspace", "backspace")  # "bench": every task again, in board order
        await wait_for(pilot, lambda: swarm.filtered_as == "bench", what="widened")
        assert row_keys(app, "#col-ready") == order
        assert column.rows[kept_row.key] is kept_row  # what stayed shown was never rebuilt
        assert len(added) == TASKS - len(expected(titles, "bench 11"))  # only the rows that came back

        await pilot.press("escape")
        await wait_for(pilot, lambda: swarm.filtered_as == "", what="cleared")
        assert row_keys(app, "#col-ready") == order
        summary = str(app.query_one("#swarm-summary").render())
        assert "filter" not in summary
