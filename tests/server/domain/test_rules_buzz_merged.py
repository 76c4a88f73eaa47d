"""Ingests queued together (an alert storm): the writer stores them together (db.merges, as sends: one
statement on PostgreSQL, one INSERT per table on SQLite). Whatever a batch holds, every caller gets what the same
ingests made one at a time would have given, and the database, the event log and the bus end up the same, ids
included. Across two processes, no firing is lost and the per-webhook rate limit holds."""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from coordserver import db
from coordserver.db import Store
from coordserver.domain import alert_tallies, alerts, buzz, silences
from coordserver.domain.alerts import FlapRule
from coordserver.models import BuzzAlert, BuzzAlertTally, BuzzEvent, BuzzWebhook
from coordserver.timeutil import FrozenClock, from_db
from tests.helpers import MergeWatch
from tests.server.domain.conftest import KNOWN, START, logged_after
from tests.server.domain.test_rules_buzz import BASE, parse

FLAP = FlapRule()


class Stores:
    """Fresh stores on one backend, each keeping, per committed unit, the newest event it logged, what it announced
    on the bus and the types of the events it logged (`published`)."""

    def __init__(self, backend: str, request: pytest.FixtureRequest, tmp_path) -> None:
        self.postgres = backend == "postgresql"
        self.request, self.tmp_path = request, tmp_path
        self.made: list[Store] = []

    def __call__(self) -> Store:
        if self.postgres:
            url = self.request.getfixturevalue("pg_cluster").create_database()
        else:
            url = f"sqlite:///{self.tmp_path / f'db{len(self.made)}.sqlite'}"
        store = Store(url, FrozenClock(START))
        store.open()
        store.published = []  # per committed unit: the newest event it logged, what it announced, the event types
        store.on_commit = lambda max_event, effects: store.published.append((max_event, effects))
        store.on_events = lambda types: store.published.append(("types", types))
        self.made.append(store)
        return store


@pytest.fixture
def make_store(request, tmp_path):
    stores = Stores(request.param, request, tmp_path)
    yield stores
    for store in stores.made:
        store.close()


BACKENDS = pytest.mark.parametrize("make_store", ["sqlite", "postgresql"], indirect=True)


async def webhooks(store: Store) -> dict[str, dict]:
    made = {
        "ops": await store.write(buzz.create_webhook, "alice", {"appName": "ops", "title": "Ops", "forUsers": "alice",
                                                                 "wakeAgent": "carol", "notifyAgent": "bob"},
                                 BASE, KNOWN),
        "all": await store.write(buzz.create_webhook, "alice", {"appName": "all", "title": "All", "wakeAgent": "carol"},
                                 BASE, KNOWN),
        "off": await store.write(buzz.create_webhook, "alice", {"appName": "off", "title": "Off"}, BASE, KNOWN),
        "few": await store.write(buzz.create_webhook, "alice", {"appName": "few", "title": "Few", "forUsers": "bob"},
                                 BASE, KNOWN),
    }
    await store.write(buzz.update_webhook, made["off"]["id"], "alice", False, {"enabled": False}, BASE, KNOWN)
    return made


Ingest = tuple  # (webhook, body, rate limit[, the identity whose token the ingest carried])


def ingest_args(hooks: dict[str, dict], ingest: Ingest) -> tuple[Any, ...]:
    name, body, limit, *by = ingest
    hook = hooks["ops" if name == "badtoken" else name]
    token = hook["token"][:-1] + "x" if name == "badtoken" else hook["token"]
    return hook["id"], hook["appName"], token, parse(body), limit, FLAP, by[0] if by else None


def answer(outcome: Any) -> Any:
    if isinstance(outcome, Exception):
        return type(outcome).__name__, str(outcome), dict(getattr(outcome, "headers", None) or {})
    return outcome


def everything(_: Any = None) -> dict[str, Any]:
    """What the database holds after the ingests, every column of every row, the alerts and the webhooks' last hits
    as a read answers them (with pending tallies: alert_tallies.py)."""
    def rows(model) -> list[dict]:
        return [row for row in model.select().order_by(model.id).dicts()]
    alerts_read = alert_tallies.rows(alert_tallies.select().order_by(BuzzAlert.id))
    return {"events": rows(BuzzEvent),
            "alerts": [{field: getattr(a, field) for field in BuzzAlert._meta.fields} for a in alerts_read],
            "hits": [(h.id, from_db(alert_tallies.hit(h).last_hit_at))
                     for h in alert_tallies.webhooks(BuzzWebhook.select()).order_by(BuzzWebhook.id)],
            "log": logged_after(0)}


