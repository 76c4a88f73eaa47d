"""Moving a Swarm task, from any pane or screen that shows one (Wake, Swarm, the task detail): straight to a
status, or through a dialog offering only the moves the state table allows. Each is awaited in the caller's
own worker (`push_screen_wait` needs one) and returns the moved task, or None when nothing moved (refused,
unreachable or cancelled: the toast or dialog has said why), so the caller reloads what it shows."""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widget import Widget
from textual.widgets import Select

from ..client import limits
from ..client.api import ApiError, ConnectionFailed, CoordClient
from ..client.models import Task
from ..client.transitions import STATUS_WORDS, allowed_moves
from .form import Field, FormScreen


async def move_task(widget: Widget, client: CoordClient, task_id: str, status: str, reason: str | None = None,
                    assignee: str | None = None) -> Task | None:
    """Moves the task; a move to holding without a reason asks for one first."""
    if status == "holding" and not reason:
        task = await widget.app.push_screen_wait(FormScreen("Why is it holding?", [
            Field("reason", "Reason", required=True, max_len=limits.TASK_REASON)], "Move",
            submit=lambda v: client.move_task(task_id, status, v["reason"], assignee)))
    else:
        try:
            task = await client.move_task(task_id, status, reason, assignee)
        except ApiError as exc:
            allowed = f" Allowed from here: {', '.join(exc.allowed)}." if exc.allowed else ""
            widget.notify(f"{exc.message}.{allowed}", title="Move refused", severity="error", timeout=8)
            return None
        except ConnectionFailed as exc:
            widget.notify(str(exc), title="Not connected", severity="error")
            return None
    return moved(widget, task)


async def move_task_dialog(widget: Widget, client: CoordClient, task_id: str, title: str,
                           status: str | None = None) -> Task | None:
    """Starts on the status, offering only the moves the state table allows from `status`."""
    moves = allowed_moves(status)
    form = FormScreen(f"Move: {title}" + (f" (now {status})" if status else ""), [
        Field("status", "New status", moves[0], kind="select", options=moves, option_words=STATUS_WORDS),
        Field("reason", "Reason (holding, closed)", max_len=limits.TASK_REASON),
        Field("assignee", "Reassign to (optional)", names=True)], "Move", focus="status")

    async def submit(values: dict[str, Any]) -> Task:
        try:
            return await client.move_task(task_id, values["status"], values["reason"] or None,
                                          values["assignee"] or None)
        except ApiError as exc:
            if exc.status == 409 and exc.allowed:  # moved meanwhile: offer what the server allows now
                form.query_one("#field-status", Select).set_options([(Text(s), s) for s in exc.allowed])
            raise
    form.submit = submit
    return moved(widget, await widget.app.push_screen_wait(form))


def moved(widget: Widget, task: object) -> Task | None:
    if not isinstance(task, Task):
        return None
    widget.notify(f"{task.title} → {task.status}", timeout=3)
    return task
