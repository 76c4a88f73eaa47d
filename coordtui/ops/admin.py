"""For admins: tokens (list, create, revoke, rotate) and invites (create with the onboarding URL, delete).

API.md has no token-create route: new tokens come from invites, so "new token" makes a single-use invite
for the identity and redeems it at once; the secret is shown once, like rotate's."""
from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any, Awaitable

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable

from ..client import limits
from ..client.models import counted
from ..client.ops_models import Invite, IssuedToken, TokenRecord
from ..screens.form import Field, FormValues
from .base import Command, OpsHost, OpsScreen, SecretScreen, blank_none, confirm, number_or_text, run_form, when

ONCE = "Shown once: the server keeps only its hash. Copy it now."


def show_token(host: OpsHost, issued: IssuedToken, title: str) -> None:
    host.app.push_screen(SecretScreen(title, ONCE, [(f"Token for {issued.identity}", issued.token)], once=True))


def new_token(host: OpsHost) -> None:
    fields = [Field("identity", "Identity (new: ^[a-z][a-z0-9_-]*$)", required=True, max_len=limits.IDENTITY,
                    wire="identity"),
              Field("label", "Label", max_len=limits.TOKEN_LABEL, wire="label"),
              Field("admin", "Admin", False, kind="check")]

    def submit(values: FormValues) -> Awaitable[Any]:
        return host.client.create_token(values["identity"], values["admin"], blank_none(values["label"]))
    run_form(host, "New token", fields, "Create", submit, lambda t: f"Token issued for {t.identity}",
             after=lambda issued: show_token(host, issued, "New token"))


def revoke_token(host: OpsHost, token: TokenRecord) -> None:
    confirm(host, f"Revoke token #{token.id} of {token.identity}? Clients using it are refused at once.", "Revoke",
            lambda: host.client.revoke_token(token.id), f"Token #{token.id} revoked")


def rotate_token(host: OpsHost, token: TokenRecord) -> None:
    confirm(host, f"Rotate token #{token.id} of {token.identity}? The old one stops working now.", "Rotate",
            lambda: host.client.rotate_token(token.id), f"Token #{token.id} rotated",
            after=lambda issued: show_token(host, issued, f"Rotated token #{token.id}"))


class TokensScreen(OpsScreen[TokenRecord]):
    TITLE_TEXT = "Tokens"
    COLUMNS = ("ID", "Identity", "Admin", "Label", "Created", "Last used", "Revoked")
    GIVE_WAY = ("Label", "Last used", "Created", "Identity")
    HINT = "n new · r rotate · x revoke"
    BINDINGS = [Binding("n", "new", "New"), Binding("r", "rotate", "Rotate"), Binding("x", "revoke", "Revoke")]

    async def fetch(self) -> list[TokenRecord]:
        return await self.client.tokens()

    def row(self, t: TokenRecord) -> tuple[str | Text, ...]:
        return (str(t.id), t.identity, "yes" if t.is_admin else "", t.label or "", when(t.created_at),
                when(t.last_used_at), when(t.revoked_at))

    def summary(self, items: list[TokenRecord]) -> str:
        live = sum(1 for t in items if t.revoked_at is None)
        return f"{live} live {'token' if live == 1 else 'tokens'}, {len(items) - live} revoked (database tokens; environment tokens are not listed)"

    def action_new(self) -> None:
        new_token(self.host)

    def _live(self) -> TokenRecord | None:
        token = self.need()
        if token is not None and token.revoked_at is not None:
            self.notify(f"Token #{token.id} is already revoked", severity="warning", timeout=3)
            return None
        return token

    def action_rotate(self) -> None:
        token = self._live()
        if token is not None:
            rotate_token(self.host, token)

    def action_revoke(self) -> None:
        token = self._live()
        if token is not None:
            revoke_token(self.host, token)


def show_invite(host: OpsHost, invite: Invite, heading: str = "Invite created") -> None:
    values = [("Onboarding URL", invite.onboard_url)] if invite.onboard_url else []
    host.app.push_screen(SecretScreen(heading, "Whoever opens the URL registers an identity and gets a token.",
                                 values + [("Invite code", invite.code)]))


def new_invite(host: OpsHost) -> None:
    fields = [Field("hint", "Identity (empty = any)", max_len=limits.IDENTITY, wire="identityHint"),
              Field("admin", "Admin", False, kind="check"),
              Field("max_uses", "Max uses", "1", wire="maxUses"),
              Field("hours", "Expires in hours", "72", wire="expiresInHours")]

    def submit(values: FormValues) -> Awaitable[Any]:
        # What is typed goes as typed when it is no number (number_or_text): the server's refusal then names the
        # field. The SDK's types describe the well-formed call, hence the ignore.
        return host.client.create_invite(blank_none(values["hint"]), values["admin"],
                                         number_or_text(values["max_uses"]) or 1,  # type: ignore[arg-type]
                                         number_or_text(values["hours"]))  # type: ignore[arg-type]
    run_form(host, "New invite", fields, "Create", submit, lambda i: f"Invite #{i.id} created",
             after=lambda invite: show_invite(host, invite))


def delete_invite(host: OpsHost, invite: Invite) -> None:
    confirm(host, f"Delete invite #{invite.id} ({invite.identity_hint or 'any identity'})?", "Delete",
            lambda: host.client.delete_invite(invite.id), f"Invite #{invite.id} deleted")


class InvitesScreen(OpsScreen[Invite]):
    TITLE_TEXT = "Invites"
    COLUMNS = ("ID", "Identity", "Admin", "Uses", "Expires", "Code")
    GIVE_WAY = ("Uses", "Identity")
    HINT = "enter/c the onboarding URL to copy · n new · d delete"
    BINDINGS = [Binding("n", "new", "New"), Binding("d", "delete", "Delete"), Binding("c", "show", "Copy URL")]

    async def fetch(self) -> list[Invite]:
        return await self.client.invites()

    def row(self, i: Invite) -> tuple[str | Text, ...]:
        return (str(i.id), i.identity_hint or "any", "yes" if i.is_admin else "", f"{i.use_count}/{i.max_uses}",
                when(i.expires_at), i.code[:12] + "…")

    def summary(self, items: list[Invite]) -> str:
        return f"{counted(len(items), 'invite')} (newest first)"

    def action_new(self) -> None:
        new_invite(self.host)

    def action_show(self) -> None:
        """An existing invite's onboarding URL and code, shown again to copy (a server without the URL in its
        list: the code alone)."""
        invite = self.need()
        if invite is not None:
            show_invite(self.host, invite, f"Invite #{invite.id}")

    def on_data_table_row_selected(self, _event: DataTable.RowSelected) -> None:
        self.action_show()

    def action_delete(self) -> None:
        invite = self.need()
        if invite is not None:
            delete_invite(self.host, invite)


def commands(host: OpsHost, tokens: list[TokenRecord]) -> Iterator[Command]:
    yield "Tokens (admin)", "List, create, rotate and revoke tokens (Doctor pane: t)", lambda: host.app.push_screen(
        TokensScreen(host))
    yield "New token (admin)", "For a new identity; the secret is shown once", lambda: new_token(host)
    yield "Invites (admin)", "List, create and delete invites (Doctor pane: i)", lambda: host.app.push_screen(
        InvitesScreen(host))
    yield "New invite (admin)", "Shows the onboarding URL", lambda: new_invite(host)
    for t in tokens:
        if t.revoked_at is None:
            yield f"Rotate token #{t.id} ({t.identity})", t.label or "", partial(rotate_token, host, t)
            yield f"Revoke token #{t.id} ({t.identity})", t.label or "", partial(revoke_token, host, t)