def folded(_: Any = None) -> dict[str, Any]:
    """What the database holds once every tally is folded: the rows themselves, and no tally left."""
    return {"alerts": [row for row in BuzzAlert.select().order_by(BuzzAlert.id).dicts()],
            "hits": [(h.id, from_db(h.last_hit_at)) for h in BuzzWebhook.select().order_by(BuzzWebhook.id)],
            "tallies": BuzzAlertTally.select().count()}


async def run(store: Store, hooks: dict[str, dict], ingests: list[Ingest], together: bool) -> list[Any]:
    calls = [ingest_args(hooks, ingest) for ingest in ingests]
    if together:
        outcomes = await asyncio.gather(*(store.write(buzz.ingest, *args) for args in calls), return_exceptions=True)
    else:
        outcomes = []
        for args in calls:
            try:
                outcomes.append(await store.write(buzz.ingest, *args))
            except Exception as refused:
                outcomes.append(refused)
    return [answer(outcome) for outcome in outcomes]


async def same_as_one_by_one(make_store: Callable[[], Store], before: list[Ingest], batch: list[Ingest],
                             setup: Callable[[Store, dict], Any] | None = None,
                             watch: MergeWatch | None = None) -> list[Any]:
    """Runs `before` one by one on two fresh stores, then `setup`, then `batch` queued together on one and one by
    one on the other; asserts answers, database, log and bus are the same; returns the answers."""
    results = []
    for together in (False, True):
        store = make_store()
        hooks = await webhooks(store)
        await run(store, hooks, before, together=False)
        if setup is not None:
            await setup(store, hooks)
        store.clock.advance(seconds=1)
        store.published.clear()
        if watch is not None and together:
            watch.merged.clear()
            watch.unmerged.clear()
        answers = await run(store, hooks, batch, together=together)
        read = await store.read(everything)
        told_now = list(store.published)
        while await store.write_alone(alert_tallies.fold):
            pass
        results.append((answers, read, told_now, await store.read(folded)))
    (answers, stored, told, rows), (answers_together, stored_together, told_together, rows_together) = results
    assert answers_together == answers
    assert stored_together == stored
    assert rows_together == rows and rows["tallies"] == 0
    assert heard(told_together) == heard(told)
    return answers


def heard(told: list[tuple]) -> tuple[list[tuple], list[str], int | None]:
    """What the bus carried, however the units were batched: each unit's effects in order, the types of the events
    logged in order (a batch counts its units' types at once), and the newest log row announced (a batch
    announces its rows once, as its newest: db.Store._finish_all)."""
    said = [("effects", entry[1]) for entry in told if entry[0] != "types" and entry[1]]
    types = [event_type for entry in told if entry[0] == "types" for event_type in entry[1]]
    return said, types, max((entry[0] for entry in told if entry[0] != "types" and entry[0] is not None), default=None)


STORM_BEFORE: list[Ingest] = [("ops", {"title": "disk"}, None), ("all", {"title": "cpu"}, None),
                              ("few", {"title": "mem"}, 2),
                              ("ops", {"title": "disk", "dedupKey": "k0", "groupKey": "disk"}, None)]
STORM: list[Ingest] = [
    ("ops", {"title": "disk", "n": 0}, None),
    ("badtoken", {"title": "disk"}, None),
    ("all", {"title": "cpu", "n": 1}, None),
    ("ops", {"title": "disk", "dedupKey": "k1", "groupKey": "disk"}, None),
    ("ops", {"title": "disk", "dedupKey": "k1", "groupKey": "disk"}, None),  # a repeat of the one before
    ("off", {"title": "disk"}, None),
    ("ops", {"title": "gone", "groupKey": "no-such-group", "dedupKey": "k1"}, None),  # a repeat: no alert started
    ("few", {"title": "mem"}, 2),  # the second in the minute
    ("few", {"title": "mem", "body": "third"}, 2),  # refused
    ("few", {"title": "mem"}, 2),
    ("ops", {"title": "Disk at 95%", "groupKey": "disk", "n": 2}, None),  # into the alert of its group, not its title
    ("ops", {"title": "disk", "dedupKey": "k0", "groupKey": "disk"}, None),  # a repeat of one stored before the batch
    *[("ops" if i % 3 else "all", {"title": "disk" if i % 3 else "cpu", "i": i}, None) for i in range(12)],
]


