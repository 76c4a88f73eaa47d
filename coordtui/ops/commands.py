"""ctrl+p: every operator action, the per-item ones (edit X, archive X, revoke #n) read from the server
when the palette opens."""
from __future__ import annotations

import asyncio

from rich.markup import escape
from textual.command import DiscoveryHit, Hit, Hits, Provider

from ..client.api import ApiError, ConnectionFailed
from . import admin, chat, projects, templates, users, webhooks

LOAD_TIMEOUT = 3.0


async def _quietly(call, timeout: float = LOAD_TIMEOUT, default=()) -> list:
    """Per-item commands are a bonus: a refusal (e.g. 403 for non-admins) or a slow server gives none."""
    try:
        return await asyncio.wait_for(call(), timeout)
    except (ApiError, ConnectionFailed, TimeoutError):
        return [] if default == () else default


class OpsCommands(Provider):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.entries: list[tuple[str, str, object]] = []

    async def startup(self) -> None:
        app = self.app
        client = getattr(app, "client", None)
        data = {"projects": [], "webhooks": [], "templates": [], "tokens": [], "users": None}
        if client is not None:
            is_admin = getattr(app, "is_admin", False)
            admin_only = client.tokens if is_admin else (lambda: asyncio.sleep(0, []))
            user_list = (lambda: users.load(client)) if is_admin else (lambda: asyncio.sleep(0, None))
            found = await asyncio.gather(_quietly(client.projects_all), _quietly(client.webhooks),
                                         _quietly(client.templates), _quietly(admin_only),
                                         _quietly(user_list, default=None))
            data = dict(zip(data, found))
        self.entries = [*projects.commands(app, data["projects"]), *templates.commands(app, data["templates"]),
                        *webhooks.commands(app, data["webhooks"]), *chat.commands(app),
                        *admin.commands(app, data["tokens"]), *users.commands(app, data["users"])]

    # The palette reads a hit's words as markup; they hold the server's (project titles, display names, ...):
    # escaped, they show as written (the SDK has already neutralised their control characters).
    async def discover(self) -> Hits:
        for title, help_text, run in self.entries:
            if ":" not in title and "#" not in title:  # the general actions; per-item ones come by typing
                yield DiscoveryHit(escape(title), run, text=title, help=_shown(help_text))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, run in self.entries:
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(escape(title)), run, text=title, help=_shown(help_text))


def _shown(help_text: str | None) -> str | None:
    return escape(help_text) if help_text else None


OPENERS = {
    "projects": lambda app: app.push_screen(projects.ProjectsScreen()),
    "templates": lambda app: app.push_screen(templates.TemplatesScreen()),
    "webhooks": lambda app: app.push_screen(webhooks.WebhooksScreen()),
    "tokens": lambda app: app.push_screen(admin.TokensScreen()),
    "invites": lambda app: app.push_screen(admin.InvitesScreen()),
    "users": lambda app: app.push_screen(users.UsersScreen()),
    "group": chat.new_group,
}


class OpsActions:
    """Mixed into the App: `app.ops('<name>')` for pane key bindings, and the palette provider."""

    def action_ops(self, name: str) -> None:
        if self.client is None:
            self.notify("Not connected yet", severity="warning", timeout=3)
            return
        OPENERS[name](self)
