"""Prometheus metrics (GET /api/metrics) with the official client library, prometheus-client.

Three sources make one scrape:
- process figures, kept by prometheus-client objects made once per process (`process_metrics()`):
  requests and their latency (hot paths included), events logged, push outcomes, wake pulses, open
  streams and notebook sockets, `coord_info`;
- app figures read at scrape time (`AppMetrics`): row counts from one read unit on the Store, cached
  at most 2 s on the app's clock and refreshed in the background by a scrape that finds them over 1 s
  old (so scrapes a second or less apart never wait for the Store); scheduler and event-loop lag as
  admin doctor computes them;
- the standard process_* and python_* collectors (of the process answering).

A scrape renders them with `Exposition` (metrics_text.py); the labelled counters and histograms, and in
multi-process mode the shared files, are parts that re-render only the series whose values changed since
the last scrape (metrics_children.py, metrics_files.py). The text is what prometheus-client's
generate_latest writes for `ProcessMetrics.sources` (the library's own collectors), byte for byte (tested).

Several server processes on one host (`serve --workers`) share COORD_METRICS_DIR: prometheus-client's
multi-process mode, where each process writes its values to files there and a scrape of any process
adds them up (open connections as `livesum`, so a dead process's streams drop out once the supervisor
calls `mark_process_dead`). prometheus-client picks that mode when it is imported, from
PROMETHEUS_MULTIPROC_DIR, so this module sets that variable before importing it.
"""
from __future__ import annotations

import asyncio
import collections
import glob
import logging
import os
import threading
from datetime import timedelta
from time import perf_counter
from typing import TYPE_CHECKING, Any, Iterable

from .errors import log_background_failure
from .settings import metrics_dir

log = logging.getLogger("coord")

_prepared_dir: str | None = None  # the supervisor's directory (prepare_dir), for mark_process_dead


_ACK_BUCKETS = (30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600)


def _multiprocess_dir() -> str | None:
    """COORD_METRICS_DIR, handed on to prometheus-client (which reads PROMETHEUS_MULTIPROC_DIR)."""
    directory = metrics_dir()
    if directory:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    return directory


_multiprocess_dir()  # before the import below: prometheus-client chooses its value class on import

import peewee as pw  # noqa: E402
from prometheus_client import (CollectorRegistry, Counter, Gauge, GCCollector, Histogram,  # noqa: E402
                               PlatformCollector, ProcessCollector, disable_created_metrics,
                               values)
from prometheus_client import multiprocess  # noqa: E402
from prometheus_client.core import GaugeMetricFamily  # noqa: E402

from .metrics_children import Children, supported  # noqa: E402
from .metrics_files import MultiProcessFiles  # noqa: E402
from .metrics_text import Exposition  # noqa: E402

if TYPE_CHECKING:
    from .realtime.loopmon import LoopMonitor
    from .scheduler import Scheduler

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
ROW_COUNTS_MAX_AGE = timedelta(seconds=2)  # never serve row counts older than this
ROW_COUNTS_REFRESH_AFTER = timedelta(seconds=1)  # a scrape past this age refreshes them in the background
OTHER_ROUTE = "other"  # the route label of a path that matches no route
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Seven bounds around the figures people alert on (10/25/100 ms p99s): each bucket is a line per route on
# every scrape, and 13 of them made the latency histogram nearly all of a scrape's cost (bench/RESULTS.md).
_LATENCY_BUCKETS = (0.0025, 0.01, 0.025, 0.1, 0.5, 2.5, 10.0)
# A scrape's own work: the 20 ms target (issue 15) falls on a bound.
_SCRAPE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0)
PUSH_RESULTS = ("ok", "retry", "failed")


# --- the supervisor's side (serve --workers) -------------------------------------------------

def prepare_dir(path: str) -> None:
    """Create the shared directory, or empty it of a previous run's files (stale counters)."""
    global _prepared_dir
    os.makedirs(path, exist_ok=True)
    for name in glob.glob(os.path.join(path, "*.db")):
        os.remove(name)
    _prepared_dir = path


def mark_process_dead(pid: int, path: str | None = None) -> None:
    """A worker has exited: drop its live gauges (open streams and sockets, coord_info); its counters
    stay in the totals."""
    directory = path or _prepared_dir or metrics_dir()
    if directory:
        multiprocess.mark_process_dead(pid, directory)


# --- process figures -------------------------------------------------------------------------

