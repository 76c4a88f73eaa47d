"""For admins: every user, archived ones too (GET /api/admin/users), with archive / unarchive, the admin flag
and the display name (PATCH /api/admin/users/{id}; API.md §18). Archiving revokes the user's database tokens."""
from __future__ import annotations

from collections.abc import Iterator
from datetime import timezone
from functools import partial

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from ..client.api import ApiError, CoordClient
from ..client.v11 import AdminUser
from ..screens.form import Field
from .base import Command, OpsHost, OpsScreen, confirm, run_form, when

DISPLAY_NAME_MAX = 100


def edit_name(host: OpsHost, user: AdminUser) -> None:
    fields = [Field("name", "Display name", user.display_name, required=True, max_len=DISPLAY_NAME_MAX,
                    wire="displayName")]
    run_form(host, f"Display name of {user.id}", fields, "Save",
             lambda values: host.client.update_user(user.id, displayName=values["name"]),
             lambda u: f"{u.id} is now {u.display_name}")


def toggle_archive(host: OpsHost, user: AdminUser) -> None:
    if user.archived_at is None:
        now = host.session.now().astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
        you = "That is you. " if user.id == host.session.identity else ""
        confirm(host, f"{you}Archive {user.id}? Their tokens are revoked and open streams closed at once; they leave "
                     "presence and receive no new mail, chat or tasks.", "Archive",
                lambda: host.client.update_user(user.id, archivedAt=now), f"{user.id} archived")
    else:
        confirm(host, f"Unarchive {user.id}? No token comes back: issue a new one by invite or token create.",
                "Unarchive", lambda: host.client.update_user(user.id, archivedAt=None), f"{user.id} unarchived")


def toggle_admin(host: OpsHost, user: AdminUser) -> None:
    if user.is_admin:
        question = f"Take admin rights from {user.id}?"
    else:
        question = f"Make {user.id} an admin? Admins see every project and manage tokens and users."
    confirm(host, question, "Revoke admin" if user.is_admin else "Make admin",
            lambda: host.client.update_user(user.id, isAdmin=not user.is_admin),
            f"{user.id} {'is no longer an admin' if user.is_admin else 'is an admin'}")


class UsersScreen(OpsScreen[AdminUser]):
    TITLE_TEXT = "Users"
    COLUMNS = ("Identity", "Display name", "Admin", "Agent", "Last seen", "Archived")
    GIVE_WAY = ("Display name", "Last seen", "Agent")
    HINT = "e/enter display name · a archive/unarchive · A admin flag"
    BINDINGS = [Binding("e", "edit", "Name"), Binding("a", "archive", "Archive/unarchive"),
                Binding("A", "admin", "Admin flag")]

    async def fetch(self) -> list[AdminUser]:
        return await self.client.admin_users()

    def row(self, u: AdminUser) -> tuple[str | Text, ...]:
        style = "dim strike" if u.archived_at else ""
        return (Text(u.id, style=style), Text(u.display_name, style=style), "yes" if u.is_admin else "",
                "yes" if u.is_agent else "", when(u.last_seen_at), when(u.archived_at))

    def summary(self, items: list[AdminUser]) -> str:
        archived = sum(1 for u in items if u.archived_at)
        admins = sum(1 for u in items if u.is_admin and not u.archived_at)
        return f"{len(items) - archived} users ({admins} admins), {archived} archived"

    def action_edit(self) -> None:
        user = self.need()
        if user is not None:
            edit_name(self.host, user)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_edit()

    def action_archive(self) -> None:
        user = self.need()
        if user is not None:
            toggle_archive(self.host, user)

    def action_admin(self) -> None:
        user = self.need()
        if user is not None:
            toggle_admin(self.host, user)


async def load(client: CoordClient) -> list[AdminUser] | None:
    """The users for the palette; None when this server has no user admin (404), so its entries hide."""
    try:
        return await client.admin_users()
    except ApiError as exc:
        return None if exc.unsupported else []


def commands(host: OpsHost, users: list[AdminUser] | None) -> Iterator[Command]:
    if not host.session.is_admin or users is None:
        return
    yield "Users (admin)", "List users incl. archived; archive, admin flag, display name (Doctor or Who pane: U)", \
        lambda: host.app.push_screen(UsersScreen(host))
    for u in users:
        verb = "Unarchive" if u.archived_at else "Archive"
        yield f"{verb} user: {u.id}", u.display_name, partial(toggle_archive, host, u)
        yield f"Rename user: {u.id}", u.display_name, partial(edit_name, host, u)

