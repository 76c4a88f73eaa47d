"""The scheduler: background passes over what time alone makes due.

- Recurring tasks: due templates run every `settings.scheduler_interval_seconds` (and at start, so
  downtime is caught up at once). Each instant's task is guarded by a unique key, so concurrent passes
  of several processes never create a duplicate. Doctor reads `last_tick_at`, `last_lag_seconds` and
  `overdue_templates()`.
- Ask deadlines: open asks whose deadline has passed expire (domain/asks.expire_due) at that interval
  too, and at the earliest open deadline when it comes sooner: the pass hears of new deadlines on the
  bus (ASKS, from any process) and sleeps until the earliest one. Every process runs it; each ask's
  expiry is a conditional update, so exactly one pass (one process) expires it and logs its event.
  "Now" is the injected clock's (tests advance a FrozenClock).
- Loop guards (domain/guards.py): guards whose cooldown has ended clear (clear_due), in the same loop
  and the same way: the pass hears of trips on the bus (GUARDS) and sleeps until the earliest end; each
  clearing is a conditional update, so one process makes it and logs `guard_cleared`.
- Alert snoozes and escalations: snoozed alerts whose end has come reopen (domain/alerts.unsnooze_due),
  open alerts past their escalation time escalate (escalate_due), in the same loop and the same way: the
  pass hears of those times on the bus (ALERTS) and sleeps until the earliest of them and the ask
  deadlines; each change is a conditional update, so one process makes it.
- Alert tallies (domain/alert_tallies.py): the firings merged ingest batches counted on their alerts fold into
  the alerts' rows `alert_fold_seconds` after this process's ingests, and on every pass (the tallies a process
  left when it stopped). Every process may fold; each tally is claimed by exactly one.
- Task leases and resource reservations: leases that ran out return their tasks to ready
  (domain/lease_changes.expire_due), reservations that ran out end (domain/reservations.expire_due), in the same
  loop and the same way (the bus channel LEASES announces new ends; conditional updates pick one process).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime

from .domain import alert_tallies, alerts, asks, buzz, guards, lease_changes, leases, recurring, reservations
from .errors import log_background_failure
from .events.channels import (ALERTS, ASKS, BUS, GUARDS, LEASES, AlertsPayload, AsksPayload, DuePayload,
                              GuardsPayload)
from .timeutil import from_db, parse_iso

log = logging.getLogger("coord.scheduler")


class Scheduler:
    def __init__(self, coord, on_escalated: Callable[[int], None] = lambda _count: None):
        self.coord = coord
        self._on_escalated = on_escalated  # counts escalations (the metrics' counter)
        self.last_tick_at: datetime | None = None  # the injected clock's time of the last finished pass
        self.last_lag_seconds: float = 0.0  # how late the most overdue instant of that pass was handled
        self._task: asyncio.Task | None = None
        self._asks_task: asyncio.Task | None = None
        self._asks_changed = asyncio.Event()
        self._next_deadline: datetime | None = None  # the earliest open deadline the last pass saw
        self._unsubscribe: list = []
        self.asks_expired = 0  # by this process's passes
        self._next_alert_due: datetime | None = None  # the earliest snooze end the last pass saw
        self.alerts_unsnoozed = 0  # by this process's passes
        self.alerts_escalated = 0  # by this process's passes
        self._next_guard_due: datetime | None = None  # the earliest guard cooldown end the last pass saw
        self.guards_cleared = 0  # by this process's passes
        self._next_lease_due: datetime | None = None  # the earliest lease or reservation end the last pass saw
        self.leases_expired = 0  # by this process's passes
        self.reservations_expired = 0  # by this process's passes
        self._ingested = asyncio.Event()  # this process committed an ingest: its tallies fold soon
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fold_task: asyncio.Task | None = None
        self.tallies_folded = 0  # by this process's folds

    @property
    def interval(self) -> float:
        return self.coord.settings.scheduler_interval_seconds

    def lag_seconds(self, now: datetime) -> float | None:
        """Time since the last pass minus the interval (admin doctor and coord_scheduler_lag_seconds):
        above 0 when a pass is overdue; None before the first pass."""
        if self.last_tick_at is None:
            return None
        return (now - from_db(self.last_tick_at)).total_seconds() - self.interval

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.coord.store.on_write.append(self._heard_write)
        self._fold_task = self.coord.spawn(self._run_folds(), "alert-folds")
        self._task = self.coord.spawn(self._run(), "scheduler")
        self._unsubscribe = [self.coord.bus.subscribe(ASKS, self._on_ask),
                             self.coord.bus.subscribe(ALERTS, self._on_alert),
                             self.coord.bus.subscribe(GUARDS, self._on_guard),
                             self.coord.bus.subscribe(LEASES, self._on_lease),
                             self.coord.bus.subscribe(BUS, lambda _payload: self._asks_changed.set())]
        self._asks_task = self.coord.spawn(self._run_asks(), "ask-expiry")

    async def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        if self._heard_write in self.coord.store.on_write:
            self.coord.store.on_write.remove(self._heard_write)
        for task in (self._task, self._asks_task, self._fold_task):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self._task = self._asks_task = self._fold_task = None

    async def tick(self) -> dict:
        """Run one pass now. Returns {"created": n, "errors": m}."""
        result = await self.coord.store.write_alone(recurring.run_due)
        await self.fold_tallies()
        self.last_tick_at = self.coord.clock.now()
        self.last_lag_seconds = result["lagSeconds"]
        return {"created": result["created"], "errors": result["errors"]}

    async def overdue_templates(self) -> dict:
        """Templates late enough that the scheduler is not keeping up (or failing): {"overdue", "examples"}."""
        return await self.coord.store.read(recurring.overdue, self.coord.clock.now(), self.interval)

    async def _run(self) -> None:
        stopping = self.coord.shutting_down
        while not stopping.is_set():
            try:
                await self.tick()
            except Exception:
                log_background_failure(log, "scheduler pass failed")
            try:
                await asyncio.wait_for(stopping.wait(), timeout=self.interval)
            except asyncio.TimeoutError:
                pass

    # --- alert tallies -------------------------------------------------------------------------
    async def fold_tallies(self) -> int:
        """Fold every pending alert tally now; returns how many this process folded."""
        folded = await self._until_done(alert_tallies.fold, alert_tallies.FOLD_BATCH)
        self.tallies_folded += folded
        return folded

    def _heard_write(self, fn: Callable[..., object], _announced: bool) -> None:
        """store.on_write, on the writer thread: an ingest committed (merged ingests leave tallies). Reading the
        event's flag from this thread is safe; setting it is the loop's (at most a few sets queued at once)."""
        if fn is buzz.ingest and not self._ingested.is_set() and self._loop is not None:
            self._loop.call_soon_threadsafe(self._ingested.set)

    async def _run_folds(self) -> None:
        stopping = self.coord.shutting_down
        while not stopping.is_set():
            await self._ingested.wait()
            await asyncio.sleep(self.coord.settings.alert_fold_seconds)  # a storm's batches fold together
            self._ingested.clear()
            try:
                await self.fold_tallies()
            except Exception:
                log_background_failure(log, "folding alert tallies failed")

    # --- ask deadlines -------------------------------------------------------------------------
    async def expire_asks(self) -> int:
        """One expiry pass now (until no due ask is left); returns how many asks this process expired."""
        expired = await self._until_done(asks.expire_due, asks.EXPIRE_BATCH)
        self.asks_expired += expired
        self._next_deadline = await self.coord.store.read(asks.next_deadline)
        return expired

    async def unsnooze_alerts(self) -> int:
        """One alert pass now: snoozes that ended, then escalations due (each until none is left). Returns how
        many alerts this process reopened."""
        reopened = await self._until_done(alerts.unsnooze_due)
        self.alerts_unsnoozed += reopened
        escalated = await self._until_done(alerts.escalate_due)
        self.alerts_escalated += escalated
        if escalated:
            self._on_escalated(escalated)
        self._next_alert_due = await self.coord.store.read(alerts.next_due)
        return reopened

    async def _until_done(self, unit, batch: int = alerts.UNSNOOZE_BATCH) -> int:
        total = 0
        while True:
            done = await self.coord.store.write_alone(unit)
            total += done
            if done < batch:
                return total

    async def clear_guards(self) -> int:
        """One guard pass now: guards whose cooldown ended clear. Returns how many this process cleared."""
        cleared = 0
        while True:
            done = await self.coord.store.write_alone(guards.clear_due)
            cleared += done
            if done < guards.CLEAR_BATCH:
                break
        self.guards_cleared += cleared
        self._next_guard_due = await self.coord.store.read(guards.next_due)
        return cleared

    def _on_guard(self, payload: GuardsPayload) -> None:
        """A guard tripped that ends before the time the pass sleeps towards: wake it."""
        at = _instant(payload.get("dueAt") if isinstance(payload, dict) else None)
        if at is not None and (self._next_guard_due is None or at < self._next_guard_due):
            self._next_guard_due = at
            self._asks_changed.set()

    async def expire_leases(self) -> tuple[int, int]:
        """One lease pass now: task leases, then reservations, that ran out (each until none is left). Returns
        (leases, reservations) this process expired."""
        tasks = await self._until_done(lease_changes.expire_due, leases.EXPIRE_BATCH)
        reserved = await self._until_done(reservations.expire_due, reservations.EXPIRE_BATCH)
        self.leases_expired += tasks
        self.reservations_expired += reserved
        due = [at for at in (await self.coord.store.read(lease_changes.next_due),
                             await self.coord.store.read(reservations.next_due)) if at is not None]
        self._next_lease_due = min(due) if due else None
        return tasks, reserved

    def _on_lease(self, payload: DuePayload) -> None:
        """A lease or reservation ending before the time the pass sleeps towards: wake it."""
        at = _instant(payload.get("dueAt") if isinstance(payload, dict) else None)
        if at is not None and (self._next_lease_due is None or at < self._next_lease_due):
            self._next_lease_due = at
            self._asks_changed.set()

    def _on_alert(self, payload: AlertsPayload) -> None:
        """A snooze end or escalation before the time the pass sleeps towards: wake it."""
        at = _instant(payload.get("dueAt") if isinstance(payload, dict) else None)
        if at is not None and (self._next_alert_due is None or at < self._next_alert_due):
            self._next_alert_due = at
            self._asks_changed.set()

    def _on_ask(self, payload: AsksPayload) -> None:
        """A new open ask with a deadline earlier than the one the pass sleeps towards: wake it."""
        deadline = payload.get("deadline") if isinstance(payload, dict) else None
        if payload.get("status") != "open" or not isinstance(deadline, str):
            return
        try:
            at = parse_iso(deadline)
        except ValueError:
            return
        if self._next_deadline is None or at < self._next_deadline:
            self._next_deadline = at
            self._asks_changed.set()

    def _asks_delay(self) -> float:
        """Seconds until the next pass: the interval, or less when the earliest deadline comes sooner (by
        the injected clock, so a test's FrozenClock never makes it wait longer than the interval)."""
        due = [at for at in (self._next_deadline, self._next_alert_due, self._next_guard_due, self._next_lease_due)
               if at is not None]
        if not due:
            return self.interval
        until = (min(due) - self.coord.clock.now()).total_seconds()
        return max(0.02, min(self.interval, until))  # (a floor: a pass that keeps failing never spins)

    async def _run_asks(self) -> None:
        stopping = self.coord.shutting_down
        while not stopping.is_set():
            self._asks_changed.clear()
            try:
                await self.expire_asks()
            except Exception:
                log_background_failure(log, "ask expiry pass failed")
            try:
                await self.unsnooze_alerts()
            except Exception:
                log_background_failure(log, "alert snooze pass failed")
            try:
                await self.clear_guards()
            except Exception:
                log_background_failure(log, "guard pass failed")
            try:
                await self.expire_leases()
            except Exception:
                log_background_failure(log, "lease expiry pass failed")
            changed = asyncio.ensure_future(self._asks_changed.wait())
            stop = asyncio.ensure_future(stopping.wait())
            try:
                await asyncio.wait([changed, stop], timeout=self._asks_delay(),
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                changed.cancel()
                stop.cancel()


def _instant(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return parse_iso(value)
    except ValueError:
        return None
