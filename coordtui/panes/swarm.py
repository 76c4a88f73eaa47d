"""Swarm board: one column per status, a project filter, moves by key, task detail with history."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import DataTable, Static

from ..client.models import Project, Task, counted
from ..client import limits, transitions
from ..screens.form import Field, FormScreen, Submit
from ..screens.task_move import move_task, move_task_dialog
from ..session import Session
from .base import Pane
from ..tables import PlainTable, cursor_key

BOARD = ("queued", "ready", "in_progress", "review", "holding", "complete", "closed")
BOARD_TITLES = transitions.STATUS_WORDS
DONE = ("complete", "closed")  # hidden until `d` shows them


def project_choices(projects: list[Project]) -> tuple[str, ...]:
    return ("",) + tuple(p.title for p in projects)


def task_form(title: str, task: Task | None, projects: list[Project], project_id: str | None,
              me: str | None, with_status: bool, submit: Submit,
              load_projects: Callable[[], Awaitable[tuple[str, ...]]] | None = None, *, title_text: str = "",
              detail_text: str = "") -> FormScreen:
    """The new-task and edit-task form; a new task may open with a title and detail (a task from an alert)."""
    current = next((p.title for p in projects if p.id == (task.project_id if task else project_id)), "")
    fields = [Field("title", "Title", task.title if task else title_text[:limits.TASK_TITLE], required=True,
                    max_len=limits.TASK_TITLE),
              Field("detail", "Detail", (task.detail or "") if task else detail_text, kind="text",
                    max_len=limits.TASK_DETAIL),
              Field("assignee", "Assignee", (task.assignee or "") if task else (me or ""), names=True),
              Field("project", "Project", current, kind="select", options=project_choices(projects),
                    load=load_projects)]
    if with_status:
        fields.append(Field("status", "Status", "ready", kind="select", options=BOARD, option_words=transitions.STATUS_WORDS))
    return FormScreen(title, fields, "Save" if task else "Create", submit=submit, focus="title")


def card(task: Task, colour: str | None) -> Text:
    """A task on the board: its title in its project's colour, and who has it."""
    who = f" @{task.assignee}" if task.assignee else ""
    return Text(task.title, style=colour or "") + Text(who, style="dim")


def haystack(task: Task) -> str:
    """What `/` looks in (pane.matches' rule: every word somewhere in the row, any case), folded once."""
    return " ".join(text for text in (task.title, task.assignee, task.detail) if text).casefold()


