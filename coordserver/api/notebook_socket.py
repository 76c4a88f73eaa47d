"""The collaborative-editing WebSocket (`/api/notebook/ws`): admission through the Gate, then a peer in
its page's room, frames in and out until either side ends (see skills/notebook.md for the protocol)."""
from __future__ import annotations

import asyncio

from quart import websocket

from .. import jsonstrict
from ..auth import parse_bearer
from ..context import coord
from ..errors import DatabaseFault, Invalid, RateLimited, render_error
from ..gate import client_address
from ..metrics import process_metrics
from ..principal import Principal
from ..realtime.notebook.peer import CLOSE_INVALID_DATA, CLOSE_NOT_FOUND, CLOSE_TRY_AGAIN, CLOSE_UNKNOWN_TOKEN, Peer, frame

CLOSE_MISSING = 4000


async def _refuse(code: int, message: str) -> None:
    await websocket.send(frame("error", message=message))
    await websocket.close(code, message)


async def _admit(c) -> Principal | tuple[int, str]:
    """The Gate admits a socket as it admits a request (token, rate limit, presence touch); a refusal is a
    close code and message, sent after the accept so that browsers can read it."""
    token = websocket.args.get("token") or parse_bearer(websocket.headers.get("Authorization", ""))
    if not websocket.args.get("page") or not token:
        return CLOSE_MISSING, "page and token are required"

    def client() -> str:
        return client_address(c.settings.trusted_proxy, websocket.headers.get("X-Forwarded-For", ""),
                              websocket.remote_addr)
    try:
        admission = await c.services.gate.admit("GET", websocket.path, token, client, websocket.query_string)
    except RateLimited:
        return CLOSE_TRY_AGAIN, "Too many requests; retry later"
    except Invalid:
        return CLOSE_NOT_FOUND, "Page not found"
    if admission.principal is None:
        return CLOSE_UNKNOWN_TOKEN, "Invalid token"
    return admission.principal


async def notebook_socket():
    """See the skill doc: JSON frames carrying Yjs v1 updates as arrays of byte values."""
    c = coord()
    await websocket.accept()
    try:
        admitted = await _admit(c)
        if isinstance(admitted, tuple):
            return await _refuse(*admitted)
        principal = admitted
        peer = Peer(principal.identity, principal.is_admin, principal.token_id, principal.expires_at)
        room = await c.services.notebook.join(websocket.args["page"], peer)
    except DatabaseFault as fault:
        # The same answer as every other door (render_error), as a close code the editor retries after.
        answer = render_error(fault, "GET", websocket.path)
        return await _refuse(CLOSE_TRY_AGAIN, answer.body["error"])
    if room is None:
        return await _refuse(CLOSE_NOT_FOUND, "Page not found")
    presence, guard = c.services.presence, c.services.tokens_guard
    presence.connection_opened(principal.identity, "api")  # an open editor keeps its identity online
    guard.admit(peer)  # ends when its token is revoked or expires
    sockets = process_metrics().notebook_sockets  # coord_notebook_sockets, summed over processes
    sockets.inc()
    sender = asyncio.ensure_future(_send_frames(peer))
    receiver = asyncio.ensure_future(_receive_frames(room, peer))
    try:
        await asyncio.wait({sender, receiver}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        room.leave(peer)
        guard.release(peer)
        sockets.dec()
        presence.connection_closed(principal.identity, "api")
        for task in (sender, receiver):
            task.cancel()
        await asyncio.gather(sender, receiver, return_exceptions=True)


async def _send_frames(peer: Peer) -> None:
    while True:
        item = await peer.next_item()
        if isinstance(item, tuple):
            code, message = item
            await _refuse(code, message)
            return
        await websocket.send(item)


async def _receive_frames(room, peer: Peer) -> None:
    while not peer.closing:
        data = await websocket.receive()
        try:
            message = jsonstrict.loads(data)
            if not isinstance(message, dict):
                raise ValueError
        except (ValueError, UnicodeDecodeError):
            peer.close(CLOSE_INVALID_DATA, "Frames must be JSON objects")
            return
        kind = message.get("type")
        if kind not in ("update", "awareness"):
            continue  # unknown client frames are ignored (forward compatibility)
        raw = message.get("update")
        try:
            if not isinstance(raw, list):
                raise TypeError
            update = bytes(raw)
        except (TypeError, ValueError):
            peer.close(CLOSE_INVALID_DATA, "update must be an array of byte values")
            return
        if kind == "awareness":
            room.receive_awareness(peer, update)
        else:
            room.receive(peer, update)
