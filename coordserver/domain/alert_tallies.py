"""Alert tallies: the firings merged ingest batches counted on an alert, pending in buzz_alert_tally until a pass
folds them into the alert's row (models.BuzzAlertTally).

In an alert storm every batch of every worker fired into the same alert and the same webhook, and updating those
two rows made the batches of all processes queue on their locks, one commit at a time. A batch now takes the
rows FOR SHARE (a state change, which updates the alert, still waits for it and is waited for) and inserts one
tally row per alert; nothing it writes is a row another batch writes.

What a tally holds and how a read adds it:
- `count`: the alert's count plus every pending tally's firings;
- `lastAt`, `lastEventId` and `title`: those of the newest pending tally (by its event id) when it is newer than
  the row's; a batch counts only on an alert whose latest firing no silence hid and whose routing is its
  webhook's (buzz._decide), so a fold changes no other column;
- a webhook's `lastHitAt`: the latest of its row's and its pending tallies'.
Every read that answers or logs an alert goes through `select` / `get` here (one statement, one snapshot, so a
fold committing meanwhile is seen entirely or not at all), and orders by `last_activity`.

`fold` (a write unit) claims pending tallies by deleting them and adds them to their rows, webhooks before
alerts, each in id order: the order a lone ingest and a batch lock them in. Every process may run it; the
DELETE ... RETURNING gives each tally to exactly one. The scheduler runs it a moment after this process's
ingests and on every pass (scheduler.py).
"""
from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, NamedTuple

import peewee as pw

from .. import db
from ..models import BuzzAlert, BuzzAlertTally, BuzzWebhook
from ..timeutil import from_db, to_db

FOLD_BATCH = 2000  # tallies one fold claims at most (the pass repeats while it finds that many)

_Tally = BuzzAlertTally.alias("tally")


def _newer() -> pw.Expression:
    """The outer alert's pending tallies newer than its row's latest firing."""
    newer: pw.Expression = (_Tally.alert_id == BuzzAlert.id) & (
        _Tally.last_event_id > pw.fn.COALESCE(BuzzAlert.last_event_id, 0))
    return newer


def _newest(column: pw.Field[Any]) -> pw.ModelSelect[Any]:
    return _Tally.select(column).where(_newer()).order_by(_Tally.last_event_id.desc()).limit(1)


def _pending_columns() -> list[pw.Node]:
    firings = _Tally.select(pw.fn.SUM(_Tally.firings)).where(_Tally.alert_id == BuzzAlert.id)
    return [firings.alias("tally_firings"), _newest(_Tally.last_event_id).alias("tally_event"),
            _newest(_Tally.last_at).alias("tally_at"), _newest(_Tally.title).alias("tally_title")]


def last_activity() -> pw.ColumnBase:
    """An alert's lastAt with its pending tallies: what listings and wake order by."""
    return pw.fn.COALESCE(_newest(_Tally.last_at), BuzzAlert.last_at)


def select() -> pw.ModelSelect[BuzzAlert]:
    """Alerts with their pending tallies; `rows` adds them in."""
    return BuzzAlert.select(BuzzAlert, *_pending_columns())


def rows(query: Iterable[BuzzAlert]) -> list[BuzzAlert]:
    return [_added(alert) for alert in query]


def get(alert_id: int) -> BuzzAlert:
    """The alert by id, as a read answers it (raises BuzzAlert.DoesNotExist)."""
    return _added(select().where(BuzzAlert.id == alert_id).get())


def _added(alert: BuzzAlert) -> BuzzAlert:
    alert.count += int(getattr(alert, "tally_firings", None) or 0)
    newest = getattr(alert, "tally_event", None)
    if newest is not None:
        alert.last_event_id = newest
        alert.last_at = BuzzAlert.last_at.python_value(getattr(alert, "tally_at"))
        alert.title = getattr(alert, "tally_title")
        alert.silenced_by = None  # a batch counts only on an alert no silence hid (buzz._decide)
    return alert


# --- webhooks ----------------------------------------------------------------------------------

def _pending_hit() -> pw.Node:
    return (_Tally.select(pw.fn.MAX(_Tally.last_at)).where(_Tally.webhook_id == BuzzWebhook.id)
            .alias("tally_hit"))


def webhooks(query: pw.ModelSelect[BuzzWebhook]) -> pw.ModelSelect[BuzzWebhook]:
    """`query` (of BuzzWebhook rows) with each webhook's pending last hit; `hit` adds it in."""
    return query.select_extend(_pending_hit())


def webhook(webhook_id: int) -> BuzzWebhook:
    """The webhook by id, as a read answers it (its lastHitAt with its pending tallies)."""
    return hit(webhooks(BuzzWebhook.select()).where(BuzzWebhook.id == webhook_id).get())


