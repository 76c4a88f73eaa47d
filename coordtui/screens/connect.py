"""URL + token, test the connection (POST /api/auth/verify), save a profile. Shown when nothing is configured,
when the server refuses the token (with its error, the fields as they were), and from the palette ("Connect…")."""
from __future__ import annotations

from rich.markup import escape
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Button, Footer, Input, Label

from ..client.api import ApiError, ConnectionFailed, CoordClient
from ..config import Profile, save_profile
from .focus import focus_first


class ConnectScreen(Screen[Profile | None]):
    """`profile` fills the fields; `error` says why the screen is shown; `cancel` lets escape go back to the app
    (else escape quits: there is nothing to go back to)."""

    BINDINGS = [Binding("escape", "quit", "Quit")]
    AUTO_FOCUS = ".first-field"  # see screens/focus.py

    def __init__(self, profile: Profile | None = None, error: str = "", cancel: bool = False):
        super().__init__()
        self.profile = profile
        self.error = error
        self.cancel = cancel

    def compose(self) -> ComposeResult:
        start = self.profile
        with Vertical(id="connect"):
            yield Label("[b]Connect to a coord server[/b]")
            yield Label("Server URL")
            yield Input(start.url if start else "", placeholder="https://coord.example.net", id="url", compact=True,
                        classes="" if self.error else "first-field")
            yield Label("Token")
            yield Input(start.token if start else "", placeholder="64 hex chars", password=True, id="token",
                        compact=True, classes="first-field" if self.error else "")  # refused: the token is what to fix
            yield Label("Save as profile")
            yield Input(profile_name(start), id="name", compact=True)
            yield Label(Content.styled(self.error, "red") if self.error else "", id="connect-status")
            with Horizontal(id="connect-buttons"):
                yield Button("Test", id="test", compact=True)
                yield Button("Save & connect", id="save", variant="primary", compact=True)
        yield Footer()

    def on_mount(self) -> None:
        for widget in self.query(Input):
            widget.cursor_blink = False
        focus_first(self)

    def _profile(self) -> Profile:
        url = self.query_one("#url", Input).value.strip().rstrip("/")
        token = self.query_one("#token", Input).value.strip()
        name = self.query_one("#name", Input).value.strip() or "default"
        return Profile(name, url, token)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "name":
            self.check(save=True)
        else:
            self.focus_next()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.check(save=event.button.id == "save")

    @work(exclusive=True, group="connect", exit_on_error=False)
    async def check(self, save: bool) -> None:
        status = self.query_one("#connect-status", Label)
        profile = self._profile()
        if not profile.url.startswith(("http://", "https://")) or not profile.token:
            status.update("[red]Enter an http(s) URL and a token.[/red]")
            return
        status.update("Testing…")
        try:
            async with CoordClient(profile.url, profile.token, timeout=10) as client:
                identity = await client.verify()
        except ApiError as exc:
            status.update(f"[red]Refused: {escape(exc.message)}[/red]")
            return
        except ConnectionFailed as exc:
            status.update(f"[red]{escape(str(exc))}[/red]")
            return
        status.update(f"[green]OK: {identity.identity}{' (admin)' if identity.is_admin else ''}[/green]")
        if save:
            path = save_profile(profile)
            self.notify(f"Saved profile {profile.name} in {path}")
            self.dismiss(profile)

    def action_quit(self) -> None:
        if self.cancel:
            self.dismiss(None)
        else:
            self.app.exit()


def profile_name(profile: Profile | None) -> str:
    """The name to save under: the profile's own, "default" for a connection given on the command line."""
    if profile is None or profile.name in ("command line", "environment"):
        return "default"
    return profile.name
