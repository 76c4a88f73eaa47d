"""Buzz: the alert console. One line per alert (a webhook's events of one group key: its state, how often it fired,
when last, who acked it or until when it sleeps), live on `alert_changed`; the alerts not resolved, newest activity
first, unless `f` (state) or `s` (sort) say otherwise. Keys act on the highlighted alert: ack, unack, snooze, resolve,
silence what is like it, open it, its runbook, a task from it.

A server without alerts (v1: `GET /api/buzz/alerts` answers 404) gets the list of buzz events it always had."""
from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Awaitable, Callable, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable, Static

from ..client.api import ApiError, ConnectionFailed
from ..client.models import Alert, BuzzEvent, JSONObject, Project, age_text, counted
from ..screens.silence_form import silence_form
from ..screens.alert_detail import AlertDetailScreen, state_words
from ..screens.confirm import ConfirmScreen
from ..screens.page_links import PageLink, PageLinksScreen
from ..screens.snooze import SnoozeChoice, SnoozePicker, SnoozeSent
from ..session import Session
from .base import Pane
from .swarm import project_choices, task_form
from ..tables import PlainTable, cursor_key

# `f` cycles these; "active" (the default) is every state but resolved
STATES = ("active", "open", "acked", "snoozed", "resolved", "all")
STATE_TITLES = {"active": "not resolved", "open": "open", "acked": "acked", "snoozed": "snoozed",
                "resolved": "resolved", "all": "every state"}
STATE_STYLE = {"open": "bold red", "acked": "yellow", "snoozed": "cyan", "resolved": "green"}

def _time(value: datetime | None) -> float:
    return value.timestamp() if value is not None else 0.0


# `s` cycles these: how the alerts are ordered
SORTS: dict[str, Callable[[Alert], Any]] = {
    "newest first": lambda a: -_time(a.last_at),
    "most firings": lambda a: (-a.count, -_time(a.last_at)),
    "open longest": lambda a: (_time(a.first_at), -_time(a.last_at)),
}


@dataclass(frozen=True)
class BuzzView:
    """What one load fetched: the alerts (None from a v1 server) and the newest buzz events (all of them, the
    list itself, from a v1 server)."""
    alerts: list[Alert] | None
    events: list[BuzzEvent]


def who_text(alert: Alert, now: datetime) -> str:
    """The last column: who acked it and when, until when it sleeps, who resolved it."""
    words = state_words(alert, now, flags=False)  # the title says "(silenced)"
    if alert.flapping:
        words = "flapping" if alert.state == "open" else f"{words} · flapping"
    return words if alert.state != "open" or alert.flapping else ""