@BACKENDS
async def test_a_storm_queued_together_answers_and_stores_as_one_by_one(make_store, monkeypatch):
    watch = MergeWatch(monkeypatch, buzz.ingest)
    answers = await same_as_one_by_one(make_store, STORM_BEFORE, STORM, watch=watch)
    assert [a[0] for a in answers if isinstance(a, tuple)] == ["NotFound", "NotFound", "RateLimited", "RateLimited"]
    # the older of the two in the minute was stored a second before the batch
    assert answers[8] == ("RateLimited", "Too many ingests for this webhook; retry in 59 s", {"Retry-After": "59"})
    assert [i for i, a in enumerate(answers) if isinstance(a, dict) and a.get("suppressed")] == [4, 6, 11]
    assert watch.failed == [] and watch.unmerged == []
    assert max(watch.merged) > 10  # the batch was merged


async def silence_disk(store: Store, hooks: dict[str, dict]) -> None:
    await store.write(silences.create, "alice", False, {"app_name": "ops", "minutes": 60, "match": {"title": "hush"}})


@BACKENDS
async def test_a_batch_with_state_changes_runs_one_by_one_and_ends_the_same(make_store, monkeypatch):
    watch = MergeWatch(monkeypatch, buzz.ingest)
    batch: list[Ingest] = [
        ("ops", {"title": "disk"}, None),
        ("ops", {"title": "new group"}, None),  # starts an alert
        ("ops", {"title": "disk"}, None),
        ("ops", {"title": "hush now"}, None),  # silenced
        ("all", {"title": "cpu"}, None),
        ("ops", {"receiver": "x", "status": "resolved", "groupKey": "g", "alerts": []}, None),
        ("ops", {"title": "disk"}, None),
    ]
    await same_as_one_by_one(make_store, STORM_BEFORE, batch, setup=silence_disk, watch=watch)
    assert watch.failed == [] and watch.merged == []
    assert watch.unmerged != []  # the batch was sent back, and ran one by one


async def resolve_cpu(store: Store, hooks: dict[str, dict]) -> None:
    alert_id = (await store.write(buzz.ingest, *ingest_args(hooks, ("all", {"title": "cpu"}, None))))["alertId"]
    await store.write(alerts.resolve, "admin", True, alert_id)


@BACKENDS
async def test_a_firing_into_a_resolved_alert_reopens_it_from_a_batch(make_store, monkeypatch):
    watch = MergeWatch(monkeypatch, buzz.ingest)
    batch: list[Ingest] = [("ops", {"title": "disk"}, None)] * 4 + [("all", {"title": "cpu"}, None)] + \
        [("ops", {"title": "disk"}, None)] * 4
    await same_as_one_by_one(make_store, STORM_BEFORE, batch, setup=resolve_cpu, watch=watch)
    assert watch.failed == [] and watch.unmerged != []


@pytest.mark.parametrize("make_store", ["postgresql"], indirect=True)
async def test_two_processes_lose_no_firing_and_share_the_rate_limit(make_store, pg_cluster, monkeypatch):
    watch = MergeWatch(monkeypatch, buzz.ingest)
    url = pg_cluster.create_database()  # one database, two stores: two server processes' worth
    first, second = (Store(url, FrozenClock(START)) for _ in range(2))
    for store in (first, second):
        store.open()
    try:
        hooks = await webhooks(first)
        await first.write(buzz.ingest, *ingest_args(hooks, ("ops", {"title": "disk"}, None)))
        await first.write(buzz.ingest, *ingest_args(hooks, ("few", {"title": "mem"}, 25)))
        storm = [("ops", {"title": "disk", "i": i}, None) for i in range(40)] + \
            [("few", {"title": "mem", "i": i}, 25) for i in range(20)]
        outcomes = await asyncio.gather(*(store.write(buzz.ingest, *ingest_args(hooks, ingest))
                                          for ingest in storm for store in (first, second)), return_exceptions=True)
        limited = [o for o in outcomes if isinstance(o, Exception)]
        assert len(limited) == 40 - 24 and {type(o).__name__ for o in limited} == {"RateLimited"}
        stored = await first.read(everything)
        disk = next(a for a in stored["alerts"] if a["group_key"] == "disk")
        mem = next(a for a in stored["alerts"] if a["group_key"] == "mem")
        assert (disk["count"], mem["count"]) == (81, 25)
        assert len({o["eventId"] for o in outcomes if isinstance(o, dict)}) == 80 + 24
        broadcasts = [data["eventId"] for kind, data, _ in stored["log"] if kind == "broadcast"]
        assert sorted(broadcasts) == sorted(e["id"] for e in stored["events"])  # each firing logged exactly once
        assert watch.failed == [] and max(watch.merged) > 1
    finally:
        for store in (first, second):
            store.close()


