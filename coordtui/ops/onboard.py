"""The first steps with a server: "Connect an agent…" and "Invite a teammate…".

Connect an agent asks a name and whether it is an agent or a human. For an agent it issues the identity's
token (admin: the API issues tokens through a single-use invite, redeemed at once: CoordClient.create_token),
flags the user as an agent, and shows once, ready to copy (OSC 52) or to save to a file: the MCP client
configuration for this server, the `claude mcp add` line, a `curl` that sends a first message, and the skill
docs' URL. For a human it makes an invite naming them and shows the onboarding URL.

The dialog then watches for the new identity: its first request makes the server announce it online (the
`presence` stream event, with the app routing each batch to the screens that watch: EventWatcher), and a
used invite shows as a use counted on it (no event says so: the dialog asks now and then). A non-admin is
told what to ask an admin for, since only admins create identities and invites.
"""
from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.markup import escape
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Label

from ..client import limits
from ..client.api import ApiError, ConnectionFailed
from ..client.models import ServerEvent
from ..client.ops_models import Invite, IssuedToken
from ..screens.form import Field, FormValues
from .base import Command, OpsHost, SecretScreen, run_form

AGENT_LABEL = "connected from coordtui"
INVITE_HOURS = 72
INVITE_POLL_SECONDS = 2.0
MCP_SERVER_NAME = "coord"


@dataclass(frozen=True)
class AgentSetup:
    """Everything an agent needs to reach this server as `identity`: the texts the dialog shows."""
    base_url: str
    identity: str
    token: str
    greet: str  # who the curl's first message goes to (the person connecting it)

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url.rstrip('/')}/mcp"

    @property
    def skill_url(self) -> str:
        return f"{self.base_url.rstrip('/')}/api/skill"

    def mcp_config(self) -> dict[str, Any]:
        """The `mcpServers` block Claude Code (.mcp.json), Cursor and most MCP clients read."""
        return {"mcpServers": {MCP_SERVER_NAME: {"type": "http", "url": self.mcp_url,
                                                 "headers": {"Authorization": f"Bearer {self.token}"}}}}

    def mcp_json(self) -> str:
        return json.dumps(self.mcp_config())

    def claude_command(self) -> str:
        return (f"claude mcp add --transport http {MCP_SERVER_NAME} {shlex.quote(self.mcp_url)} "
                f"--header {shlex.quote('Authorization: Bearer ' + self.token)}")

    def curl_first_message(self) -> str:
        body = json.dumps({"title": f"Hello from {self.identity}", "body": "First message: I am connected."})
        url = f"{self.base_url.rstrip('/')}/api/mailboxes/{self.greet}/messages"
        return (f"curl -sS -X POST {shlex.quote(url)} -H {shlex.quote('Authorization: Bearer ' + self.token)} "
                f"-H 'Content-Type: application/json' -d {shlex.quote(body)}")

    def values(self) -> list[tuple[str, str]]:
        return [("MCP client configuration (JSON: .mcp.json, Cursor, ...)", self.mcp_json()),
                ("Claude Code, one line", self.claude_command()),
                ("A first message with curl", self.curl_first_message()),
                ("Skill docs (how to use coord)", self.skill_url),
                (f"Token for {self.identity}", self.token)]


def connected_text(identity: str, source: str | None, via: str | None = None) -> str:
    how = " via MCP" if via == "mcp" else {"sse": " (event stream)", "api": " (its first request)"}.get(source or "", "")
    return f"{identity} connected{how}"


class OnboardScreen(SecretScreen):
    """The secret dialog, watching for the new identity: the `presence` event of its first request (the app
    hands this screen every batch of events: handle_events), or a use counted on its invite."""

    BINDINGS = [Binding("s", "save", "Save to file")]

    def __init__(self, host: OpsHost, title: str, note: str, values: list[tuple[str, str]], identity: str, *,
                 once: bool, save: tuple[str, str] | None = None, invite: Invite | None = None,
                 save_dir: Path | None = None):
        super().__init__(title, note, values, once=once)
        self.host = host
        self.identity = identity
        self.invite = invite
        self.save = save  # (file name, content) that s writes
        self.save_dir = save_dir
        self.connected = False
        self.saved_to: Path | None = None

    def compose_status(self) -> ComposeResult:
        # composed with the dialog, not mounted after it: a burst of keys can reach the screen before a late mount
        hint = "  [dim]s saves the MCP configuration to a file[/dim]" if self.save else ""
        waiting = "the invite to be used" if self.invite is not None else f"{escape(self.identity)}'s first request"
        yield Label(f"[b]Waiting for {waiting}…[/b]{hint}", id="onboard-status")

    def on_mount(self) -> None:
        super().on_mount()
        if self.invite is not None:
            self.set_interval(INVITE_POLL_SECONDS, self.check_invite)

    def handle_events(self, events: list[ServerEvent]) -> None:
        for event in events:
            if event.type == "presence" and event.data.get("identity") == self.identity and event.data.get("online"):
                self.mark_connected(connected_text(self.identity, event.data.get("source"), event.data.get("via")))

    def mark_connected(self, text: str) -> None:
        if self.connected:
            return
        self.connected = True
        self.query_one("#onboard-status", Label).update(f"[b green]✓ {escape(text)}[/b green]")
        self.app.notify(text, title="Connected", timeout=6)

    @work(exclusive=True, group="onboard-invite", exit_on_error=False)
    async def check_invite(self) -> None:
        if self.connected or self.invite is None:
            return
        try:
            invites = await self.host.client.invites()
        except (ApiError, ConnectionFailed):
            return
        mine = next((i for i in invites if i.id == self.invite.id), None)
        if mine is not None and mine.use_count > 0:
            who = self.invite.identity_hint or "a teammate"
            self.mark_connected(f"the invite was used: {who} joined")

    def action_save(self) -> None:
        if self.save is None:
            return
        name, content = self.save
        path = (self.save_dir or Path.cwd()) / name
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds a token
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(content + "\n")
        except OSError as exc:
            self.notify(f"Could not save: {exc}", severity="error", timeout=6)
            return
        self.saved_to = path
        self.copied = True  # kept in a file: closing needs no second warning
        self.notify(f"Saved to {path} (mode 0600: it holds the token)", timeout=6)


