"""Task detail: fields, the task's workflows (§18: attach, detach) and the history from
GET /api/swarm/tasks/{id}/events."""
from __future__ import annotations

from datetime import datetime
from typing import Awaitable, Callable, Literal

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..client.api import ApiError, ConnectionFailed
from ..client.models import Task, TaskEvent, age_text
from ..client.v11 import Workflow
from ..keybar import KeyBar
from ..session import Session
from .form import Field, FormScreen
from .page_links import linked, text_links, use_links
from .task_move import move_task, move_task_dialog

STATE_STYLE = {"enabled": "green", "disabled": "dim", "expired": "red", "review due": "yellow"}


class TaskDetailScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q", "close", "Close"), Binding("m", "move", "Move"), Binding("c", "claim", "Claim"),
                Binding("a", "attach", "Attach workflow"), Binding("d", "detach", "Detach workflow"),
                Binding("o", "links('open')", "Open link"), Binding("y", "links('copy')", "Copy link", show=False)]

    def __init__(self, session: Session, task_id: str) -> None:
        super().__init__()
        self.session = session
        self.task_id = task_id
        self.current_task: Task | None = None
        self.history: list[TaskEvent] = []
        self.workflows: list[Workflow] | None = None  # None: the server has no workflows (404)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="task-detail"):
            yield Static("Loading…", id="task-detail-text")
        yield KeyBar()

    def on_mount(self) -> None:
        self.load()

    def action_links(self, how: Literal["open", "copy"]) -> None:
        """o / y: the task's link (its title, detail and workflows' addresses; a chooser when several)."""
        task = self.current_task
        if task is None:
            return
        text = "\n".join([task.title, task.detail or "", *(w.document_url or "" for w in self.workflows or [])])
        use_links(self.app, text_links(text), how, "this task")

    @work(exclusive=True, group="task-detail", exit_on_error=False)
    async def load(self) -> None:
        client = self.session.connected_client()
        target = self.query_one("#task-detail-text", Static)
        try:
            tasks = await client.tasks(include_completed=True)
            self.current_task = next((t for t in tasks if t.id == self.task_id), None)
            try:
                self.history = await client.task_events(self.task_id)
            except ApiError as exc:
                self.history = [] if exc.unsupported else self.history
            try:
                self.workflows = await client.task_workflows(self.task_id)
            except ApiError as exc:
                if not exc.unsupported:
                    raise
                self.workflows = None
        except (ApiError, ConnectionFailed) as exc:
            target.update(Text(str(exc), style="red"))
            return
        self.render_task()

    def render_task(self) -> None:
        task = self.current_task
        target = self.query_one("#task-detail-text", Static)
        if task is None:
            target.update("Task not found.")
            return
        now = self.session.now()
        # Text, never markup: titles, names, details and history are other identities' text
        lines = [linked(task.title, "bold"), Text(""),
                 Text.assemble("Status:    ", (task.status, "bold")), Text(f"Assignee:  {task.assignee or '-'}"),
                 Text(f"Creator:   {task.creator or '-'}"),
                 Text(f"Created:   {age_text(task.created_at, now)} ago"), Text("")]
        if task.detail:
            lines += [linked(task.detail), Text("")]
        lines += self.workflow_lines(now)
        lines.append(Text.assemble(("History", "bold"), " (newest first)"))
        for event in self.history:
            lines.append(Text(f"  {age_text(event.created_at, now):>7} ago  {event.actor or '-':10} ")
                         + linked(event.describe()))
        if not self.history:
            lines.append(Text("  (none)"))
        target.update(Text("\n").join(lines))

    def workflow_lines(self, now: datetime) -> list[Text]:
        if self.workflows is None:
            return []
        lines = [Text.assemble(("Workflows", "bold"), " ", ("(a attach · d detach)", "dim"))]
        for flow in self.workflows:
            states = Text(" · ").join(Text(state, STATE_STYLE[state]) for state in flow.states(now))
            lines.append(Text.assemble("  ", linked(flow.title), "  ", states))
        if not self.workflows:
            lines.append(Text("  (none)"))
        return lines + [Text("")]

    def action_close(self) -> None:
        self.dismiss(None)

    @work(group="task-move", exit_on_error=False)
    async def action_move(self) -> None:
        task = self.current_task
        if task is not None and await move_task_dialog(self, self.session.connected_client(), task.id, task.title,
                                                       task.status):
            self.load()

    @work(group="task-move", exit_on_error=False)
    async def action_claim(self) -> None:
        task = self.current_task
        if task is not None and await move_task(self, self.session.connected_client(), task.id, "in_progress"):
            self.load()

    @work(group="task-workflows", exit_on_error=False)
    async def action_attach(self) -> None:
        if self.workflows is None:
            return
        try:
            visible = await self.session.connected_client().workflows()
        except (ApiError, ConnectionFailed) as exc:
            self.notify(str(exc), title="Workflows", severity="error", timeout=5)
            return
        attached = {w.id for w in self.workflows}
        choices = labelled([w for w in visible if w.id not in attached], self.session.now())
        if not choices:
            self.notify("No other workflow to attach", severity="warning", timeout=3)
            return
        await self.pick("Attach a workflow", choices, "Attach",
                        lambda flow_id: self.session.connected_client().attach_workflow(self.task_id, flow_id))

    @work(group="task-workflows", exit_on_error=False)
    async def action_detach(self) -> None:
        if not self.workflows:
            self.notify("No workflow attached", severity="warning", timeout=3)
            return
        await self.pick("Detach a workflow", labelled(self.workflows, self.session.now()), "Detach",
                        lambda flow_id: self.session.connected_client().detach_workflow(self.task_id, flow_id))

    async def pick(self, title: str, choices: dict[str, str], label: str,
                   call: Callable[[str], Awaitable[None]]) -> None:
        names = tuple(choices)
        form = FormScreen(f"{title}: {self.current_task.title if self.current_task else ''}",
                          [Field("workflow", "Workflow", names[0], kind="select", options=names)], label,
                          submit=lambda values: call(choices[values["workflow"]]), focus="workflow")
        if await self.app.push_screen_wait(form):
            self.load()


def labelled(flows: list[Workflow], now: datetime) -> dict[str, str]:
    """Select labels (title and state, numbered when titles repeat) to workflow ids."""
    choices: dict[str, str] = {}
    for flow in flows:
        name = f"{flow.title} ({', '.join(flow.states(now))})"
        while name in choices:
            name += " ·"
        choices[name] = flow.id
    return choices