async def silences_elsewhere(store: Store, hooks: dict[str, dict]) -> None:
    """Running silences that match what the batch sends, but for other webhooks: they silence none of it."""
    await store.write(silences.create, "alice", False, {"app_name": "all", "minutes": 60, "match": {"title": "disk"}})
    await store.write(silences.create, "alice", False, {"app_name": None, "webhook_id": hooks["ops"]["id"],
                                                        "minutes": 60, "match": {"labels": {"team": "db"}}})


@BACKENDS
async def test_a_silence_of_another_webhook_leaves_the_batch_merged(make_store, monkeypatch):
    watch = MergeWatch(monkeypatch, buzz.ingest)
    batch: list[Ingest] = [("ops", {"title": "disk", "i": i}, None) for i in range(6)] + \
        [("all", {"title": "cpu", "labels": {"team": "db"}, "i": i}, None) for i in range(6)]
    await same_as_one_by_one(make_store, STORM_BEFORE, batch, setup=silences_elsewhere, watch=watch)
    assert watch.failed == [] and watch.unmerged == [] and watch.merged != []


class StatementWatch:
    """The statements each merged batch of `buzz.ingest` sent, as the driver got them (PREPARE left out: once per
    connection). Wraps what is there (a MergeWatch made before it keeps watching)."""

    def __init__(self, monkeypatch) -> None:
        self.batches: list[list[str]] = []
        merge = buzz.ingest.merge
        many = merge.many

        def counting(calls):
            database = db.current_database()
            ran: list[str] = []
            real = database.execute_sql

            def execute_sql(sql, params=None, *args, **kwargs):
                if not sql.startswith("PREPARE"):
                    ran.append(sql)
                return real(sql, params, *args, **kwargs)
            database.execute_sql = execute_sql
            try:
                return many(calls)
            finally:
                del database.execute_sql
                self.batches.append(ran)
        monkeypatch.setattr(buzz.ingest, "merge", merge._replace(many=counting))


@BACKENDS
async def test_a_merged_batch_reads_in_one_statement_and_stores_and_counts_in_another(make_store, monkeypatch):
    """PostgreSQL: a batch of firings into two webhooks' open alerts, with running silences that match none of them,
    sends two statements: one reads its webhooks, silences and alerts; one stores its events and broadcasts and
    counts them on the webhooks and alerts (it was nine: webhooks, silences, each alert, the insert, each webhook's
    hit, each alert's count). Both backends end as one by one would."""
    watch = MergeWatch(monkeypatch, buzz.ingest)
    statements = StatementWatch(monkeypatch)
    batch: list[Ingest] = [(hook, {"title": title, "i": i}, None)
                           for i in range(6) for hook, title in (("ops", "disk"), ("all", "cpu"))]
    await same_as_one_by_one(make_store, STORM_BEFORE, batch, setup=silences_elsewhere, watch=watch)
    assert watch.failed == [] and watch.unmerged == [] and max(watch.merged) > 1
    if make_store.postgres:
        assert [len(ran) for ran in statements.batches] == [2] * len(watch.merged)
        assert all(sql.rsplit("; ", 1)[-1].startswith("EXECUTE") for ran in statements.batches for sql in ran)