class ProcessMetrics:
    def __init__(self, directory: str | None):
        if directory and not getattr(values.ValueClass, "_multiprocess", False):
            # prometheus_client was imported before COORD_METRICS_DIR was set (a worker forked from a
            # supervisor that had imported it): choose again, before the first value exists.
            values.ValueClass = values.get_value_class()
        if directory:
            os.makedirs(directory, exist_ok=True)  # emptying it is the supervisor's job (prepare_dir)
        disable_created_metrics()
        self.directory = directory
        # What a scrape reads besides the app's figures, as the library reads it: the reference the
        # rendering is tested and benchmarked against. A scrape renders `parts` (the same, cheaper).
        self.sources = CollectorRegistry(auto_describe=True)
        own = None if directory else self.sources
        self.info = Gauge("coord_info", "coordserver build", ["version"], registry=own,
                          multiprocess_mode="livemax")
        self.http_requests = Counter("coord_http_requests_total", "HTTP requests served, hot paths included",
                                     ["method", "route", "status"], registry=own)
        self.http_duration = Histogram("coord_http_request_duration_seconds", "HTTP request latency",
                                       ["route"], buckets=_LATENCY_BUCKETS, registry=own)
        self.sse_streams = Gauge("coord_sse_streams", "Open SSE event streams", registry=own,
                                 multiprocess_mode="livesum")
        self.notebook_sockets = Gauge("coord_notebook_sockets", "Open notebook WebSockets", registry=own,
                                      multiprocess_mode="livesum")
        self.events = Counter("coord_events_total", "Events logged (committed)", ["type"], registry=own)
        self.push_deliveries = Counter("coord_push_deliveries_total", "Webhook push attempts by outcome",
                                       ["result"], registry=own)
        self.wake_pulses = Counter("coord_wake_pulses_total", "Wake pulses sent", registry=own)
        self.buzz_silenced = Counter("coord_buzz_silenced_ingests_total", "Buzz ingests a silence hid (stored and "
                                     "counted, no effects)", registry=own)
        self.buzz_escalated = Counter("coord_buzz_escalations_total", "Buzz alerts escalated (open past their "
                                      "webhook's escalateAfterMinutes)", registry=own)
        self.alert_ack_seconds = Histogram("coord_buzz_alert_time_to_ack_seconds", "From an alert opening to its "
                                           "acknowledgement", buckets=_ACK_BUCKETS, registry=own)
        self.scrape_duration = Histogram("coord_metrics_scrape_duration_seconds", "Time a /api/metrics answer "
                                         "took to gather and render, inside the server", buckets=_SCRAPE_BUCKETS,
                                         registry=own)
        if directory:
            multiprocess.MultiProcessCollector(self.sources, path=directory)
            mine: list[object] = [MultiProcessFiles(directory)]
        else:  # in the registry's order (the order of creation above)
            mine = [Children(metric) if supported(metric) else metric
                    for metric in (self.info, self.http_requests, self.http_duration, self.sse_streams,
                                   self.notebook_sockets, self.events, self.push_deliveries, self.wake_pulses,
                                   self.buzz_silenced, self.buzz_escalated, self.alert_ack_seconds,
                                   self.scrape_duration)]
        standard = [ProcessCollector(registry=self.sources), PlatformCollector(registry=self.sources),
                    GCCollector(registry=self.sources)]
        self.parts = (*mine, *standard)
        from .domain.doctor import version
        self.info.labels(version()).set(1)  # the version admin doctor reports
        for result in PUSH_RESULTS:
            self.push_deliveries.labels(result)  # every result is a series from the start, at 0
        self.exposition = Exposition()
        self._http: dict[tuple[str, str, int], tuple] = {}
        self._event_types: dict[str, Counter] = {}

    def observe_request(self, method: str, route: str, status: int, seconds: float | None) -> None:
        """One request served. Runs on every request: a dict lookup and two increments once warm."""
        key = (method, route, status)
        children = self._http.get(key)
        if children is None:
            label = method if method in _METHODS else "other"
            children = (self.http_requests.labels(label, route, f"{status // 100}xx"),
                        self.http_duration.labels(route))
            if len(self._http) < 10_000:  # `method` is the client's: never let it grow the cache unbounded
                self._http[key] = children
        children[0].inc()
        if seconds is not None:
            children[1].observe(seconds)

    def count_events(self, types: list[str]) -> None:
        """Events of committed units (the Store calls this once per batch; see events/log.py)."""
        for event_type, count in collections.Counter(types).items():
            child = self._event_types.get(event_type)
            if child is None:
                child = self._event_types[event_type] = self.events.labels(event_type)
            child.inc(count)


