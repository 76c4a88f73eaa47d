"""Loop guards (issue 28): agents that cannot run away with each other unnoticed.

A loop is suspected when more than `LoopRule.messages` mailbox messages between two agents (both ways),
or among three agents passing mail round a ring (a→b→c→a; `_ring`), or chat messages in one channel from two or more agents, are written within `LoopRule.minutes`, with no
human writing to them meanwhile. Counted from the message tables themselves, so what two server
processes on one PostgreSQL store adds up; one active guard per scope (`mail:a,b`, `chat:<channel>`)
is held by a partial unique index, so two processes tripping at once make one.

When it trips (a `guard` event to its members and the human admins, in the sending unit):
- nothing is lost: the messages are stored and readable as ever;
- its members' wake pulses among themselves are coalesced to one per member while it holds
  (wake_signal.enters_wake asks `holds_pulse`), and so are their pushes (`push_allowed`, asked by the
  webhook feeder);
- each member's wake carries a `guard` item (what happened, what to do), and so does every human
  admin's (`wake_items`).
It clears when its cooldown ends (the scheduler's `clear_due`, a conditional update: one process logs
it), at once when a human writes to any member (`human_wrote`), or when an admin clears it
(`clear_by_admin`, POST /api/admin/guards/{id}/clear); each logs `guard_cleared`. `admin_list` shows the
active guards and those cleared in the last RECENT_HOURS hours, with who cleared them.

Settings: COORD_LOOP_MESSAGES (40), COORD_LOOP_MINUTES (2), COORD_LOOP_COOLDOWN_MINUTES (15) and the chat
fan-out's COORD_CHAT_WAKE_COOLDOWN_MINUTES (5; `chat_wakes`), carried per Store unit (unit.guard_rule). An
admin may set an identity's own `loopMessages` (1–LOOP_MESSAGES_MAX) and `loopMinutes` (1–LOOP_MINUTES_MAX)
(PATCH /api/admin/users/{id}; null: the deployment's): a guard over several identities uses the strictest of
their settings, the fewest messages within the longest window (`rule_for`).
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from .. import db, unit
from ..errors import Conflict, Invalid, NotFound
from ..events import log
from ..events.channels import GUARDS, GuardsPayload
from ..jsonstrict import JSONObject
from ..models import ChatWake, Guard
from ..timeutil import from_db, iso, to_db
from . import kinds
from .visibility import admin_identities

KINDS = ("mail_loop", "chat_loop")
CLEAR_BATCH = 100
LOOP_MESSAGES_MAX = 10_000  # an identity's loopMessages: 1 to this
LOOP_MINUTES_MAX = 1_440  # ... and loopMinutes: 1 to this (a day)
RECENT_HOURS = 24  # GET /api/admin/guards lists the guards cleared within this long
RECENT_LIMIT = 100  # ... at most this many, most recently cleared first


@dataclass(frozen=True)
class LoopRule:
    messages: int = 40  # more than this many within `minutes` trips a guard
    minutes: int = 2
    cooldown_minutes: int = 15  # how long a guard holds (unless a human writes first)
    chat_wake_minutes: int = 5  # a group channel wakes each agent member at most once per this long


def rule() -> LoopRule:
    """The running unit's rule (its Store's, from the settings), or the defaults."""
    current = unit.guard_rule()
    return current if isinstance(current, LoopRule) else LoopRule()


def rule_for(identities: Iterable[str]) -> LoopRule:
    """The rule over these identities: the deployment's, made stricter by any of theirs an admin set (the
    fewest messages, the longest window). One primary-key read (fixed SQL: it runs on every agent's send)."""
    current = rule()
    wanted = sorted(set(identities))
    rows = db.sql_rows(f'SELECT loop_messages, loop_minutes FROM "user" WHERE id IN ({", ".join("?" * len(wanted))}) '
                       "AND (loop_messages IS NOT NULL OR loop_minutes IS NOT NULL)", wanted) if wanted else []
    return _stricter(current, rows)


def _stricter(current: LoopRule, own: Iterable[tuple[int | None, int | None]]) -> LoopRule:
    """`current` made stricter by identities' own (loop_messages, loop_minutes): the fewest messages, the
    longest window."""
    messages, minutes = current.messages, current.minutes
    for own_messages, own_minutes in own:
        messages = min(messages, own_messages) if own_messages is not None else messages
        minutes = max(minutes, own_minutes) if own_minutes is not None else minutes
    return replace(current, messages=messages, minutes=minutes)


def threshold(value: object, field: str, most: int) -> int | None:
    """An identity's loopMessages or loopMinutes as an admin sends it: an integer 1–`most`, or null."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise Invalid(f"{field} must be an integer from 1 to {most}, or null")
    return value


def _members(text: str) -> list[str]:
    return [m for m in text.split(",") if m]


# --- tripping ----------------------------------------------------------------------------------

def after_mail(sender: str, recipient: str, agents: set[str], view: GuardView | None = None) -> None:
    """A message from `sender` to `recipient` was stored in this unit (`agents`: which of the two are agents).

    On every send, so cheap by construction: a human's send reads the active guards (fixed SQL, an index on
    cleared_at; almost always none); an agent's to an agent reads the pair's rule and when `recipient` last
    wrote to anyone (one statement, an index probe): no loop passes through this message unless that was
    within the window, so a one-way stream of mail never counts its window. Only then are the edges counted.
    The pair's guard and the rings through the pair are checked independently: a pair already held does not
    hide a ring it is part of (bench/RESULTS.md, "Loop guard cost on send")."""
    if sender == recipient:
        return
    if sender not in agents:
        human_wrote(sender, [recipient], view)
        return
    if recipient not in agents:
        return
    pair = sorted((sender, recipient))
    current, wrote_last = _rule_and_last_write(pair, recipient)
    if wrote_last is None or wrote_last <= db.now() - timedelta(minutes=current.minutes):
        return
    edges = _mail_edges(pair, current.minutes)
    if any(human and to in pair for (_frm, to), (_n, human) in edges.items()):
        return  # a human wrote to one of them meanwhile
    held = _active_scopes()
    scope = "mail:" + ",".join(pair)
    a, b = pair
    ab, ba = edges.get((a, b), (0, False))[0], edges.get((b, a), (0, False))[0]
    if scope not in held and ab and ba and ab + ba > current.messages:
        _trip("mail_loop", scope, pair, None, ab + ba, current)
    _ring(sender, recipient, edges, current, held)


def _rule_and_last_write(pair: list[str], recipient: str) -> tuple[LoopRule, datetime | None]:
    """One statement: the pair's rule (rule_for) and when `recipient` last wrote to anyone but itself (the
    (sender, created_at) index, newest first: the first row answers unless it wrote to itself). Both are
    agents, so both have a users row."""
    rows = db.sql_rows('SELECT loop_messages, loop_minutes, (SELECT created_at FROM message WHERE sender = ? '
                       'AND recipient <> ? ORDER BY created_at DESC LIMIT 1) FROM "user" WHERE id IN (?, ?)',
                       (recipient, recipient, *pair))
    last = from_db(rows[0][2]) if rows and rows[0][2] is not None else None
    return _stricter(rule(), [(m, n) for m, n, _last in rows]), last


Edges = dict[tuple[str, str], tuple[int, bool]]  # (sender, recipient) -> (messages, the sender is a human)


def _mail_edges(pair: list[str], minutes: int) -> Edges:
    """Who wrote to whom how often in the last `minutes`, of the mail written by or to either of `pair`: one
    query, walking the (sender, created_at) and (recipient, created_at) indexes."""
    since = to_db(db.now() - timedelta(minutes=minutes))
    a, b = pair
    rows = db.sql_rows(f"SELECT sender, recipient, COUNT(*), MAX(CASE WHEN {kinds.is_agent_sql('sender')} "
                       "THEN 0 ELSE 1 END) FROM message WHERE created_at > ? "
                       "AND (sender IN (?, ?) OR recipient IN (?, ?)) GROUP BY sender, recipient",
                       (since, a, b, a, b))
    return {(frm, to): (int(n), bool(human)) for frm, to, n, human in rows if frm != to}


def _ring(sender: str, recipient: str, edges: Edges, current: LoopRule, held: set[str]) -> None:
    """Small cycles: three agents passing mail round a ring (a→b→c→a), none of them writing back, trip a
    guard like a pair (scope `mail:a,b,c`, all three held and told). Only rings of three are found (larger
    ones would need a walk over everyone's recent mail): the message `sender`→`recipient` closes one when
    `recipient` wrote to some agent c and c to `sender` within the window. Counted from `edges` (the pair's
    one query): every message among the three; the threshold is the strictest of theirs, the window the
    pair's. A second query (has a human written to c?) runs only for a ring over its threshold. Runs whether
    or not a guard holds the pair (`held`: the scopes of the active guards): a ring trips on its own count."""
    onward = {to for (frm, to) in edges if frm == recipient and to not in (sender, recipient)}
    back = {frm for (frm, to), (_n, human) in edges.items() if to == sender and not human
            and frm not in (sender, recipient)}
    for third in sorted(onward & back):
        members = sorted((sender, recipient, third))
        count = sum(n for (frm, to), (n, _human) in edges.items() if frm in members and to in members)
        ring_rule = replace(rule_for(members), minutes=current.minutes)
        scope = "mail:" + ",".join(members)
        if count > ring_rule.messages and scope not in held and not _human_wrote_to(third, current.minutes):
            _trip("mail_loop", scope, members, None, count, ring_rule)
            return


def _human_wrote_to(identity: str, minutes: int) -> bool:
    since = to_db(db.now() - timedelta(minutes=minutes))
    return bool(db.sql_rows(f"SELECT 1 FROM message WHERE recipient = ? AND created_at > ? "
                            f"AND NOT {kinds.is_agent_sql('sender')} LIMIT 1", (identity, since)))


def after_chat(sender: str, channel_id: str, members: list[str], sender_is_agent: bool) -> None:
    """A chat message from `sender` was stored in `channel_id` in this unit."""
    if not sender_is_agent:
        human_wrote(sender, [m for m in members if m != sender])
        return
    scope = f"chat:{channel_id}"
    if _active(scope):
        return
    current = rule_for(members)
    since = to_db(db.now() - timedelta(minutes=current.minutes))
    rows = db.sql_rows(f"SELECT sender, COUNT(*), MAX(CASE WHEN {kinds.is_agent_sql('sender')} THEN 0 ELSE 1 END) "
                       "FROM chat_message WHERE channel = ? AND created_at > ? AND deleted_at IS NULL "
                       "GROUP BY sender", (channel_id, since))
    senders = sorted(r[0] for r in rows)
    count = sum(int(r[1]) for r in rows)
    humans = any(int(r[2]) for r in rows)
    if len(senders) >= 2 and not humans and count > current.messages:
        _trip("chat_loop", scope, senders, channel_id, count, current)


def _active(scope: str) -> bool:
    return bool(db.sql_rows("SELECT 1 FROM guard WHERE scope = ? AND cleared_at IS NULL LIMIT 1", (scope,)))


def _active_scopes() -> set[str]:
    """The scopes of the active guards (few: one per suspected loop)."""
    return {scope for (scope,) in db.sql_rows("SELECT scope FROM guard WHERE cleared_at IS NULL")}


# The guards not cleared: what follows `FROM guard` (and `view_of` reads).
UNCLEARED = "WHERE cleared_at IS NULL"


def _uncleared(holding_at: datetime | None = None, view: GuardView | None = None) -> list[Guard]:
    """The guards not cleared yet (with `holding_at`: only those still holding then), oldest first. Fixed SQL
    (db.sql_models): it runs on every send, where composing the query with Peewee cost more than running it.
    From `view` instead while it is current."""
    if view is not None and view.current():
        return [guard for guard in view.guards if holding_at is None or guard.until > to_db(holding_at)]
    if holding_at is None:
        return db.sql_models(Guard, UNCLEARED + " ORDER BY id")
    return db.sql_models(Guard, UNCLEARED + " AND until > ? ORDER BY id", (to_db(holding_at),))


# Guard writes by this process, counted: a GuardView read before one of them is stale.
_writes = 0


def _writing() -> None:
    global _writes
    _writes += 1


@dataclass(frozen=True)
class GuardView:
    """The guards not cleared, read once for sends that run together in one transaction (the merged batch
    of messages._send_many), each of which would otherwise read them again (after_mail, holds_pulse). It
    stays current until this process writes a guard (a trip, a clear, a pulse taken); from then on they
    are read afresh. Guards another process commits meanwhile are missed, as they would be by a read made
    a moment earlier."""

    guards: tuple[Guard, ...]
    writes: int

    def current(self) -> bool:
        return self.writes == _writes


def view() -> GuardView:
    return GuardView(tuple(_uncleared()), _writes)


def view_of(rows: Iterable[db.Row]) -> GuardView:
    """The view from rows another statement read in this unit: `db.every_column(Guard)` of the guards
    `FROM guard UNCLEARED`, in any order."""
    return GuardView(tuple(sorted((db.model_from_row(Guard, row) for row in rows), key=lambda guard: guard.id)),
                     _writes)


def _admins() -> list[str]:
    """The humans who administer the agents: admins that are not agents themselves."""
    admins = admin_identities()
    return sorted(admins - kinds.agents_among(admins))


def _audience(members: Iterable[str]) -> list[str]:
    return sorted(set(members) | set(_admins()))


def _trip(kind: str, scope: str, members: list[str], channel_id: str | None, count: int, current: LoopRule) -> None:
    now = db.now()
    until = now + timedelta(minutes=current.cooldown_minutes)
    _writing()
    inserted = (Guard.insert(kind=kind, scope=scope, members=",".join(members), channel_id=channel_id,
                             messages=count, minutes=current.minutes, tripped_at=to_db(now), until=to_db(until),
                             pulsed="", pushed="")
                .on_conflict_ignore().as_rowcount().execute())
    if not inserted:  # another process tripped it first
        return
    guard = Guard.get((Guard.scope == scope) & Guard.cleared_at.is_null())
    log.append("guard", {"type": "guard", "change": "tripped", "guard": guard_json(guard)}, to=_audience(members))
    due: GuardsPayload = {"dueAt": iso(until)}
    db.after_commit(GUARDS, due)


# --- clearing ----------------------------------------------------------------------------------

def human_wrote(human: str, to: Iterable[str], view: GuardView | None = None) -> int:
    """A human wrote to these identities: every active guard holding one of them clears now."""
    targets = set(to)
    return sum(_clear(guard, human) for guard in _uncleared(view=view) if targets & set(_members(guard.members)))


def _clear(guard: Guard, by: str | None) -> int:
    now = to_db(db.now())
    _writing()
    done = (Guard.update(cleared_at=now, cleared_by=by)
            .where((Guard.id == guard.id) & Guard.cleared_at.is_null()).execute())
    if done:
        guard.cleared_at, guard.cleared_by = now, by
        log.append("guard_cleared", {"type": "guard_cleared", "change": "cleared", "guard": guard_json(guard)},
                   to=_audience(_members(guard.members)))
    return int(done)


def clear_due() -> int:
    """A scheduler pass: guards whose cooldown has ended clear (each by a conditional update, so of several
    processes one logs it). Returns how many this unit cleared."""
    due = list(Guard.select().where(Guard.cleared_at.is_null() & (Guard.until <= to_db(db.now())))
               .order_by(Guard.until).limit(CLEAR_BATCH))
    return sum(_clear(guard, None) for guard in due)


def clear_by_admin(guard_id: int, admin: str) -> JSONObject:
    """An admin clears a guard now (404 unknown, 409 already cleared: by a human, an admin or its cooldown);
    `guard_cleared` is logged in this transaction, as when a human writes."""
    guard = Guard.get_or_none(Guard.id == guard_id)
    if guard is None:
        raise NotFound("No such guard")
    if guard.cleared_at is None and _clear(guard, admin):
        return guard_json(guard)
    guard = Guard.get_by_id(guard_id)  # another process (or a human's message) cleared it first
    by = f"by {guard.cleared_by}" if guard.cleared_by else "by its cooldown"
    raise Conflict(f"The guard is already cleared ({by} at {iso(guard.cleared_at)})")


def next_due() -> datetime | None:
    until = Guard.select(Guard.until).where(Guard.cleared_at.is_null()).order_by(Guard.until).limit(1).scalar()
    return from_db(until) if until is not None else None


# --- coalescing ----------------------------------------------------------------------------------

def _holding(a: str, b: str, view: GuardView | None) -> Guard | None:
    """The active guard holding both identities, if any (active guards are few: read them all)."""
    for guard in _uncleared(db.now(), view):
        members = _members(guard.members)
        if a in members and b in members:
            return guard
    return None


def _take_once(guard: Guard, column: str, identity: str) -> bool:
    """Record that `identity` had its one pulse (or push) of this guard; False when it had it already."""
    field = getattr(Guard, column)
    taken = _members(getattr(guard, column))
    if identity in taken:
        return False
    _writing()
    return bool(Guard.update({field: ",".join([*taken, identity])})
                .where((Guard.id == guard.id) & (field == getattr(guard, column))).execute())


def holds_pulse(identity: str, actor: str, view: GuardView | None = None) -> bool:
    """Whether a pulse to `identity` caused by `actor` is held back by a guard (its one pulse used)."""
    guard = _holding(identity, actor, view)
    return guard is not None and not _take_once(guard, "pulsed", identity)


def push_allowed(sender: str | None, identity: str, at: datetime) -> bool:
    """Whether a push to `identity` of what `sender` wrote at `at` goes out (the webhook feeder asks, maybe
    later): held when a guard holding both held at `at` and `identity` had its one push of it."""
    if not sender or sender == identity:
        return True
    stamp = to_db(at)
    for guard in Guard.select().where((Guard.tripped_at <= stamp) & (Guard.until > stamp)
                                      & (Guard.cleared_at.is_null() | (Guard.cleared_at > stamp))):
        members = _members(guard.members)
        if identity in members and sender in members:
            return _take_once(guard, "pushed", identity)
    return True


def held_since(at: datetime) -> bool:
    """Whether any guard held at `at` or since (the webhook feeder skips its lookups otherwise)."""
    return Guard.select().where(Guard.cleared_at.is_null() | (Guard.cleared_at > to_db(at))).exists()


# --- chat fan-out ------------------------------------------------------------------------------

def chat_wakes(channel_id: str, agents: list[str]) -> list[str]:
    """Of a group channel's agent members, those its new message may wake: each at most once per
    `chat_wake_minutes` per channel (a conditional update or insert per member, so processes agree)."""
    now = db.now()
    before = to_db(now - timedelta(minutes=rule().chat_wake_minutes))
    woken = []
    for identity in agents:
        moved = (ChatWake.update(woke_at=to_db(now))
                 .where((ChatWake.channel == channel_id) & (ChatWake.identity == identity)
                        & (ChatWake.woke_at <= before)).execute())
        if not moved:
            moved = (ChatWake.insert(channel=channel_id, identity=identity, woke_at=to_db(now))
                     .on_conflict_ignore().as_rowcount().execute())
        if moved:
            woken.append(identity)
    return woken


# --- reading -----------------------------------------------------------------------------------

def guard_json(guard: Guard) -> JSONObject:
    members = _members(guard.members)
    return {"id": guard.id, "kind": guard.kind, "members": members, "channelId": guard.channel_id,
            "messages": guard.messages, "minutes": guard.minutes, "trippedAt": iso(guard.tripped_at),
            "until": iso(guard.until), "clearedAt": iso(guard.cleared_at), "clearedBy": guard.cleared_by,
            "summary": _summary(guard, members)}


def _summary(guard: Guard, members: list[str]) -> str:
    where = " in chat" if guard.kind == "chat_loop" else ""
    return (f"loop suspected between {_names(members)}{where}: {guard.messages} messages in "
            f"{guard.minutes} min")


def _names(members: list[str]) -> str:
    return members[0] if len(members) == 1 else ", ".join(members[:-1]) + " and " + members[-1]


def active(now: datetime | None = None) -> list[JSONObject]:
    """Guards holding now, oldest first (doctor, GET /api/admin/guards)."""
    at = to_db(now or db.now())
    return [guard_json(g) for g in Guard.select().where(Guard.cleared_at.is_null() & (Guard.until > at))
            .order_by(Guard.tripped_at, Guard.id)]


def admin_list() -> JSONObject:
    """GET /api/admin/guards: the guards holding now (oldest first) and those cleared within RECENT_HOURS,
    most recently cleared first, each with `clearedBy` (null: its cooldown ran out)."""
    since = to_db(db.now() - timedelta(hours=RECENT_HOURS))
    cleared = (Guard.select().where(Guard.cleared_at.is_null(False) & (Guard.cleared_at > since))
               .order_by(Guard.cleared_at.desc(), Guard.id.desc()).limit(RECENT_LIMIT))
    return {"active": active(), "cleared": [guard_json(g) for g in cleared]}


def wake_items(identity: str) -> tuple[list[JSONObject], datetime | None]:
    """The `guard` wake items of `identity`: the active guards it is in, and every active guard when it
    is a human admin; and when the first of them ends by itself (the wake cache's expiry)."""
    now = db.now()
    query = Guard.select().where(Guard.cleared_at.is_null() & (Guard.until > to_db(now)))
    guards = list(query.order_by(Guard.tripped_at, Guard.id))
    if not guards:
        return [], None
    overseer = identity in _admins()
    items = []
    for guard in guards:
        members = _members(guard.members)
        if identity in members:
            others = [m for m in members if m != identity]
            action = (f"Your exchange with {_names(others)} looks like a loop: stop replying to acknowledgements, "
                      f"finish or hand the work to a human. Wake pulses and pushes from them are held to one "
                      f"until {iso(guard.until)} or until a human writes to you; nothing is lost.")
        elif overseer:
            action = (f"Agents you administer may be looping: read their exchange and write to one of them to "
                      f"clear the guard, or let it clear by itself at {iso(guard.until)}.")
        else:
            continue
        items.append({"source": "guard", "id": f"guard-{guard.id}", "guardId": guard.id, "kind": guard.kind,
                      "members": members, "summary": _summary(guard, members).capitalize(), "action": action,
                      "priority": "high", "until": iso(guard.until), "projectId": None, "ephemeral": False,
                      "_at": from_db(guard.tripped_at)})
    ends = min(from_db(g.until) for g in guards)
    return items, ends
