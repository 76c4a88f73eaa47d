"""Reading a page in coordtui against the real server: ctrl+t renders it as Markdown (headings, lists, code,
a table, links) and follows the live text, o/y list its links to open or copy, ctrl+f finds in both views
(enter/down next, up previous, wrapping round) and escape closes the find box."""
from __future__ import annotations

from textual.widgets import Input, MarkdownViewer, OptionList
from textual.widgets.markdown import MarkdownBlock

from coordtui.client.notebook import NotebookSession
from coordtui.panes.notebook import find_all
from coordtui.screens import page_links as page_links_module
from coordtui.screens.page_links import PageLink, PageLinksScreen, page_links
from tests.conftest import TOKENS, client
from tests.tui.helpers import make_app, open_notebook_page, wait_for

RUNBOOK = """# Database failover

1. Page the DBA
2. Check [the dashboard](https://grafana.example/d/db) and <https://status.example>

## Commands

```
pg_ctl promote
```

| host | role |
|------|------|
| db-1 | primary |

## Afterwards

Write the postmortem; failover drills happen monthly.
"""


def test_find_all_is_case_insensitive_and_wraps_nothing():
    assert find_all("Failover, failover, FAILOVER", "failover") == [0, 10, 20]
    assert find_all("abc", "") == [] and find_all("abc", "x") == []


def test_page_links_are_listed_once_in_order():
    assert page_links(RUNBOOK) == [PageLink("the dashboard", "https://grafana.example/d/db"),
                                   PageLink("https://status.example", "https://status.example")]


async def test_rendered_view_links_and_find(server, monkeypatch):
    monkeypatch.setattr(page_links_module, "browser_available", lambda: True)
    with client(server, "alice") as api:
        page_id = api.post("/api/notebook", json={"title": "Failover", "content": RUNBOOK}).json()["page"]["id"]
    app = make_app(server, "alice")
    opened: list[str] = []
    app.open_url = lambda url, **_kw: opened.append(url)  # type: ignore[method-assign]
    async with app.run_test(size=(120, 35)) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected" and app.session.identity, what="connected")
        editor = await open_notebook_page(pilot, app, page_id)
        await wait_for(pilot, lambda: editor.text == RUNBOOK and not editor.read_only, what="the page open")
        editor.focus()

        # find in the editor: the match is selected, enter goes on, up goes back, wrapping round
        await pilot.press("ctrl+f", *"failover")
        find = app.query_one("#notebook-find", Input)
        assert find.has_focus
        starts = find_all(RUNBOOK, "failover")
        await wait_for(pilot, lambda: editor.selected_text.lower() == "failover", what="first match selected")
        first = editor.document.get_index_from_location(editor.selection.start)
        assert first == starts[0]
        await pilot.press("enter")
        await wait_for(pilot, lambda: editor.document.get_index_from_location(editor.selection.start) == starts[1],
                       what="second match")
        await pilot.press("up", "up")
        await wait_for(pilot, lambda: editor.document.get_index_from_location(editor.selection.start) == starts[-1],
                       what="wrapped to the last")
        assert f"of {len(starts)}" in str(app.query_one("#notebook-status").render())
        await pilot.press("escape")
        assert not find.display and editor.has_focus

        # the rendered view
        await pilot.press("ctrl+t")
        view = app.query_one("#notebook-view", MarkdownViewer)
        await wait_for(pilot, lambda: view.display and any("Database failover" in str(b.render())
                                                          for b in app.query(MarkdownBlock)), what="rendered")
        assert not editor.display
        kinds = {type(block).__name__ for block in app.query(MarkdownBlock)}
        assert {"MarkdownH1", "MarkdownH2", "MarkdownFence", "MarkdownTable"} <= kinds, kinds

        # it follows the live text
        bob = await NotebookSession(server.url, TOKENS["bob"], page_id).connect()
        try:
            bob.insert(len(bob.value), "\n## Added by bob\n")
            await wait_for(pilot, lambda: any("Added by bob" in str(b.render()) for b in app.query(MarkdownBlock)),
                           what="bob's heading rendered")
        finally:
            await bob.close()

        # find in the rendered view: the block holding the match is marked
        await pilot.press("ctrl+f", *"postmortem", "enter")
        await wait_for(pilot, lambda: any("postmortem" in str(b.render()) for b in app.query(".found")),
                       what="the paragraph found")
        await pilot.press("escape")

        # links: o lists them, enter opens, y copies
        view.focus()
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, PageLinksScreen), what="the links")
        assert app.screen.query_one("#page-links", OptionList).option_count == 2
        await pilot.press("enter")
        assert opened == ["https://grafana.example/d/db"]
        await pilot.press("down", "y")
        await wait_for(pilot, lambda: any("https://status.example copied" in str(n.message)
                                          for n in app._notifications), what="copied")
        await pilot.press("escape")
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: editor.display and not view.display, what="back to editing")