_process: ProcessMetrics | None = None
_process_lock = threading.Lock()


def process_metrics() -> ProcessMetrics:
    """This process's metric objects, made on first use (after COORD_METRICS_DIR is known)."""
    global _process
    if _process is None:
        with _process_lock:
            if _process is None:
                _process = ProcessMetrics(_multiprocess_dir())
    return _process


# --- app figures -----------------------------------------------------------------------------

def row_counts() -> dict:
    """A read unit: the row-count gauges and the push backlog, one cheap COUNT each, in two statements.

    One SELECT of scalar subqueries rather than a statement per count: a scrape that finds no fresh counts
    waits for this read, and under load each statement's round trip waited for the GIL behind the busy
    event loop again (bench/RESULTS.md, 2026-11-24)."""
    from .domain.task_rules import STATUSES
    from .domain.guards import KINDS as GUARD_KINDS
    from .models import BuzzAlert, ChatChannel, ChatMessage, Guard, Message, Project, PushDelivery, Task, User
    from .sql import tuples

    def count(query):
        return query.select(pw.fn.COUNT(pw.SQL("*")))

    counted = {
        "coord_users_total": User.select(),
        "coord_chat_channels_total": ChatChannel.select(),
        "coord_chat_messages_total": ChatMessage.select(),
        "coord_mailbox_messages_total": Message.select(),
        "coord_swarm_projects_total": Project.select().where(Project.archived_at.is_null()),
        "coord_push_outbox_pending": PushDelivery.select().where(PushDelivery.status == "pending"),
    }
    together = pw.Select(columns=[count(query) for query in counted.values()]).bind(User._meta.database)
    numbers = together.tuples()[0]
    tasks = dict.fromkeys(STATUSES, 0)
    tasks.update(tuples(Task.select(Task.status, pw.fn.COUNT(pw.SQL("*"))).group_by(Task.status)))
    alerts = dict.fromkeys(("open", "acked", "snoozed"), 0)  # resolved ones are history, not a backlog
    alerts.update(tuples(BuzzAlert.select(BuzzAlert.state, pw.fn.COUNT(pw.SQL("*")))
                         .where(BuzzAlert.state != "resolved").group_by(BuzzAlert.state)))
    # Loop guards, counted from their rows: every process's trips add up (domain/guards.py).
    trips = dict.fromkeys(GUARD_KINDS, 0)
    trips.update(tuples(Guard.select(Guard.kind, pw.fn.COUNT(pw.SQL("*"))).group_by(Guard.kind)))
    holding = dict.fromkeys(GUARD_KINDS, 0)
    holding.update(tuples(Guard.select(Guard.kind, pw.fn.COUNT(pw.SQL("*"))).where(Guard.cleared_at.is_null())
                          .group_by(Guard.kind)))
    return {**{name: number or 0 for name, number in zip(counted, numbers)}, "tasks": tasks, "alerts": alerts,
            "guardTrips": trips, "guardsActive": holding}


_HELP = {
    "coord_users_total": "Users (rows)",
    "coord_chat_channels_total": "Chat channels (rows)",
    "coord_chat_messages_total": "Chat messages (rows)",
    "coord_mailbox_messages_total": "Mailbox messages (rows)",
    "coord_swarm_projects_total": "Swarm projects, unarchived",
    "coord_push_outbox_pending": "Webhook pushes waiting in the outbox",
}