def hit(webhook: BuzzWebhook) -> BuzzWebhook:
    pending = getattr(webhook, "tally_hit", None)
    if pending is not None:
        pending = from_db(BuzzWebhook.last_hit_at.python_value(pending))
        stored = from_db(webhook.last_hit_at)
        if stored is None or pending > stored:
            webhook.last_hit_at = to_db(pending)
    return webhook


# --- written by a merged batch -----------------------------------------------------------------

class Tally(NamedTuple):
    alert_id: int
    webhook_id: int
    firings: int
    last_at: datetime
    last_event_id: int
    title: str


# What an alert takes from its webhook at each firing (alerts.record). The columns update_webhook carries to the
# alerts itself (runbook, escalateTo: buzz._CARRIED) are the webhook's already.
ROUTING = ("app_name", "for_users", "wake_agent", "notify_agent")


def countable(alert: str, webhook: str, same: str = "IS NOT DISTINCT FROM") -> str:
    """SQL: a batch counts on alert `alert` of webhook `webhook` (table aliases) only while the alert is as the
    batch read it: neither resolved nor flapping nor silenced, its routing its webhook's (else the batch runs
    unmerged, and `ingest` changes what it must). `same`: the null-safe equality (SQLite: IS)."""
    routed = " AND ".join(f"{alert}.{column} {same} {webhook}.{column}" for column in ROUTING)
    return f"{alert}.state <> 'resolved' AND NOT {alert}.flapping AND {alert}.silenced_by IS NULL AND {routed}"


# SQLite; PostgreSQL's merged statement does the same (buzz._merged_ingest_sql's `al` and `c`).
_SQLITE_TALLY_SQL = ("INSERT INTO buzz_alert_tally (alert_id, webhook_id, firings, last_at, last_event_id, title) "
                     "SELECT a.id, a.webhook_id, ?, ?, ?, ? FROM buzz_alert a JOIN buzz_webhook w ON w.id = a.webhook_id "
                     f"WHERE a.id = ? AND {countable('a', 'w', 'IS')}")


def add_sqlite(tallies: list[Tally]) -> bool:
    """Inserts the batch's tallies; False when an alert is no longer countable (the batch then runs unmerged)."""
    for tally in tallies:
        cursor = db.sql_execute(_SQLITE_TALLY_SQL, (tally.firings, to_db(tally.last_at), tally.last_event_id,
                                                    tally.title, tally.alert_id))
        if cursor.rowcount != 1:
            return False
    return True


# --- folding -------------------------------------------------------------------------------------

_CLAIM_SQL = ("DELETE FROM buzz_alert_tally WHERE id IN (SELECT id FROM buzz_alert_tally ORDER BY id LIMIT ?) "
              "RETURNING alert_id, webhook_id, firings, last_at, last_event_id, title")
_FOLD_HIT_SQL = "UPDATE buzz_webhook SET last_hit_at = ? WHERE id = ? AND (last_hit_at IS NULL OR last_hit_at < ?)"
_FOLD_ALERT_SQL = ("UPDATE buzz_alert SET count = count + ?, "
                   "last_at = CASE WHEN COALESCE(last_event_id, 0) < ? THEN ? ELSE last_at END, "
                   "title = CASE WHEN COALESCE(last_event_id, 0) < ? THEN ? ELSE title END, "
                   "last_event_id = CASE WHEN COALESCE(last_event_id, 0) < ? THEN ? ELSE last_event_id END "
                   "WHERE id = ?")


def fold(limit: int = FOLD_BATCH) -> int:
    """Claims up to `limit` pending tallies and adds them to their alerts and webhooks; returns how many."""
    claimed = [Tally(a, w, f, from_db(at), e, t) for a, w, f, at, e, t in db.sql_rows(_CLAIM_SQL, (limit,))]
    firings: dict[int, int] = {}
    newest: dict[int, Tally] = {}
    hits: dict[int, datetime] = {}
    for tally in claimed:
        firings[tally.alert_id] = firings.get(tally.alert_id, 0) + tally.firings
        if tally.alert_id not in newest or tally.last_event_id > newest[tally.alert_id].last_event_id:
            newest[tally.alert_id] = tally
        if tally.webhook_id not in hits or tally.last_at > hits[tally.webhook_id]:
            hits[tally.webhook_id] = tally.last_at
    for webhook_id in sorted(hits):
        at = to_db(hits[webhook_id])
        db.sql_execute(_FOLD_HIT_SQL, (at, webhook_id, at))
    for alert_id in sorted(newest):
        last = newest[alert_id]
        db.sql_execute(_FOLD_ALERT_SQL, (firings[alert_id], last.last_event_id, to_db(last.last_at),
                                         last.last_event_id, last.title, last.last_event_id, last.last_event_id,
                                         alert_id))
    return len(claimed)


def pending() -> int:
    """Tallies not yet folded (tests)."""
    return int(BuzzAlertTally.select().count())
