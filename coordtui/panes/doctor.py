"""Doctor: the admin doctor (or the caller's own doctor for non-admins), refreshed live, details expandable;
for admins a live metrics strip from GET /api/metrics (see metrics_strip.py)."""
from __future__ import annotations

import json

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static, Tree

from ..client.models import DoctorReport
from ..session import Session
from .base import Pane
from .metrics_strip import MetricsStrip
from ..tables import ListTree

STATUS_STYLE = {"pass": "bold green", "warn": "bold yellow", "fail": "bold red"}
REFRESH_SECONDS = 5.0


def detail_lines(details: object) -> list[str]:
    """A probe's details (JSON: any shape) as lines of text."""
    if details is None:
        return []
    if isinstance(details, dict):
        return [f"{key}: {value if not isinstance(value, (dict, list)) else json.dumps(value)}"
                for key, value in details.items()]
    if isinstance(details, list):
        return [json.dumps(item) if isinstance(item, (dict, list)) else str(item) for item in details]
    return [str(details)]


class DoctorPane(Pane[DoctorReport]):
    EMPTY_HINT = "The server's health probes appear here once it answers. ctrl+r asks again."
    KEYS = [("enter / space", "expand a probe's details"), ("ctrl+r", "refresh now (also every 5 s)"),
            ("t", "tokens (admin)"), ("i", "invites (admin)"), ("U", "users (admin)"),
            ("", "admins: requests/s, p99 latency, open streams, push outbox, event-loop lag (last minute)")]
    BINDINGS = [Binding("t", "ops('tokens')", "Tokens"), Binding("i", "ops('invites')", "Invites"),
                Binding("U", "ops('users')", "Users", id="doctor.users")]

    refresh_seconds = REFRESH_SECONDS

    def __init__(self, session: Session, *, title: str, id: str) -> None:
        super().__init__(session, title=title, id=id)
        self.report: DoctorReport | None = None
        self.admin_view = False

    def compose(self) -> ComposeResult:
        yield Static("", id="doctor-summary", classes="pane-summary")
        yield MetricsStrip(self.session, id="doctor-metrics")
        tree: Tree[str] = ListTree("probes", id="doctor-tree")
        tree.show_root = False
        yield tree

    def on_mount(self) -> None:
        self.set_interval(self.refresh_seconds, self._tick)

    def activated(self) -> None:
        super().activated()
        self.query_one(MetricsStrip).tick()  # in view again: a scrape now, not in up to 2 s

    def _tick(self) -> None:
        if self.active and not self.busy and not self.unsupported:
            self.request_reload()

    async def load(self) -> DoctorReport:
        self.admin_view = self.session.is_admin
        return await self.client.doctor(admin=self.admin_view)

    def show(self, report: DoctorReport) -> None:
        self.report = report
        tree = self.query_one("#doctor-tree", Tree)
        expanded = {node.data for node in tree.root.children if node.is_expanded}
        tree.clear()
        for probe in report.probes:
            label = Text.assemble((f"{probe.status.upper():4}", STATUS_STYLE.get(probe.status, "")), "  ",
                                  (probe.name, "bold"), "  ", probe.summary)
            lines = detail_lines(probe.details)
            if probe.duration_ms is not None:
                lines.append(f"took {probe.duration_ms} ms")
            node = tree.root.add(label, data=probe.id, expand=probe.id in expanded, allow_expand=bool(lines))
            for line in lines:
                node.add_leaf(Text(line))  # the server's words: never markup
        scope = "admin doctor" if self.admin_view else "doctor"
        overall = Text.assemble((report.status.upper(), STATUS_STYLE.get(report.status, "")),
                                f"  {scope} · {len(report.probes)} probes"
                                + (f" · v{report.version}" if report.version else ""))
        self.query_one("#doctor-summary", Static).update(overall)
