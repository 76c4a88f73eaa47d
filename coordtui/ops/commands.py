"""ctrl+p: every operator action, the per-item ones (edit X, archive X, revoke #n) read from the server
when the palette opens; and OPENERS, what each pane key that opens an operator screen or form opens.

The palette finds what it needs (the OpsHost) on the app as `ops`, which it checks is one."""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, TypeVar

from rich.markup import escape
from textual.command import DiscoveryHit, Hit, Hits, Provider

from ..client.api import ApiError, ConnectionFailed
from ..client.models import Project
from ..client.ops_models import Template, TokenRecord, Webhook
from ..client.v11 import AdminUser
from ..panes.base import OpsName
from . import admin, asks, chat, guards, onboard, projects, silences, templates, users, webhooks
from .base import Command, OpsHost

LOAD_TIMEOUT = 3.0
T = TypeVar("T")


async def _quietly(call: Callable[[], Awaitable[T]], default: T, timeout: float = LOAD_TIMEOUT) -> T:
    """Per-item commands are a bonus: a refusal (e.g. 403 for non-admins) or a slow server gives none."""
    try:
        return await asyncio.wait_for(call(), timeout)
    except (ApiError, ConnectionFailed, TimeoutError):
        return default


class OpsCommands(Provider):
    """The palette cancels a search when the next key arrives, and a search awaiting `startup()` cancels it too:
    a fast typist (ctrl+p and the query in one burst) would find none of these commands. So the commands are
    read from the server by a task of their own, which every search awaits shielded, and `startup` does nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loading: asyncio.Task[list[Command]] | None = None

    async def entries(self) -> list[Command]:
        if self._loading is None:
            self._loading = asyncio.create_task(self._load())
        return await asyncio.shield(self._loading)

    async def shutdown(self) -> None:
        if self._loading is not None:
            self._loading.cancel()

    async def _load(self) -> list[Command]:
        host = getattr(self.app, "ops", None)
        if not isinstance(host, OpsHost):  # an app without operator actions
            return []
        client = host.session.client
        found_projects: list[Project] = []
        found_webhooks: list[Webhook] = []
        found_templates: list[Template] = []
        found_tokens: list[TokenRecord] = []
        found_users: list[AdminUser] | None = None
        if client is not None:
            is_admin = host.session.is_admin

            async def no_tokens() -> list[TokenRecord]:
                return await asyncio.sleep(0, [])

            async def no_users() -> list[AdminUser] | None:
                return await asyncio.sleep(0, None)

            async def user_list() -> list[AdminUser] | None:
                return await users.load(client)
            found_projects, found_webhooks, found_templates, found_tokens, found_users = await asyncio.gather(
                _quietly(client.projects_all, found_projects), _quietly(client.webhooks, found_webhooks),
                _quietly(client.templates, found_templates),
                _quietly(client.tokens if is_admin else no_tokens, found_tokens),
                _quietly(user_list if is_admin else no_users, found_users))
        return [*onboard.commands(host),
                *projects.commands(host, found_projects), *templates.commands(host, found_templates),
                *webhooks.commands(host, found_webhooks), *silences.commands(host), *guards.commands(host),
                *chat.commands(host), *asks.commands(host),
                *admin.commands(host, found_tokens), *users.commands(host, found_users)]

    # The palette reads a hit's words as markup; they hold the server's (project titles, display names, ...):
    # escaped, they show as written (the SDK has already neutralised their control characters).
    async def discover(self) -> Hits:
        for title, help_text, run in await self.entries():
            if ":" not in title and "#" not in title:  # the general actions; per-item ones come by typing
                yield DiscoveryHit(escape(title), run, text=title, help=_shown(help_text))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, run in await self.entries():
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
    "archived_chats": lambda host: host.app.push_screen(chat.ArchivedChannelsScreen(host)),
    "asks": lambda host: host.app.push_screen(asks.AsksScreen(host)),
    "ask": asks.new_ask,
    "connect": onboard.connect_agent,
    "invite": onboard.invite_teammate,
}


def open_ops(host: OpsHost, name: OpsName) -> None:
    """What a pane's key asked for (Pane.OpsAsked), once connected."""
    if host.session.client is None:
        host.app.notify("Not connected yet", severity="warning", timeout=3)
        return
    OPENERS[name](host)