@BACKENDS
@pytest.mark.parametrize("silenced", [{"title": "disk", "labels": {"team": "db"}},  # the webhook's silence, by labels
                                      {"title": "hush now", "groupKey": "cpu"}])  # its app name's, by title
async def test_a_silenced_firing_into_an_open_alert_sends_the_batch_back(make_store, monkeypatch, silenced):
    watch = MergeWatch(monkeypatch, buzz.ingest)

    async def setup(store: Store, hooks: dict[str, dict]) -> None:
        await silences_elsewhere(store, hooks)
        await store.write(silences.create, "alice", False, {"app_name": "all", "minutes": 60,
                                                            "match": {"title": "hush"}})
    hook = "ops" if "labels" in silenced else "all"
    batch: list[Ingest] = [(hook, {"title": "disk" if hook == "ops" else "cpu", "i": i}, None) for i in range(5)]
    answers = await same_as_one_by_one(make_store, STORM_BEFORE, [*batch, (hook, silenced, None), *batch],
                                       setup=setup, watch=watch)
    assert "silencedBy" in answers[5]
    assert watch.failed == [] and watch.unmerged != []


@BACKENDS
async def test_a_batch_refused_whole_writes_nothing(make_store, monkeypatch):
    watch = MergeWatch(monkeypatch, buzz.ingest)

    async def drop_off(store: Store, hooks: dict[str, dict]) -> None:
        await store.write(buzz.delete_webhook, hooks["off"]["id"], "alice", False)
    batch: list[Ingest] = [("off", {"title": "x", "i": i}, None) for i in range(12)]  # no webhook to lock or read
    answers = await same_as_one_by_one(make_store, STORM_BEFORE, batch, setup=drop_off, watch=watch)
    assert {a[:2] for a in answers} == {("NotFound", "Invalid webhook")}
    assert watch.failed == [] and watch.unmerged == [] and watch.merged != []


@BACKENDS
@pytest.mark.parametrize("odd_one", [
    ("ops", {"receiver": "am", "status": "resolved", "groupKey": "disk", "alerts": []}, None),  # resolves its alert
    ("ops", {"title": "disk"}, None, "carol"),  # ingested by the wake agent itself: it is not woken
], ids=["resolution", "own ingest"])
async def test_a_resolution_or_an_identitys_own_ingest_runs_on_its_own(make_store, monkeypatch, odd_one):
    watch = MergeWatch(monkeypatch, buzz.ingest)
    firings: list[Ingest] = [("ops", {"title": "disk", "i": i}, None) for i in range(5)]
    answers = await same_as_one_by_one(make_store, STORM_BEFORE, [*firings, odd_one, *firings], watch=watch)
    assert all("alertId" in answer for answer in answers)
    # the firings before it merged; those after a resolution reopen the alert, so they run one by one
    assert watch.failed == [] and watch.merged != []


def hold(database_url: str, *statements: tuple[str, tuple]):
    """Runs `statements` in a transaction left open (an operator's change in flight); returns its connection."""
    import psycopg2
    connection = psycopg2.connect(database_url)
    for sql, params in statements:
        connection.cursor().execute(sql, params)
    return connection


def waiting_on_a_lock(database_url: str) -> int:
    import psycopg2
    with psycopg2.connect(database_url) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
        return cursor.fetchone()[0]


def inserted_while_waiting(database_url: str) -> bool:
    """Whether the backend waiting on a lock has already written buzz_event rows (holds its write lock)."""
    import psycopg2
    with psycopg2.connect(database_url) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                       "WHERE a.wait_event_type = 'Lock' AND l.granted AND l.mode = 'RowExclusiveLock' "
                       "AND l.relation = 'buzz_event'::regclass")
        return cursor.fetchone()[0] > 0


async def batch_meeting(store: Store, url: str, hooks: dict[str, dict], held: tuple[tuple[str, tuple], ...],
                        firings: int = 6, limit: int | None = None) -> tuple[list[Any], bool]:
    """`firings` into the ops webhook's disk alert, queued together while `held` is in flight: once the batch
    waits on its lock, `held` commits. Returns the answers, and whether the batch had stored its events
    before it waited."""
    connection = await asyncio.to_thread(hold, url, *held)
    try:
        queued = [asyncio.ensure_future(store.write(buzz.ingest, *ingest_args(
            hooks, ("ops", {"title": "disk", "i": i}, limit)))) for i in range(firings)]
        deadline = asyncio.get_running_loop().time() + 10
        while not await asyncio.to_thread(waiting_on_a_lock, url):
            assert asyncio.get_running_loop().time() < deadline, "the batch never met the held row"
            await asyncio.sleep(0.02)
        assert not any(f.done() for f in queued)
        stored_first = await asyncio.to_thread(inserted_while_waiting, url)
    finally:
        connection.commit()
        connection.close()
    return await asyncio.gather(*queued), stored_first


