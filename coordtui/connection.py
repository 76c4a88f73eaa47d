"""How the connection to the server looks: one word and colour per state of the event stream, shown in the
app's top bar and on operator screens (which cover it)."""
from __future__ import annotations

from .client.events import CONNECTED, CONNECTING, DISCONNECTED, RECONNECTING, REFUSED

STATE_LOOK: dict[str, tuple[str, str]] = {
    CONNECTED: ("● connected", "green"), CONNECTING: ("◌ connecting", "yellow"),
    RECONNECTING: ("◌ reconnecting", "yellow"), DISCONNECTED: ("○ disconnected", "red"),
    REFUSED: ("✕ token refused", "red")}


def state_look(state: str) -> tuple[str, str]:
    """(text, colour) for a connection state; an unknown one shows as it is, in white."""
    return STATE_LOOK.get(state, (state, "white"))
