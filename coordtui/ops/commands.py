"""ctrl+p: every operator action, the per-item ones (edit X, archive X, revoke #n) read from the server
when the palette opens; and OPENERS, what each pane key that opens an operator screen or form opens.

The palette finds what it needs (the OpsHost) on the app as `ops`, which it checks is one."""
from __future__ import annotations

import asyncio
from typing import Callable

from rich.markup import escape
from textual.command import DiscoveryHit, Hit, Hits, Provider

from ..client.api import ApiError, ConnectionFailed
from ..panes.base import OpsName
from . import admin, asks, chat, projects, templates, users, webhooks
from .base import OpsHost

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
        host = getattr(self.app, "ops", None)
        if not isinstance(host, OpsHost):  # an app without operator actions
            return
        client = host.session.client
        data = {"projects": [], "webhooks": [], "templates": [], "tokens": [], "users": None}
        if client is not None:
            is_admin = host.session.is_admin
            admin_only = client.tokens if is_admin else (lambda: asyncio.sleep(0, []))
            user_list = (lambda: users.load(client)) if is_admin else (lambda: asyncio.sleep(0, None))
            found = await asyncio.gather(_quietly(client.projects_all), _quietly(client.webhooks),
                                         _quietly(client.templates), _quietly(admin_only),
                                         _quietly(user_list, default=None))
            data = dict(zip(data, found))
        self.entries = [*projects.commands(host, data["projects"]), *templates.commands(host, data["templates"]),
                        *webhooks.commands(host, data["webhooks"]), *chat.commands(host), *asks.commands(host),
                        *admin.commands(host, data["tokens"]), *users.commands(host, data["users"])]

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


OPENERS: dict[OpsName, Callable[[OpsHost], object]] = {
    "projects": lambda host: host.app.push_screen(projects.ProjectsScreen(host)),
    "templates": lambda host: host.app.push_screen(templates.TemplatesScreen(host)),
    "webhooks": lambda host: host.app.push_screen(webhooks.WebhooksScreen(host)),
    "tokens": lambda host: host.app.push_screen(admin.TokensScreen(host)),
    "invites": lambda host: host.app.push_screen(admin.InvitesScreen(host)),
    "users": lambda host: host.app.push_screen(users.UsersScreen(host)),
    "group": chat.new_group,
    "asks": lambda host: host.app.push_screen(asks.AsksScreen(host)),
    "ask": asks.new_ask,
}


def open_ops(host: OpsHost, name: OpsName) -> None:
    """What a pane's key asked for (Pane.OpsAsked), once connected."""
    if host.session.client is None:
        host.app.notify("Not connected yet", severity="warning", timeout=3)
        return
    OPENERS[name](host)