class BuzzPane(Pane[BuzzView]):
    EVENT_TYPES = frozenset({"broadcast", "alert_changed", "resync", "reconnected"})
    EMPTY_HINT = "Alerts from webhooks appear here, one line per alert. w: the webhooks."
    KEYS = [("a", "ack the alert (I'm on it; u undoes)"), ("U", "unack it (open again)"),
            ("z", "snooze: 15m, 1h, 4h, until tomorrow 09:00, or minutes"), ("R", "resolve it (asks first)"),
            ("S", "silence alerts like it (shows what it would have hidden)"), ("enter", "the alert and its events"),
            ("b", "its runbook (a notebook page, or a link to open or copy)"), ("T", "a task from it"),
            ("f", "state shown: not resolved, open, acked, snoozed, resolved, all"),
            ("s", "sort: newest, most firings, open longest"), ("/", "filter"), ("ctrl+r", "refresh"),
            ("w", "webhooks: list, create, edit, delete, ingest URLs")]
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "ack", "Ack", id="buzz.ack"), Binding("U", "unack", "Unack", show=False, id="buzz.unack"),
        Binding("z", "snooze", "Snooze", id="buzz.snooze"), Binding("R", "resolve", "Resolve", id="buzz.resolve"),
        Binding("S", "silence", "Silence", id="buzz.silence"), Binding("b", "runbook", "Runbook", id="buzz.runbook"),
        Binding("T", "task", "Task", show=False, id="buzz.task"), Binding("f", "cycle_state", "State", show=False, id="buzz.state"),
        Binding("s", "cycle_sort", "Sort", show=False, id="buzz.sort"),
        Binding("w", "ops('webhooks')", "Webhooks", show=False, id="buzz.webhooks")]

    @dataclass
    class Viewed(Message):
        """The pane showed the events up to `newest` (an id): the tab's count of unseen events is zero."""
        newest: int

    @dataclass
    class RunbookOpened(Message):
        """b on an alert whose runbook is a notebook page: the Notes pane opens it."""
        page_id: str

    def __init__(self, session: Session, *, title: str, id: str) -> None:
        super().__init__(session, title=title, id=id)
        self.state = STATES[0]
        self.sort = next(iter(SORTS))
        self.v1 = False  # the server answered 404 for alerts: the events list instead
        self.alerts: dict[str, Alert] = {}

    def compose(self) -> ComposeResult:
        yield Static("", id="buzz-summary", classes="pane-summary")
        yield PlainTable(id="buzz-table", cursor_type="row")

    async def load(self) -> BuzzView:
        client = self.client
        if not self.v1:
            query = None if self.state in ("active", "all") else self.state
            try:
                alerts = await client.alerts(state=query, limit=100)
            except ApiError as exc:
                if not exc.unsupported:
                    raise
                self.v1 = True
            else:
                return BuzzView(alerts, await client.buzz_events(limit=1))
        return BuzzView(None, await client.buzz_events(limit=100))

    # --- showing ----------------------------------------------------------------------------

    def _table(self, columns: tuple[str, ...], give_way: tuple[str, ...]) -> PlainTable:
        """The table emptied, its columns anew (their widths follow the new rows: fitted once they are measured)."""
        table = self.query_one("#buzz-table", PlainTable)
        table.clear(columns=True)
        table.add_columns(*columns)
        table.give_way = give_way
        self.call_after_refresh(table.fit_columns)
        return table

    def show(self, view: BuzzView) -> None:
        if view.alerts is None:
            self.show_events(view.events)
        else:
            self.show_alerts(view.alerts)
        if self.active and view.events:
            self.post_message(self.Viewed(max(event.id for event in view.events)))

    def shown_alerts(self, alerts: list[Alert]) -> list[Alert]:
        """The alerts in the state chosen and passing the `/` filter, in the order chosen."""
        wanted = [a for a in alerts if self.state == "all" or (a.state != "resolved" if self.state == "active"
                                                              else a.state == self.state)]
        return sorted((a for a in wanted if self.matches(a.title, a.app_name, a.state, a.acked_by or "")),
                      key=SORTS[self.sort])

    def show_alerts(self, alerts: list[Alert]) -> None:
        selected = cursor_key(self.query_one("#buzz-table", DataTable))
        table = self._table(("State", "Count", "Age", "App", "Title", "Who"), ("Title", "Who", "App"))
        now = self.session.now()
        shown = self.shown_alerts(alerts)
        self.alerts = {str(a.id): a for a in shown}
        for alert in shown:
            title = Text(alert.title, style="dim" if alert.state in ("snoozed", "resolved") else "")
            if alert.silenced_by:
                title.append("  (silenced)", style="dim")
            table.add_row(Text(alert.state, style=STATE_STYLE.get(alert.state, "")), str(alert.count),
                          age_text(alert.last_at, now), alert.app_name, title, who_text(alert, now),
                          key=str(alert.id))
        if selected in self.alerts:
            table.move_cursor(row=table.get_row_index(selected))
        summary = f"{counted(len(shown), 'alert')} · {STATE_TITLES[self.state]} · {self.sort}"
        if self.filter_text:
            summary = f"filter “{self.filter_text}” · {summary}"
        self.query_one("#buzz-summary", Static).update(Text(f"{summary}   (f state · s sort · ? keys)"))

    def show_events(self, events: list[BuzzEvent]) -> None:
        """A v1 server: its buzz events, newest first, as they always were."""
        table = self._table(("Age", "App", "Title", "Body"), ("Body", "Title", "App"))
        self.alerts = {}
        now = self.session.now()
        for event in events:
            if not self.matches(event.app_name, event.title, event.body):
                continue
            title = Text(event.title, style="dim strike" if event.suppressed else "bold")
            table.add_row(age_text(event.received_at, now), event.app_name, title,
                          (event.body or "").replace("\n", " ")[:120], key=str(event.id))
        self.query_one("#buzz-summary", Static).update(counted(len(events), "event"))

    def changed(self, alert: Alert) -> None:
        """An answer of the server about one alert (ours, just now): shown at once, before the event's reload."""
        data = self._last_data
        if data is not None and data.alerts is not None:
            alerts = [alert if a.id == alert.id else a for a in data.alerts]
            self._last_data = replace(data, alerts=alerts)
            self.show_alerts(alerts)

    def action_cycle_state(self) -> None:
        self.state = STATES[(STATES.index(self.state) + 1) % len(STATES)]
        self.request_reload()

    def action_cycle_sort(self) -> None:
        names = list(SORTS)
        self.sort = names[(names.index(self.sort) + 1) % len(names)]
        self.refilter()

    # --- acting on the highlighted alert ------------------------------------------------------

    def selected(self) -> Alert | None:
        key = cursor_key(self.query_one("#buzz-table", DataTable))
        return self.alerts.get(key) if key else None

    def _need(self) -> Alert | None:
        if self.v1:
            self.notify("This server has no alerts (only the events list)", severity="warning", timeout=3)
            return None
        alert = self.selected()
        if alert is None:
            self.notify("Select an alert first", severity="warning", timeout=3)
        return alert

    async def _change(self, call: Any, success: str) -> Alert | None:
        result = await self.act(call, success)
        if isinstance(result, Alert):
            self.changed(result)
            return result
        return None

    @work(group="buzz-action", exit_on_error=False)
    async def action_ack(self) -> None:
        alert = self._need()
        if alert is not None and await self._change(self.client.ack_alert(alert.id), f"Acked: {alert.title}"):
            client = self.client
            self.offer_undo(f"Acked {alert.title}", lambda: client.unack_alert(alert.id))

    @work(group="buzz-action", exit_on_error=False)
    async def action_unack(self) -> None:
        alert = self._need()
        if alert is not None:
            await self._change(self.client.unack_alert(alert.id), f"Open again: {alert.title}")

    @work(group="buzz-action", exit_on_error=False)
    async def action_snooze(self) -> None:
        alert = self._need()
        if alert is None:
            return
        client = self.client

        def send(choice: SnoozeChoice) -> Awaitable[Alert]:
            return client.snooze_alert(alert.id, minutes=choice.minutes, until=choice.until_text)
        picked = await self.app.push_screen_wait(SnoozePicker(alert.title, self.session.now(), send))
        if isinstance(picked, SnoozeSent):  # the minutes form sent it, and stayed open until the server took it
            self.changed(picked.alert)
            self.notify(f"Snoozed {picked.choice.label}: {alert.title}", timeout=3)
        elif picked is not None:
            await self._change(send(picked), f"Snoozed {picked.label}: {alert.title}")

    @work(group="buzz-action", exit_on_error=False)
    async def action_resolve(self) -> None:
        alert = self._need()
        if alert is None:
            return
        if await self.app.push_screen_wait(ConfirmScreen(f"Resolve “{alert.title}”? A new firing opens it again.",
                                                         "Resolve")):
            await self._change(self.client.resolve_alert(alert.id), f"Resolved: {alert.title}")

    async def _detail(self, alert: Alert) -> Alert | None:
        """The alert with its recent events (what enter shows; S takes its labels from the latest one)."""
        try:
            return await self.client.alert(alert.id)
        except (ApiError, ConnectionFailed) as exc:
            self.notify(exc.message if isinstance(exc, ApiError) else str(exc), title="Not opened",
                        severity="error", timeout=6)
            return None

    @work(group="buzz-action", exit_on_error=False)
    async def action_silence(self) -> None:
        alert = self._need()
        if alert is None:
            return
        client = self.client

        async def latest_labels() -> JSONObject:
            detail = await client.alert(alert.id)
            return detail.events[0].labels if detail.events else {}
        silence = await self.app.push_screen_wait(silence_form(client, alert, latest_labels))
        if silence:
            ends = f" until {silence.ends_at.astimezone().strftime('%a %H:%M')}" if silence.ends_at else ""
            self.notify(f"Silence #{silence.id} runs{ends}: matching alerts are counted, with no effects", timeout=5)
            self.request_reload()

    @work(group="buzz-action", exit_on_error=False)
    async def action_open(self) -> None:
        alert = self._need()
        if alert is None:
            return
        detail = await self._detail(alert)
        if detail is not None:
            self.app.push_screen(AlertDetailScreen(detail, self.session.now()))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if not self.v1:
            self.action_open()

    def action_runbook(self) -> None:
        alert = self._need()
        if alert is None:
            return
        runbook = alert.runbook or {}
        if runbook.get("pageId"):
            self.post_message(self.RunbookOpened(str(runbook["pageId"])))
        elif runbook.get("url"):
            self.app.push_screen(PageLinksScreen([PageLink(f"Runbook of {alert.app_name}", str(runbook["url"]))]))
        else:
            self.notify(f"{alert.app_name} has no runbook: set one on its webhook (w, e)", severity="warning",
                        timeout=4)

    @work(group="buzz-action", exit_on_error=False)
    async def action_task(self) -> None:
        alert = self._need()
        if alert is None:
            return
        client = self.client
        projects: list[Project] = []  # asked as the form opens (it opens at once: keys typed ahead reach it)

        async def current_projects() -> tuple[str, ...]:
            projects[:] = await client.projects()
            return project_choices(projects)

        def create(values: dict[str, Any]) -> Any:
            project = next((p.id for p in projects if p.title == values["project"]), None)
            return client.create_task(values["title"], detail=values["detail"] or None,
                                      assigneeUserId=values["assignee"] or None, projectId=project)
        detail = f"From alert #{alert.id} ({alert.app_name}, {counted(alert.count, 'firing')}): {alert.title}"
        if await self.app.push_screen_wait(task_form("New task from alert", None, projects, None,
                                                     self.session.identity, False, create, current_projects,
                                                     title_text=alert.title, detail_text=detail)):
            self.notify("Task created", timeout=3)
