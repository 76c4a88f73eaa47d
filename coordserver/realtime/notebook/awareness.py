"""Who is where on a live page: the editors' Yjs awareness states (name, colour, cursor), relayed and
never stored.

Frames carry standard y-protocols awareness updates (what `encodeAwarenessUpdate` makes and
`applyAwarenessUpdate` takes; the payload of y-websocket's message type 1) as arrays of byte values:
`{"type":"awareness","update":[...]}`. A room keeps the states in a pycrdt `Awareness` (the same rules
as y-protocols: a higher clock wins, a null state removes) only to tell a joining editor who is
there, and to say "gone" (a null state) for an editor whose socket closed or who went silent for
longer than the timeout (30 s by default, as y-protocols; live clients renew every 15 s).
"""
from __future__ import annotations

import json
from typing import Any

from pycrdt import Awareness, Decoder, Doc

MAX_AWARENESS_BYTES = 64 * 1024  # one editor's state is a name, a colour and a cursor: a few hundred bytes


class InvalidAwareness(ValueError):
    pass


def client_states(update: bytes) -> dict[int, bool]:
    """The clients an awareness update speaks for: client id -> whether it has a state (False: removed).
    Raises InvalidAwareness for anything y-protocols could not read."""
    if len(update) > MAX_AWARENESS_BYTES:
        raise InvalidAwareness("awareness update too large")
    try:
        decoder = Decoder(update)
        clients: dict[int, bool] = {}
        for _ in range(decoder.read_var_uint()):
            client_id = decoder.read_var_uint()
            decoder.read_var_uint()  # its clock
            state = json.loads(decoder.read_var_string() or "null")
            if state is not None and not isinstance(state, dict):
                raise InvalidAwareness("an awareness state is a JSON object or null")
            clients[client_id] = state is not None
    except (IndexError, ValueError, UnicodeDecodeError, TypeError, RuntimeError) as exc:  # RuntimeError: truncated
        raise InvalidAwareness("invalid awareness update") from exc
    return clients


class RoomAwareness:
    """The awareness states of one room's page, by the peer (or other process) that sent them."""

    def __init__(self, timeout_seconds: float):
        self.states = Awareness(Doc(), outdated_timeout=int(timeout_seconds * 1000))
        self.states.set_local_state(None)  # the server itself shows no cursor
        self.timeout_ms = timeout_seconds * 1000
        self.by_sender: dict[Any, set[int]] = {}  # a Peer or another process's room origin -> its client ids

    def apply(self, sender: Any, update: bytes) -> bool:
        """Apply an update from `sender` (validated first: raises InvalidAwareness). False, and nothing
        applied, when it speaks for a client that a socket of another identity holds: nobody moves or
        removes someone else's cursor. A client that reconnected (the same identity on a new socket, or
        heard from another process) takes its states over from the socket it left."""
        clients = client_states(update)
        holders = [(other, owned) for other, owned in self.by_sender.items()
                   if other != sender and any(c in owned for c in clients)]
        identity = getattr(sender, "identity", None)
        for other, _owned in holders:
            held_by = getattr(other, "identity", None)
            if identity is not None and held_by is not None and held_by != identity:
                return False
        for _other, owned in holders:
            owned.difference_update(clients)
        self.states.apply_awareness_update(update, sender)
        owned = self.by_sender.setdefault(sender, set())
        for client_id, present in clients.items():
            if present:
                owned.add(client_id)
            else:
                owned.discard(client_id)
        return True

    def everyone(self) -> bytes | None:
        """All current states, for an editor who just joined (None when nobody has one)."""
        clients = list(self.states.states)
        return self.states.encode_awareness_update(clients) if clients else None

    def of_senders(self, senders: list[Any]) -> bytes | None:
        """The states these senders (this process's peers) hold, for a room elsewhere that asks."""
        clients = [c for sender in senders for c in self.by_sender.get(sender, ()) if c in self.states.states]
        return self.states.encode_awareness_update(clients) if clients else None

    def drop_sender(self, sender: Any) -> bytes | None:
        """The sender is gone: remove its states; returns the removal update to tell the others."""
        return self._remove([c for c in self.by_sender.pop(sender, set()) if c in self.states.states])

    def drop_silent(self) -> bytes | None:
        """Remove states not renewed within the timeout; returns the removal update, if any."""
        now = self.states._get_time()
        silent = [client_id for client_id, meta in self.states.meta.items()
                  if client_id in self.states.states and now - meta["lastUpdated"] >= self.timeout_ms]
        for owned in self.by_sender.values():
            owned.difference_update(silent)
        return self._remove(silent)

    def _remove(self, clients: list[int]) -> bytes | None:
        if not clients:
            return None
        self.states.remove_awareness_states(clients, "server")
        return self.states.encode_awareness_update(clients)  # null states at the clocks last seen
