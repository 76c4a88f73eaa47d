"""Every bus channel, declared once with the shape of what it carries.

Publishers (`bus.publish`, `bus.publish_here`, `db.after_commit`) and subscribers (`bus.subscribe`)
name a channel by importing it from here, never by a string; tests/server/events/test_channels.py
fails on a channel used but not declared, or declared but not used. A `Channel` is a value: its
`name` is what travels (the NOTIFY payload of PostgresBus carries it), its type parameter is the
payload's shape, for readers and the type checker (payloads stay plain dicts at run time).

The notebook's channels are one per page: `NOTEBOOK.of(page_id)` is the channel of one page.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Literal, TypedDict, TypeVar

P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class Channel(Generic[P]):
    """One bus channel: `name` travels; `P` is the shape of its payloads."""

    name: str
    doc: str = ""


@dataclass(frozen=True, slots=True)
class ChannelFamily(Generic[P]):
    """Channels named `<prefix><key>`, one per key (the notebook's, one per page)."""

    prefix: str
    doc: str = ""

    def of(self, key: str) -> Channel[P]:
        return Channel(self.prefix + key, self.doc)


# --- payload shapes --------------------------------------------------------------------------

class EventsPayload(TypedDict):
    maxId: int


class EphemeralPayload(TypedDict):
    type: str
    to: list[str] | None
    data: dict[str, Any]


class WakePayload(TypedDict, total=False):
    identity: str
    reason: str


class WakeChangedPayload(TypedDict):
    identity: str | None


class TokensPayload(TypedDict):
    tokenIds: list[int]
    identity: str | None


class ControlPayload(TypedDict):
    eventId: int


class RoomMeta(TypedDict):
    """What a notebook room needs to decide who may see and edit its page (domain/notebook.py room_meta)."""
    createdBy: str
    taggedUsers: list[str] | None
    locked: bool
    lockedBy: str | None
    archived: bool


class NotebookPayload(TypedDict, total=False):
    kind: Literal["update", "meta", "viewers", "awareness", "awareness_query"] | str
    origin: str | None  # the room that sent it; None from a unit of work (a "meta" change)
    update: str  # base64: a Yjs update (kind "update") or a y-protocols awareness update ("awareness")
    relay: int
    viewers: list[str]
    # kind "meta": a RoomMeta's keys
    createdBy: str
    taggedUsers: list[str] | None
    locked: bool
    lockedBy: str | None
    archived: bool


class NotebookHeartbeatPayload(TypedDict):
    page: str
    identity: str


class PresenceSeenPayload(TypedDict):
    seen: list[list[str]]


class StreamsPayload(TypedDict, total=False):
    worker: str
    open: list[str]
    closed: list[str]


class AsksPayload(TypedDict):
    askId: int
    status: str
    deadline: str | None


class AlertsPayload(TypedDict):
    alertId: int
    state: str
    dueAt: str | None


class GuardsPayload(TypedDict):
    dueAt: str | None


class DuePayload(TypedDict):
    dueAt: str | None


class WebhooksPayload(TypedDict):
    webhookId: int


class BusPayload(TypedDict):
    kind: Literal["reconnected"]


# --- the channels ----------------------------------------------------------------------------

EVENTS: Channel[EventsPayload] = Channel(
    "events", "new rows up to maxId are in the event log (readers fetch them from the log)")
EPHEMERAL: Channel[EphemeralPayload] = Channel(
    "ephemeral", "unlogged events (typing, presence, wake pulses); `to`: their audience, None for everyone")
STREAM_HINTS: Channel[EphemeralPayload] = Channel(
    "stream_hints", "unlogged events only event streams use (an inbox read or search); `to`: their audience. "
                    "NOTIFYed only while another process may hold a stream of theirs (realtime/streams_elsewhere.py)")
WAKE: Channel[WakePayload] = Channel(
    "wake", "something entered this identity's wake")
WAKE_CHANGED: Channel[WakeChangedPayload] = Channel(
    "wake_changed", "an unlogged change to what this identity's (None: everyone's) wake shows (pending "
                    "replies, work hours, delivered buzz): the wake cache drops its entry")
TOKENS: Channel[TokensPayload] = Channel(
    "tokens", "drop these tokens (and all of this identity's) from the token cache "
              "(domain.identities.tokens_changed)")
WEBHOOKS: Channel[WebhooksPayload] = Channel(
    "webhooks", "a buzz webhook was created, changed or deleted (domain/buzz.py): every process drops its ingest "
                "lookup cache (webhook_cache.py)")
CONTROL: Channel[ControlPayload] = Channel(
    "control", "a control row (a revocation) was committed: every SSE hub reads the log, streams open or not")
NOTEBOOK: ChannelFamily[NotebookPayload] = ChannelFamily(
    "notebook:", "CRDT updates, page meta and viewers for one page's rooms in every process")
NOTEBOOK_HEARTBEAT: Channel[NotebookHeartbeatPayload] = Channel(
    "notebook_heartbeat", "a REST viewer's heartbeat (POST .../presence)")
PRESENCE_SEEN: Channel[PresenceSeenPayload] = Channel(
    "presence_seen", "last-seen times [identity, iso time, source] another process has persisted")
STREAMS: Channel[StreamsPayload] = Channel(
    "streams", "which identities hold an event stream on which worker (realtime/streams_elsewhere.py)")
ASKS: Channel[AsksPayload] = Channel(
    "asks", "an ask was made or changed state (domain/asks.py): those waiting on it re-read it "
            "(realtime/ask_waiters.py), and the expiry pass sleeps until the earliest deadline (scheduler.py)")
ALERTS: Channel[AlertsPayload] = Channel(
    "alerts", "an alert changed state (domain/alerts.py): the alert pass sleeps until the earliest snooze end "
              "or escalation (scheduler.py)")
GUARDS: Channel[GuardsPayload] = Channel(
    "guards", "a loop guard tripped (domain/guards.py): the guard pass sleeps until the earliest cooldown end "
              "(scheduler.py)")
LEASES: Channel[DuePayload] = Channel(
    "leases", "a task lease or a resource reservation got a new end (domain/leases.py, domain/reservations.py): "
              "the expiry pass sleeps until the earliest one (scheduler.py)")
BUS: Channel[BusPayload] = Channel(
    "bus", "local only: this process listens again after losing its connection, and may have missed "
           "announcements meanwhile")