@pytest.fixture
def pg_store(pg_cluster):
    """A store on a fresh PostgreSQL database, and the database's URL."""
    url = pg_cluster.create_database()
    store = Store(url, FrozenClock(START))
    store.open()
    yield store, url
    store.close()


async def test_a_batch_meeting_a_resolution_in_flight_reopens_the_alert_as_one_by_one_would(pg_store, monkeypatch):
    """A batch without rate limit or dedup key reads its webhook and alert without a lock (another process's
    batch is not held up by it). A resolution committed while it runs must not be counted over: the batch is
    sent back, and its first firing reopens the alert, as one by one after the resolution."""
    watch = MergeWatch(monkeypatch, buzz.ingest)
    store, url = pg_store
    hooks = await webhooks(store)
    alert_id = (await store.write(buzz.ingest, *ingest_args(hooks, ("ops", {"title": "disk"}, None))))["alertId"]
    answers, _ = await batch_meeting(store, url, hooks, (
        ("UPDATE buzz_alert SET state = 'resolved', resolved_by = 'alice' WHERE id = %s", (alert_id,)),))
    assert all(answer["alertId"] == alert_id for answer in answers)
    stored = await store.read(everything)
    alert = next(a for a in stored["alerts"] if a["id"] == alert_id)
    assert (alert["state"], alert["count"]) == ("open", 7)
    assert [data["change"] for kind, data, _ in stored["log"] if kind == "alert_changed"] == ["opened", "reopened"]
    assert watch.failed == [] and watch.unmerged != []


async def test_a_batch_meeting_a_webhook_update_in_flight_leaves_its_alert_carrying_the_new_runbook(
        pg_store, monkeypatch):
    """update_webhook changes what its alerts carry (runbook, escalateTo). A batch that read the webhook before
    that commit must not write the old values back over the alert."""
    watch = MergeWatch(monkeypatch, buzz.ingest)
    store, url = pg_store
    hooks = await webhooks(store)
    alert_id = (await store.write(buzz.ingest, *ingest_args(hooks, ("ops", {"title": "disk"}, None))))["alertId"]
    new = "https://runbooks.example/disk"
    answers, _ = await batch_meeting(store, url, hooks, (
        ("UPDATE buzz_webhook SET runbook_url = %s, escalate_to = 'dave' WHERE id = %s", (new, hooks["ops"]["id"])),
        ("UPDATE buzz_alert SET runbook_url = %s, escalate_to = 'dave' WHERE webhook_id = %s",
         (new, hooks["ops"]["id"]))))
    assert all(answer["alertId"] == alert_id for answer in answers)
    alert = next(a for a in (await store.read(everything))["alerts"] if a["id"] == alert_id)
    assert (alert["runbook_url"], alert["escalate_to"], alert["count"]) == (new, "dave", 7)
    assert watch.failed == [] and watch.unmerged == [] and max(watch.merged) > 1


async def test_a_batch_that_needs_no_webhook_lock_is_not_held_up_by_its_webhooks_row(pg_store, monkeypatch):
    """The webhook's row held by another transaction (a lone ingest, an update in flight): a batch without rate limit
    or dedup key reads the webhook without a lock and counts on its alert by a tally, so it is answered meanwhile."""
    watch = MergeWatch(monkeypatch, buzz.ingest)
    store, url = pg_store
    hooks = await webhooks(store)
    alert_id = (await store.write(buzz.ingest, *ingest_args(hooks, ("ops", {"title": "disk"}, None))))["alertId"]
    connection = await asyncio.to_thread(
        hold, url, ("SELECT id FROM buzz_webhook WHERE id = %s FOR UPDATE", (hooks["ops"]["id"],)))
    try:
        answers = await asyncio.wait_for(asyncio.gather(*(store.write(buzz.ingest, *ingest_args(
            hooks, ("ops", {"title": "disk", "i": i}, None))) for i in range(6))), timeout=10)
    finally:
        connection.commit()
        connection.close()
    assert all(answer["alertId"] == alert_id for answer in answers)
    alert = next(a for a in (await store.read(everything))["alerts"] if a["id"] == alert_id)
    assert alert["count"] == 7
    assert watch.failed == [] and watch.unmerged == [] and max(watch.merged) > 1