def agent_screen(host: OpsHost, issued: IssuedToken, save_dir: Path | None = None) -> OnboardScreen:
    setup = AgentSetup(host.client.base_url, issued.identity, issued.token, host.session.identity or "admin")
    note = (f"The token is shown once: copy it (c, or a Copy button) or save the MCP configuration (s). "
            f"Then start the agent: this dialog says when {issued.identity} connects.")
    return OnboardScreen(host, f"Connect {issued.identity}", note, setup.values(), issued.identity, once=True,
                         save=(f"coord-{issued.identity}.mcp.json", json.dumps(setup.mcp_config(), indent=2)),
                         save_dir=save_dir)


def invite_screen(host: OpsHost, invite: Invite) -> OnboardScreen:
    who = invite.identity_hint or "your teammate"
    note = f"Send {who} this URL: opening it registers {'them' if not invite.identity_hint else who} and gives a token."
    values = [("Onboarding URL", invite.onboard_url or ""), ("Invite code", invite.code)]
    return OnboardScreen(host, f"Invite {who}", note, values, invite.identity_hint or "", once=False, invite=invite)


async def connect_identity(host: OpsHost, name: str, human: bool) -> IssuedToken | Invite:
    """An agent: its token, flagged as an agent (when the server lets us); a human: an invite naming them."""
    client = host.client
    if human:
        return await client.create_invite(name, False, 1, INVITE_HOURS)
    issued = await client.create_token(name, False, AGENT_LABEL)
    try:
        await client.update_user(name, isAgent=True)
    except ApiError:
        pass  # a server without user admin: the token works all the same
    return issued


def ask_an_admin(host: OpsHost, what: str, command: str) -> None:
    """Only admins create identities and invites: what to ask one for, ready to copy."""
    request = f"Please {what} on coord ({host.client.base_url}): in coordtui, ctrl+p → \"{command}\"."
    host.app.push_screen(SecretScreen("Ask an admin", f"You are {host.session.identity}, not an admin: only admins "
                                      "create identities and invites. Send an admin this:",
                                      [("What to ask", request)]))


def connect_agent(host: OpsHost, save_dir: Path | None = None) -> None:
    if not host.session.is_admin:
        ask_an_admin(host, "create a token for my agent", "Connect an agent…")
        return
    fields = [Field("name", "Name, e.g. build-bot (lowercase letters, digits, - and _)", required=True,
                    max_len=limits.IDENTITY, wire="identity"),
              Field("human", "A human (an invite), not an agent (a token)", False, kind="check")]

    def submit(values: FormValues) -> Any:
        return connect_identity(host, values["name"].strip(), values["human"])

    def shown(result: IssuedToken | Invite) -> None:
        screen = invite_screen(host, result) if isinstance(result, Invite) else agent_screen(host, result, save_dir)
        host.app.push_screen(screen)
    run_form(host, "Connect an agent", fields, "Connect", submit, lambda _r: None, after=shown)


def invite_teammate(host: OpsHost) -> None:
    if not host.session.is_admin:
        ask_an_admin(host, "invite my teammate", "Invite a teammate…")
        return
    fields = [Field("name", "Their identity (empty: they choose)", max_len=limits.IDENTITY, wire="identityHint")]

    def submit(values: FormValues) -> Any:
        return host.client.create_invite(values["name"].strip() or None, False, 1, INVITE_HOURS)
    def shown(invite: Invite) -> None:
        host.app.push_screen(invite_screen(host, invite))
    run_form(host, "Invite a teammate", fields, "Invite", submit, lambda _r: None, after=shown)


def commands(host: OpsHost) -> Iterator[Command]:
    yield ("Connect an agent…", "A token and its MCP configuration for Claude Code, Cursor or a script (Wake, Who: C)",
           lambda: connect_agent(host))
    yield "Invite a teammate…", "An onboarding URL for a person (Who: I)", lambda: invite_teammate(host)