class SwarmPane(Pane[tuple[list[Project], list[Task]]]):
    EMPTY_HINT = "Tasks appear here, a column per status. n creates a task."
    EVENT_TYPES = frozenset({"swarm_task_created", "swarm_task_updated", "resync", "reconnected"})
    KEYS = [("tab / h l", "previous / next column"), ("j k", "down / up"), ("enter", "task detail and history"),
            ("] / [", "one step along the path (ready → in progress → review → complete) / back"),
            ("m", "move: only the statuses allowed from here"),
            ("c", "claim (start) the task"), ("n", "new task"), ("e", "edit the task"),
            ("f", "filter by project (cycles)"), ("/", "filter tasks by text"), ("P", "projects"),
            ("R", "recurring templates"), ("r", "reservations: who holds which files, time left"),
            ("x", "close the task (won't do) with a reason"),
            ("d", "show / hide the Complete and Closed columns")]
    # show=True: the main keys, which the bottom row keeps in view at 80 columns (tests/tui/functional/
    # test_footers.py); the others are in help (?) with the rest
    BINDINGS = [Binding("left_square_bracket", "shift(-1)", "Move ←", show=False, id="swarm.back"),
                Binding("right_square_bracket", "shift(1)", "Move →", show=False, id="swarm.forward"),
                Binding("m", "move", "Move", id="swarm.move"), Binding("c", "claim", "Claim", show=False, id="swarm.claim"),
                Binding("n", "new", "New", id="swarm.new"),
                Binding("e", "edit", "Edit", id="swarm.edit"), Binding("f", "project", "Project", id="swarm.project"),
                Binding("h", "column(-1)", "", show=False), Binding("l", "column(1)", "", show=False),
                Binding("x", "close", "Close", show=False, id="swarm.close"),
                Binding("d", "done", "Done", show=False, id="swarm.done"),
                Binding("P", "ops('projects')", "Projects", show=False, id="swarm.projects"),
                Binding("R", "ops('templates')", "Recurring", id="swarm.templates"),
                Binding("r", "reservations", "Reservations", show=False, id="swarm.reservations")]

    @dataclass
    class TaskOpened(Message):
        """enter on a task: its detail and history."""
        task_id: str

    class ReservationsAsked(Message):
        """r: the reservations in force (advisory locks), where one's own can be released."""

    def __init__(self, session: Session, *, title: str, id: str) -> None:
        super().__init__(session, title=title, id=id)
        self.tasks: dict[str, Task] = {}
        self.cards: dict[str, Text] = {}  # by task id, built once per load
        self.haystacks: dict[str, str] = {}
        self.projects: list[Project] = []
        self.project_id: str | None = None
        self.filter_label = "all projects"
        self.show_done = False
        self.select_next_load: str | None = None  # a task just created: the cursor goes to it once it is shown

    def compose(self) -> ComposeResult:
        yield Static("", id="swarm-summary", classes="pane-summary")
        with Horizontal(id="board"):
            for status in BOARD:
                table = PlainTable(id=f"col-{status}", cursor_type="row", classes="board-column",
                                  show_header=True)
                table.add_column(BOARD_TITLES[status], key="title")
                table.display = status not in DONE
                yield table

    async def load(self) -> tuple[list[Project], list[Task]]:
        projects = await self.client.projects()
        tasks = await self.client.tasks(project_id=self.project_id, include_completed=True)
        return projects, tasks

    def show(self, data: tuple[list[Project], list[Task]]) -> None:
        """Fresh tasks: every column built again (its width from what it holds now)."""
        self.projects, tasks = data
        selected = self.selected()
        self.tasks = {t.id: t for t in tasks}
        if self.select_next_load is not None:
            selected = self.tasks.get(self.select_next_load, selected)
            self.select_next_load = None
        colours: dict[str | None, str | None] = {p.id: p.color for p in self.projects}  # by a task's project_id
        self.cards = {task.id: card(task, colours.get(task.project_id)) for task in tasks}
        self.haystacks = {task.id: haystack(task) for task in tasks}
        for status in BOARD:
            self.query_one(f"#col-{status}", PlainTable).clear()
        self.show_board(tasks, selected)

    def apply_filter(self, data: tuple[list[Project], list[Task]]) -> None:
        """A key in the `/` box: the cards already built are kept and the columns change only where the match
        did (2,000 tasks rebuilt took over 100 ms a key)."""
        self.show_board(data[1], self.selected())

    def show_board(self, tasks: list[Task], selected: Task | None) -> None:
        words = self.filter_text.casefold().split()
        by_status: dict[str, list[Task]] = {status: [] for status in BOARD}
        for task in tasks:
            if all(word in self.haystacks[task.id] for word in words):
                by_status.setdefault(task.status, []).append(task)
        for status in BOARD:
            table = self.query_one(f"#col-{status}", PlainTable)
            table.set_label("title", Text(f"{BOARD_TITLES[status]} {len(by_status[status])}"))
            table.show_rows([(task.id, [self.cards[task.id]]) for task in by_status[status]])
        self.filter_label = next((p.title for p in self.projects if p.id == self.project_id), "all projects")
        shown = sum(len(rows) for rows in by_status.values())
        done = sum(len(by_status[s]) for s in DONE)
        text = (f"{counted(len(tasks), 'task')} · {self.filter_label} (f cycles) · "
                f"{'d hides' if self.show_done else 'd shows'} {done} done")
        if self.filter_text:
            text = f"filter “{self.filter_text}”: {shown} of {text}"
        self.query_one("#swarm-summary", Static).update(Text(text))  # a project's title: never markup
        if selected is not None and self.select_task(selected.id):
            self.describe(self.tasks[selected.id])
        elif self.active and self._on_an_empty_column():
            self.focus_default()

    def focus_default(self) -> None:
        """The cursor starts on the first column with cards (an empty Queued column had it, and m said "Select a
        task first" beside a board of tasks)."""
        tables = [self.query_one(f"#col-{status}", DataTable) for status in self.columns()]
        next((table for table in tables if table.row_count), tables[0]).focus()

    def _on_an_empty_column(self) -> bool:
        focused = self.app.focused
        return focused is None or (isinstance(focused, DataTable) and (focused.id or "").startswith("col-")
                                   and not focused.row_count)

    def select_task(self, task_id: str) -> bool:
        """The cursor on a task, if the board shows it (a task closed meanwhile sits in a hidden column)."""
        task = self.tasks.get(task_id)
        if task is None:
            return False
        table = self.query_one(f"#col-{task.status}", DataTable)
        if not table.display or task_id not in table.rows:
            return False
        table.move_cursor(row=table.get_row_index(task_id))
        if self.active:
            table.focus()
        return True

    def selected(self) -> Task | None:
        focused = self.app.focused
        if not isinstance(focused, DataTable) or not (focused.id or "").startswith("col-"):
            return None
        key = cursor_key(focused)
        return self.tasks.get(key) if key is not None else None

    def _need(self) -> Task | None:
        task = self.selected()
        if task is None:
            self.notify("Select a task first", severity="warning", timeout=3)
        return task

    def action_column(self, step: int) -> None:
        focused = self.app.focused
        shown = self.columns()
        index = shown.index((focused.id or "")[4:]) \
            if isinstance(focused, DataTable) and (focused.id or "")[4:] in shown else -1
        self.query_one(f"#col-{shown[(index + step) % len(shown)]}", DataTable).focus()

    def columns(self) -> tuple[str, ...]:
        return tuple(s for s in BOARD if self.show_done or s not in DONE)

    def action_done(self) -> None:
        """Complete and Closed columns in or out of view (tasks closed or completed by a key stay visible)."""
        self.show_done = not self.show_done
        for status in DONE:
            self.query_one(f"#col-{status}", DataTable).display = self.show_done
        if not self.show_done and (self.app.focused is None or not self.app.focused.display):
            self.query_one("#col-ready", DataTable).focus()
        self.refilter()

    @work(group="swarm-action", exit_on_error=False)
    async def action_close(self) -> None:
        task = self._need()
        if task is None:
            return
        if "closed" not in transitions.allowed_moves(task.status):
            self.notify(f"A {task.status} task cannot be closed (reopen moves closed → ready)", severity="warning",
                        timeout=4)
            return
        form = FormScreen(f"Close (won't do): {task.title}", [
            Field("reason", "Reason (kept in the task's history)", kind="text", max_len=limits.TASK_REASON,
                  wire="reason")], "Close", submit=lambda v: self.client.move_task(task.id, "closed",
                                                                                    v["reason"].strip() or None))
        closed = await self.app.push_screen_wait(form)
        if closed:
            self.notify(f"{task.title} closed", timeout=3)
            self.request_reload()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value if event.row_key is not None else None
        task = self.tasks.get(key) if key is not None else None
        if task is not None and event.data_table.has_focus:
            self.describe(task)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        task = self.selected()
        if task is not None:
            self.describe(task)

    def describe(self, task: Task) -> None:
        """The board truncates titles at 80 columns: the summary line shows the selected task in full."""
        who = f" · @{task.assignee}" if task.assignee else " · unassigned"
        self.query_one("#swarm-summary", Static).update(Text(f"[{self.filter_label}] "
                                                             f"{BOARD_TITLES.get(task.status, task.status)}: "
                                                             f"{task.title}{who}"))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        task = self.tasks.get(event.row_key.value) if event.row_key.value is not None else None
        if task is not None:
            self.post_message(self.TaskOpened(task.id))

    def action_project(self) -> None:
        ids = [None] + [p.id for p in self.projects]
        self.project_id = ids[(ids.index(self.project_id) + 1) % len(ids)] if self.project_id in ids else None
        self.request_reload()

    @work(group="task-move", exit_on_error=False)
    async def action_shift(self, step: int) -> None:
        task = self._need()
        if task is None:
            return
        target = transitions.step(task.status, step)
        if target is None:
            allowed = ", ".join(transitions.allowed_moves(task.status))
            self.notify(f"No step {'forward' if step > 0 else 'back'} from {task.status} (m offers: {allowed})",
                        severity="warning", timeout=4)
            return
        if await move_task(self, self.client, task.id, target):
            self.request_reload()

    @work(group="task-move", exit_on_error=False)
    async def action_move(self) -> None:
        task = self._need()
        if task is not None and await move_task_dialog(self, self.client, task.id, task.title, task.status):
            self.request_reload()

    @work(group="task-move", exit_on_error=False)
    async def action_claim(self) -> None:
        task = self._need()
        if task is not None and await move_task(self, self.client, task.id, "in_progress"):
            self.request_reload()

    def action_reservations(self) -> None:
        """Reservations in force (advisory locks on files and services), with release of your own."""
        self.post_message(self.ReservationsAsked())

    def project_id_for(self, title: str) -> str | None:
        return next((p.id for p in self.projects if p.title == title), None)

    async def current_projects(self) -> tuple[str, ...]:
        """For a task form as it opens: the projects as the server has them now (they also name the choice)."""
        self.projects = await self.client.projects()
        return project_choices(self.projects)

    @work(group="swarm-action", exit_on_error=False)
    async def action_new(self) -> None:
        def create(values: dict[str, Any]) -> Awaitable[Task]:
            return self.client.create_task(
                values["title"], detail=values["detail"] or None, assigneeUserId=values["assignee"] or None,
                projectId=self.project_id_for(values["project"]), status=values["status"])
        created = await self.app.push_screen_wait(task_form("New task", None, self.projects, self.project_id,
                                                            self.session.identity, True, create,
                                                            self.current_projects))
        if created:
            self.notify("Task created", timeout=3)
            self.select_next_load = created.id if isinstance(created, Task) else None
            self.request_reload()

    @work(group="swarm-action", exit_on_error=False)
    async def action_edit(self) -> None:
        task = self._need()
        if task is None:
            return
        def save(values: dict[str, Any]) -> Awaitable[Task]:
            return self.client.update_task(
                task.id, title=values["title"], detail=values["detail"] or None,
                assigneeUserId=values["assignee"] or None, projectId=self.project_id_for(values["project"]))
        if await self.app.push_screen_wait(task_form("Edit task", task, self.projects, self.project_id,
                                                     self.session.identity, False, save, self.current_projects)):
            self.notify("Task saved", timeout=3)
            self.request_reload()