async def test_a_rate_limited_batch_waits_for_its_webhooks_row_before_storing(pg_store, monkeypatch):
    """The rate window is counted under the webhook's row lock, across processes: a rate-limited batch waits for the
    row before deciding anything."""
    watch = MergeWatch(monkeypatch, buzz.ingest)
    store, url = pg_store
    hooks = await webhooks(store)
    await store.write(buzz.ingest, *ingest_args(hooks, ("ops", {"title": "disk"}, None)))
    answers, stored_first = await batch_meeting(store, url, hooks, (
        ("SELECT id FROM buzz_webhook WHERE id = %s FOR UPDATE", (hooks["ops"]["id"],)),), limit=60)
    assert not stored_first
    assert all("alertId" in answer for answer in answers)
    assert watch.failed == [] and watch.unmerged == [] and max(watch.merged) > 1


WAVES = 10


def deadlocks(database_url: str) -> int:
    import psycopg2
    with psycopg2.connect(database_url) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
        cursor.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


async def test_two_processes_storming_one_alert_with_resolutions_among_them_count_every_firing(pg_cluster, monkeypatch):
    """Unlimited firings from two processes into one alert, with its source's resolutions and an operator's
    resolves among them: every firing is counted once, the alert ends as its last news says, and no lock order
    between the batches, the lone ingests and the operator deadlocks."""
    watch = MergeWatch(monkeypatch, buzz.ingest)
    url = pg_cluster.create_database()
    first, second = (Store(url, FrozenClock(START)) for _ in range(2))
    for store in (first, second):
        store.open()
    try:
        hooks = await webhooks(first)
        alert_id = (await first.write(buzz.ingest, *ingest_args(hooks, ("ops", {"title": "disk"}, None))))["alertId"]
        before = await asyncio.to_thread(deadlocks, url)
        resolution = ("ops", {"receiver": "am", "status": "resolved", "groupKey": "disk", "alerts": []}, None)

        async def wave(store: Store, n: int) -> list[Any]:
            calls = [store.write(buzz.ingest, *ingest_args(hooks, ("ops", {"title": "disk", "n": n, "i": i}, None)))
                     for i in range(20)]
            calls.insert(10, store.write(buzz.ingest, *ingest_args(hooks, resolution)))
            calls.insert(5, store.write(alerts.resolve, "admin", True, alert_id))
            return await asyncio.gather(*calls, return_exceptions=True)
        outcomes = [o for n in range(WAVES) for o in (await asyncio.gather(wave(first, n), wave(second, n)))
                    for o in o]
        # an operator's resolve of an alert resolved meanwhile is refused (409); nothing else is
        assert all(not isinstance(o, Exception) or type(o).__name__ == "Conflict" for o in outcomes), outcomes
        stored = await first.read(everything)
        alert = next(a for a in stored["alerts"] if a["id"] == alert_id)
        firings = [e for e in stored["events"] if e["alert_id"] == alert_id and e["title"] == "disk"]
        assert alert["count"] == 1 + WAVES * 2 * 20 == len(firings)
        # the alert's latest firing or resolution: a repeat (a resolution within the dedup window) changes no alert
        assert alert["last_event_id"] == max(e["id"] for e in stored["events"]
                                             if e["alert_id"] == alert_id and not e["suppressed"])
        assert await asyncio.to_thread(deadlocks, url) == before
        assert watch.failed == [] and max(watch.merged) > 1
    finally:
        for store in (first, second):
            store.close()


# --- batches decided from memory (buzz._Known, PostgreSQL) -------------------------------------------------------

def firings(tag: str) -> list[Ingest]:
    """Firings into two open alerts of two webhooks: a batch that needs no lock, decided from memory once known."""
    return [(hook, {"title": title, "tag": tag, "i": i}, None) for i in range(4) for hook, title in (("ops", "disk"),
                                                                                                    ("all", "cpu"))]


