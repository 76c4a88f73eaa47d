"""Task detail: fields and the history from GET /api/swarm/tasks/{id}/events."""
from __future__ import annotations

from rich.markup import escape
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..client.api import ApiError, ConnectionFailed
from ..client.models import age_text
from ..keybar import KeyBar


class TaskDetailScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q", "close", "Close"), Binding("m", "move", "Move"), Binding("c", "claim", "Claim")]

    def __init__(self, task_id: str):
        super().__init__()
        self.task_id = task_id
        self.current_task = None
        self.history = []

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="task-detail"):
            yield Static("Loading…", id="task-detail-text")
        yield KeyBar()

    def on_mount(self) -> None:
        self.load()

    @work(exclusive=True, group="task-detail", exit_on_error=False)
    async def load(self) -> None:
        client = self.app.client
        target = self.query_one("#task-detail-text", Static)
        try:
            tasks = await client.tasks(include_completed=True)
            self.current_task = next((t for t in tasks if t.id == self.task_id), None)
            try:
                self.history = await client.task_events(self.task_id)
            except ApiError as exc:
                self.history = [] if exc.unsupported else self.history
        except (ApiError, ConnectionFailed) as exc:
            target.update(f"[red]{escape(str(exc))}[/red]")
            return
        self.render_task()

    def render_task(self) -> None:
        task = self.current_task
        target = self.query_one("#task-detail-text", Static)
        if task is None:
            target.update("Task not found.")
            return
        now = self.app.now()
        lines = [f"[b]{escape(task.title)}[/b]", "",
                 f"Status:    [b]{task.status}[/b]", f"Assignee:  {escape(task.assignee or '-')}",
                 f"Creator:   {escape(task.creator or '-')}",
                 f"Created:   {age_text(task.created_at, now)} ago", ""]
        if task.detail:
            lines += [escape(task.detail), ""]
        lines.append("[b]History[/b] (newest first)")
        for event in self.history:
            lines.append(f"  {age_text(event.created_at, now):>7} ago  {escape(event.actor or '-'):10} "
                         f"{escape(event.describe())}")
        if not self.history:
            lines.append("  (none)")
        target.update("\n".join(lines))

    def action_close(self) -> None:
        self.dismiss(None)

    def action_move(self) -> None:
        if self.current_task is not None:
            self.app.move_task_dialog(self.current_task.id, self.current_task.title, on_done=lambda *_: self.load(),
                                      status=self.current_task.status)

    def action_claim(self) -> None:
        if self.current_task is not None:
            self.app.move_task(self.current_task.id, "in_progress", on_done=lambda *_: self.load())