class _AppFigures:
    """A collector over figures already gathered (nothing here touches the database)."""

    def __init__(self, counts: dict, scheduler_lag: float, loop_lag: float):
        self.counts, self.scheduler_lag, self.loop_lag = counts, scheduler_lag, loop_lag

    def collect(self) -> Iterable:
        for name, text in _HELP.items():
            yield GaugeMetricFamily(name, text, value=self.counts[name])
        tasks = GaugeMetricFamily("coord_swarm_tasks_total", "Swarm tasks per status", labels=["status"])
        for status, number in sorted(self.counts["tasks"].items()):
            tasks.add_metric([status], number)
        yield tasks
        alerts = GaugeMetricFamily("coord_buzz_alerts", "Buzz alerts not resolved, per state", labels=["state"])
        for state, number in sorted(self.counts["alerts"].items()):
            alerts.add_metric([state], number)
        yield alerts
        trips = GaugeMetricFamily("coord_guard_trips_total", "Loop guards tripped, by kind (suspected loops among "
                                  "agents; counted from the database, so every process's add up)", labels=["kind"])
        for kind, number in sorted(self.counts.get("guardTrips", {}).items()):
            trips.add_metric([kind], number)
        yield trips
        holding = GaugeMetricFamily("coord_guards_active", "Loop guards not cleared yet, by kind", labels=["kind"])
        for kind, number in sorted(self.counts.get("guardsActive", {}).items()):
            holding.add_metric([kind], number)
        yield holding
        yield GaugeMetricFamily("coord_scheduler_lag_seconds", "Recurring-task scheduler: seconds overdue "
                                "(admin doctor's lag, 0 while on time)", value=self.scheduler_lag)
        yield GaugeMetricFamily("coord_event_loop_lag_seconds", "Event-loop lag: the longest over the last "
                                "minute (admin doctor's loop probe)", value=self.loop_lag)


class AppMetrics:
    """coord.services.metrics: one app's scrape."""

    def __init__(self, coord, scheduler: Scheduler, loopmon: LoopMonitor):
        self.coord = coord
        self.scheduler, self.loopmon = scheduler, loopmon  # their lags are gauges of the scrape
        self.process = process_metrics()
        self._counts: dict[str, Any] | None = None
        self._counted_at = None
        self._lock = asyncio.Lock()  # one read at a time; a scrape that must wait joins the one under way
        self.row_queries = 0  # how many times the row counts were read (tests check the cache)

    async def scrape(self) -> bytes:
        started = perf_counter()
        figures = _AppFigures(await self._row_counts(), self._scheduler_lag(), self._loop_lag())
        # On the event loop, not in a thread: rendering is CPU under the GIL either way (the files it
        # reads are small: /proc, and in multi-process mode COORD_METRICS_DIR), and in a thread the same
        # CPU took several times longer to finish while the loop and the Store kept taking the GIL.
        body = self.process.exposition.render(*self.process.parts, figures)
        self.process.scrape_duration.observe(perf_counter() - started)
        return body

    def _age(self) -> timedelta | None:
        if self._counted_at is None:
            return None
        age = self.coord.now() - self._counted_at
        return age if age >= timedelta(0) else None  # a clock set back: as good as never read

    def _fresh(self) -> bool:
        age = self._age()
        return age is not None and age < ROW_COUNTS_MAX_AGE

    async def _row_counts(self) -> dict:
        """The cached figures while under ROW_COUNTS_MAX_AGE old. Past ROW_COUNTS_REFRESH_AFTER a scrape
        starts the next read in the background and answers at once, so scrapes at least that often
        never wait for the Store; only a scrape finding nothing fresh (the first, or after a pause)
        waits for a read."""
        age = self._age()
        if age is not None and age < ROW_COUNTS_MAX_AGE:
            if age >= ROW_COUNTS_REFRESH_AFTER and not self._lock.locked():
                self.coord.spawn(self._refresh(), "metrics row counts")
            return self._cached_counts()
        await self._refresh(wait=True)
        return self._cached_counts()

    def _cached_counts(self) -> dict[str, Any]:
        assert self._counts is not None  # set with _counted_at: an age, or a read that succeeded
        return self._counts

    async def _refresh(self, wait: bool = False) -> None:
        async with self._lock:
            age = self._age()
            if age is not None and age < (ROW_COUNTS_MAX_AGE if wait else ROW_COUNTS_REFRESH_AFTER):
                return  # a read that finished while this one queued is fresh enough
            started = self.coord.now()  # the figures are as old as the query's start
            try:
                counts = await self.coord.store.read(row_counts)
            except Exception:
                if wait:
                    raise
                log_background_failure(log, "reading the metrics row counts failed")
                return
            self._counts, self._counted_at = counts, started
            self.row_queries += 1

    def _scheduler_lag(self) -> float:
        lag = self.scheduler.lag_seconds(self.coord.now())
        return max(0.0, lag) if lag is not None else float("nan")

    def _loop_lag(self) -> float:
        most = self.loopmon.stats()["maxMs"]
        return most / 1000 if most is not None else float("nan")