async def test_a_batch_whose_webhooks_and_alerts_are_known_sends_one_statement(pg_store, monkeypatch):
    """The first batch reads what it decides by and stores in a second statement; the next one, the same webhooks and
    alerts with nothing changed, decides from memory and sends only the statement that stores it."""
    watch = MergeWatch(monkeypatch, buzz.ingest)
    statements = StatementWatch(monkeypatch)
    store, _url = pg_store
    hooks = await webhooks(store)
    await run(store, hooks, STORM_BEFORE, together=False)
    first = await run(store, hooks, firings("first"), together=True)
    read_batches = len(statements.batches)
    second = await run(store, hooks, firings("second"), together=True)
    assert [len(ran) for ran in statements.batches[:read_batches]] == [2] * read_batches
    assert [len(ran) for ran in statements.batches[read_batches:]] == [1] * (len(statements.batches) - read_batches)
    assert watch.failed == [] and watch.unmerged == [] and len(watch.merged) == len(statements.batches)
    assert [answer["alertId"] for answer in first] == [answer["alertId"] for answer in second]
    assert [answer["eventId"] for answer in first + second] == list(range(5, 5 + 16))  # after STORM_BEFORE's 4


async def silence_ops_disk(store: Store, hooks: dict[str, dict]) -> None:
    await store.write(silences.create, "alice", False, {"app_name": "ops", "minutes": 60, "match": {"title": "disk"}})


async def disable_ops(store: Store, hooks: dict[str, dict]) -> None:
    await store.write(buzz.update_webhook, hooks["ops"]["id"], "alice", False, {"enabled": False}, BASE, KNOWN)


async def delete_ops(store: Store, hooks: dict[str, dict]) -> None:
    await store.write(buzz.delete_webhook, hooks["ops"]["id"], "alice", False)


async def reroute_ops(store: Store, hooks: dict[str, dict]) -> None:
    await store.write(buzz.update_webhook, hooks["ops"]["id"], "alice", False,
                      {"forUsers": "bob", "wakeAgent": "admin"}, BASE, KNOWN)


async def resolve_ops_disk(store: Store, hooks: dict[str, dict]) -> None:
    disk = next(a for a in (await store.read(everything))["alerts"] if a["group_key"] == "disk")
    await store.write(alerts.resolve, "admin", True, disk["id"])


CHANGES = {"a new silence": silence_ops_disk, "a disabled webhook": disable_ops, "a deleted webhook": delete_ops,
           "new recipients": reroute_ops, "a resolved alert": resolve_ops_disk}


@pytest.mark.parametrize("where", ["this process", "another process"])
@pytest.mark.parametrize("change", list(CHANGES))
async def test_a_batch_decided_from_memory_meets_a_change_as_one_by_one_would(pg_cluster, monkeypatch, change, where):
    """Memory is not told of changes: a batch decided from it, after a change committed on this process or another,
    stores nothing and is sent back (db.Unmerged), and ends, answers, rows, ids and log, as the same ingests one by
    one after the change."""
    watch = MergeWatch(monkeypatch, buzz.ingest)
    statements = StatementWatch(monkeypatch)
    results = []
    for together in (False, True):
        url = pg_cluster.create_database()
        first, second = (Store(url, FrozenClock(START)) for _ in range(2))
        for store in (first, second):
            store.open()
        try:
            hooks = await webhooks(first)
            await run(first, hooks, STORM_BEFORE, together=False)
            await run(first, hooks, firings("warm"), together=True)  # what the first process's memory holds
            await CHANGES[change](first if where == "this process" else second, hooks)
            for store in (first, second):
                store.clock.advance(seconds=1)
            watch.merged.clear()
            watch.unmerged.clear()
            statements.batches.clear()
            answers = await run(first, hooks, firings("after"), together=together)
            results.append((answers, await first.read(everything)))
        finally:
            for store in (first, second):
                store.close()
    (answers, stored), (answers_together, stored_together) = results
    assert answers_together == answers
    assert stored_together == stored
    assert watch.failed == [] and watch.unmerged != []
    assert len(statements.batches[0]) == 1  # decided from memory: no read, and a store that stored nothing
