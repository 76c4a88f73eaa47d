"""What every pane shares: a coalesced reload worker, event routing hooks and error display."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.markup import escape
from textual.widget import Widget

from ..client.api import ApiError, ConnectionFailed
from ..client.models import ServerEvent

if TYPE_CHECKING:
    from ..app import CoordApp


class Pane(Widget, can_focus=False):
    """A live view. Subclasses implement `load()` (SDK calls) and `show(data)` (widgets).

    `request_reload()` never stacks requests: while one load runs, further requests set a flag and exactly one
    more load follows. Events arrive in batches through `handle_events`.
    """

    TITLE: ClassVar[str] = ""
    EVENT_TYPES: ClassVar[frozenset[str]] = frozenset()
    KEYS: ClassVar[list[tuple[str, str]]] = []

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._loading = False
        self._again = False
        self.stale = True
        self.loads = 0
        self.last_error: str | None = None
        self.unsupported = False

    @property
    def coord(self) -> "CoordApp":
        return self.app  # type: ignore[return-value]

    @property
    def client(self):
        return self.coord.client

    @property
    def active(self) -> bool:
        return self.coord.active_pane is self

    def request_reload(self) -> None:
        if self.client is None:
            return
        if not self.active:
            self.stale = True
            return
        self.stale = False
        if self._loading:
            self._again = True
            return
        self._loading = True
        self.run_worker(self._reload(), group=f"load-{self.id}", exit_on_error=False)

    async def _reload(self) -> None:
        try:
            while True:
                self._again = False
                try:
                    data = await self.load()
                except (ApiError, ConnectionFailed) as exc:
                    self.show_error(exc)
                else:
                    self.last_error = None
                    self.unsupported = False
                    self.loads += 1
                    self.show(data)
                if not self._again:
                    break
        finally:
            self._loading = False

    @property
    def busy(self) -> bool:
        return self._loading

    # Every pane defines these two: fetch through the SDK, then render what was fetched.
    async def load(self) -> Any:
        raise TypeError(f"{type(self).__name__} must define load()")

    def show(self, data: Any) -> None:
        raise TypeError(f"{type(self).__name__} must define show()")

    def show_error(self, exc: Exception) -> None:
        """Says why the pane is empty: in its summary line, and once as a toast."""
        self.unsupported = isinstance(exc, ApiError) and exc.unsupported
        if self.unsupported:
            text = f"This server does not support this view ({exc.message})."
        else:
            text = str(exc)
        for summary in self.query(".pane-summary"):
            summary.update(f"[red]{escape(text)}[/red]")
            break
        if text != self.last_error:
            self.notify(text, title=self.TITLE, severity="error", timeout=4)
        self.last_error = text

    def handle_events(self, events: list[ServerEvent]) -> None:
        """A batch of events; the default reloads once if any concerns this pane."""
        if any(self.concerns(e) for e in events):
            self.request_reload()

    def concerns(self, event: ServerEvent) -> bool:
        if event.type == "inbox_check":
            # our own list/search calls announce themselves; only an ack (maybe from another client) changes data
            return event.type in self.EVENT_TYPES and event.data.get("action") == "ack"
        return event.type in self.EVENT_TYPES

    def activated(self) -> None:
        if self.stale:
            self.request_reload()

    async def act(self, coro, success: str | None = None) -> Any:
        """Runs one SDK call for a key action; refusals become a toast, never an exception."""
        try:
            result = await coro
        except ApiError as exc:
            text = exc.message + (f" (allowed: {', '.join(exc.allowed)})" if exc.allowed else "")
            self.notify(text, title="Refused", severity="error", timeout=6)
            return None
        except ConnectionFailed as exc:
            self.notify(str(exc), title="Not connected", severity="error", timeout=6)
            return None
        if success:
            self.notify(success, timeout=3)
        return result if result is not None else True
