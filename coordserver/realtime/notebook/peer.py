"""One notebook socket as a room sees it (a bounded outbox), the frames it is sent, and the size cap
of a live document.

Limits (the skill doc `notebook` states them):
- a live page holds at most MAX_PAGE_CHARS characters, as REST content does: an update that would
  pass it is not applied, and its sender gets `{"type":"error"}` and close code 1009;
- a peer's outbox holds at most MAX_QUEUED_FRAMES frames and MAX_QUEUED_BYTES characters (one larger
  frame, such as the first sync of a big page, is let through on an empty outbox); past that the
  peer is closed with 1013 and reconnects;
- a peer whose token is revoked, rotated or expired, or whose identity is archived, is closed with
  4001 (realtime/revocation.py).
"""
from __future__ import annotations

import asyncio
from datetime import datetime

from pycrdt import Doc, Text

from ... import jsonstrict
from ...domain import notebook as pages

MAX_PAGE_CHARS = 1_000_000
MAX_QUEUED_FRAMES = 5000
MAX_QUEUED_BYTES = 8 << 20

CLOSE_NOT_FOUND = 4004
CLOSE_UNKNOWN_TOKEN = 4001
CLOSE_INVALID_DATA = 1007
CLOSE_TOO_BIG = 1009
CLOSE_TRY_AGAIN = 1013
CLOSE_GOING_AWAY = 1001

REVOKED_MESSAGES = {"revoked": "Token revoked", "rotated": "Token revoked", "expired": "Token expired",
                    "archived": "Identity archived"}
TOO_BIG_MESSAGE = f"Page would exceed {MAX_PAGE_CHARS} characters; update refused"


def frame(kind: str, **fields) -> str:
    return jsonstrict.dumps({"type": kind, **fields})


def update_frame(update: bytes) -> str:
    return frame("update", update=list(update))


def awareness_frame(update: bytes) -> str:
    """A y-protocols awareness update (awareness.py)."""
    return frame("awareness", update=list(update))


class Peer:
    """One WebSocket connection, as the room sees it. Frames are queued; the socket task sends them."""

    def __init__(self, identity: str, is_admin: bool, token_id: int | None = None,
                 expires_at: datetime | None = None):
        self.identity = identity
        self.is_admin = is_admin
        self.token_id = token_id      # the database token that opened it (TokenGuard)
        self.expires_at = expires_at
        self.outbox: asyncio.Queue = asyncio.Queue()
        self.queued_bytes = 0
        self.closing = False

    def send(self, text: str) -> None:
        if self.closing:
            return
        if self.outbox.qsize() >= MAX_QUEUED_FRAMES or (
                self.queued_bytes and self.queued_bytes + len(text) > MAX_QUEUED_BYTES):
            self.close(CLOSE_TRY_AGAIN, "Too far behind; reconnect")
            return
        self.queued_bytes += len(text)
        self.outbox.put_nowait(text)

    async def next_item(self) -> str | tuple[int, str]:
        """The next frame to send, or (close code, message) once the peer must be closed."""
        item = await self.outbox.get()
        if isinstance(item, str):
            self.queued_bytes -= len(item)
        return item

    def close(self, code: int, message: str) -> None:
        """Drop what is still queued (nothing more is worth sending) and close with `code`."""
        if self.closing:
            return
        self.closing = True
        while not self.outbox.empty():
            self.outbox.get_nowait()
        self.queued_bytes = 0
        self.outbox.put_nowait((code, message))

    def end(self, reason: str) -> None:
        """TokenGuard: the token that opened this socket is no longer valid."""
        self.close(CLOSE_UNKNOWN_TOKEN, REVOKED_MESSAGES.get(reason, "Token revoked"))


class ContentCap:
    """Keeps a live document within MAX_PAGE_CHARS characters without counting it on every keystroke.

    `upper` bounds the current character count from above: an update inserts at most as many
    characters as it has bytes. Only when that bound would pass the cap is the document counted, and
    only when the count is still too close is the update tried on a scratch copy."""

    def __init__(self, limit: int = MAX_PAGE_CHARS):
        self.limit = limit
        self.upper: int | None = None

    def admits(self, doc: Doc, text: Text, update: bytes) -> bool:
        grow = len(update)
        if self.upper is not None and self.upper + grow <= self.limit:
            self.upper += grow
            return True
        current = len(str(text))
        if current + grow <= self.limit:
            self.upper = current + grow
            return True
        after = _chars_after(doc, update)
        self.upper = after if after <= self.limit else current
        return after <= self.limit

    def grew(self, update: bytes) -> None:
        """An update applied without asking (another process's, a REST merge, the stored document)."""
        if self.upper is not None:
            self.upper += len(update)


def _chars_after(doc: Doc, update: bytes) -> int:
    scratch = pages.load_document(doc.get_update())
    try:
        scratch.apply_update(update)
    except BaseException as exc:  # a malformed update: the real apply refuses it (close 1007)
        if isinstance(exc, (KeyboardInterrupt, SystemExit, asyncio.CancelledError)):
            raise
        return 0
    return len(pages.document_text(scratch))
