"""What an ingest answers, byte for byte, on both backends: status, the headers a sender reads and the body,
for an accepted ingest, a repeat, and every refusal (unknown app name, wrong token, disabled webhook, deleted
webhook, the per-webhook window). The expected answers are literal: they are what the server answered before
refusals were decided from the per-process webhook cache (coordserver/webhook_cache.py), so a faster path that
answers differently fails here. Also: the cache follows webhook changes made on another process."""
from __future__ import annotations

import asyncio
import json
from datetime import datetime, timezone

import httpx

from coordserver.domain import buzz
from coordserver.models import BuzzEvent
from coordserver.timeutil import FrozenClock
from tests.helpers import MergeWatch, async_client, client, eventually

_LIMITS = {"COORD_RATE_LIMITS": "on", "COORD_RATE_LIMIT_OVERRIDES": '{"ingest": 1000, "other": 1000}',
           "COORD_INGEST_PER_WEBHOOK": "3"}
_HEADERS = ("content-type", "content-length", "retry-after", "x-ratelimit-limit", "x-ratelimit-remaining",
            "x-ratelimit-reset", "cache-control", "set-cookie", "www-authenticate")


def _answer(response: httpx.Response) -> tuple[int, dict[str, str], bytes]:
    return (response.status_code, {name: response.headers[name] for name in _HEADERS if name in response.headers},
            response.content)


_RESET = "1771329660"  # the end of the frozen clock's rate window (12:01:00)


def _json_answer(status: int, body: bytes, remaining: int, **headers: str) -> tuple[int, dict[str, str], bytes]:
    """An answer with the `ingest` route class's window headers (1,000 a minute, per client address)."""
    return status, {"content-type": "application/json", "content-length": str(len(body)), **headers,
                    "x-ratelimit-limit": "1000", "x-ratelimit-remaining": str(remaining),
                    "x-ratelimit-reset": _RESET}, body


def _count(server, model) -> int:
    return server.call(lambda: server.coord.store.read(lambda: model.select().count()))


def test_ingest_answers_are_unchanged(make_server, database_url):
    clock = FrozenClock(datetime(2026, 2, 17, 12, 0, 0, 500_000, tzinfo=timezone.utc))
    srv = make_server(clock=clock, database_url=database_url, env=_LIMITS)
    alice, anon = client(srv, "alice"), client(srv)
    hook = alice.post("/api/buzz/webhooks", json={"appName": "golden", "title": "Golden", "wakeAgent": "bob"}).json()
    other = alice.post("/api/buzz/webhooks", json={"appName": "golden", "title": "Other"}).json()
    url = f"/api/ingest/golden/{hook['token']}"
    sent = []

    def ingest(path: str, **kwargs) -> tuple[int, dict[str, str], bytes]:
        sent.append(path)
        return _answer(anon.post(path, **kwargs))

    def invalid() -> tuple[int, dict[str, str], bytes]:
        return _json_answer(404, b'{"error":"Invalid webhook"}\n', 1000 - len(sent))

    assert ingest(url, json={"title": "disk full", "dedupKey": "disk"}) == \
        _json_answer(200, b'{"ok":true,"eventId":1,"alertId":1}\n', 999)
    assert ingest(url, json={"title": "disk full", "dedupKey": "disk"}) == \
        _json_answer(200, b'{"ok":true,"eventId":2,"suppressed":true}\n', 998)
    assert ingest(url, content=b"plain text", headers={"Content-Type": "text/plain"}) == \
        _json_answer(200, b'{"ok":true,"eventId":3,"alertId":2}\n', 997)
    assert ingest(url, json={"title": "one too many"}) == _json_answer(
        429, b'{"error":"Too many ingests for this webhook; retry in 60 s"}\n', 996, **{"retry-after": "60"})
    clock.advance(seconds=30)
    assert ingest(url, json={"title": "still"}) == _json_answer(
        429, b'{"error":"Too many ingests for this webhook; retry in 30 s"}\n', 995, **{"retry-after": "30"})

    for path in ("/api/ingest/golden/" + "0" * 14, f"/api/ingest/nosuchapp/{hook['token']}",
                 f"{url}x", url[:-1], f"/api/ingest/golden/{other['token']}x"):
        assert ingest(path, json={"title": "nope"}) == invalid(), path
    assert alice.patch(f"/api/buzz/webhooks/{other['id']}", json={"enabled": False}).status_code == 200
    assert ingest(f"/api/ingest/golden/{other['token']}", json={"title": "off"}) == invalid()
    assert alice.patch(f"/api/buzz/webhooks/{other['id']}", json={"enabled": True}).status_code == 200
    assert ingest(f"/api/ingest/golden/{other['token']}", json={"title": "on again"}) == \
        _json_answer(200, b'{"ok":true,"eventId":4,"alertId":3}\n', 1000 - len(sent))
    assert alice.patch(f"/api/buzz/webhooks/{other['id']}", json={"appName": "renamed"}).status_code == 200
    assert ingest(f"/api/ingest/golden/{other['token']}", json={"title": "old name"}) == invalid()
    assert ingest(f"/api/ingest/renamed/{other['token']}", json={"title": "new name"}) == \
        _json_answer(200, b'{"ok":true,"eventId":5,"alertId":4}\n', 1000 - len(sent))
    assert alice.delete(f"/api/buzz/webhooks/{other['id']}").status_code == 200
    assert ingest(f"/api/ingest/renamed/{other['token']}", json={"title": "gone"}) == invalid()
    assert _count(srv, BuzzEvent) == 5  # no refusal wrote anything


def test_webhook_changes_reach_the_other_process(make_server, pg_cluster):
    """Two servers on one PostgreSQL database: each one's ingest lookups follow the webhooks created,
    disabled, renamed and deleted through the other (bus `webhooks`)."""
    url = pg_cluster.create_database()
    first, second = make_server(database_url=url), make_server(database_url=url)
    alice, anon = client(first, "alice"), client(second)
    hook = alice.post("/api/buzz/webhooks", json={"appName": "shared", "title": "Shared"}).json()
    path = f"/api/ingest/shared/{hook['token']}"
    assert anon.post(path, json={"title": "cached now"}).status_code == 200
    cache = second.coord.services.webhooks

    def status(target: str) -> int:
        return anon.post(target, json={"title": "x"}).status_code

    # a later ingest is answered from the cache (once the NOTIFY of the webhook's creation has come and gone)
    assert eventually(lambda: (status(path), cache.hits), lambda seen: seen[0] == 200 and seen[1] >= 1)[1] >= 1

    newer = alice.post("/api/buzz/webhooks", json={"appName": "shared", "title": "Newer"}).json()
    assert eventually(lambda: status(f"/api/ingest/shared/{newer['token']}"), lambda got: got == 200) == 200
    alice.patch(f"/api/buzz/webhooks/{hook['id']}", json={"enabled": False})
    assert eventually(lambda: status(path), lambda got: got == 404) == 404
    alice.patch(f"/api/buzz/webhooks/{hook['id']}", json={"enabled": True})
    assert eventually(lambda: status(path), lambda got: got == 200) == 200
    alice.patch(f"/api/buzz/webhooks/{hook['id']}", json={"appName": "moved"})
    assert eventually(lambda: status(path), lambda got: got == 404) == 404
    assert status(f"/api/ingest/moved/{hook['token']}") == 200
    alice.delete(f"/api/buzz/webhooks/{hook['id']}")
    assert eventually(lambda: status(f"/api/ingest/moved/{hook['token']}"), lambda got: got == 404) == 404
    assert cache.misses >= 5  # read again after each change


def test_a_storm_of_ingests_is_answered_as_one_at_a_time(make_server, database_url, monkeypatch):
    """Ingests arriving at once (the writer stores them merged, db.merges): each gets, byte for byte, the
    answer of a lone ingest, with its own event id, and the alert counts every one."""
    watch = MergeWatch(monkeypatch, buzz.ingest)
    srv = make_server(clock=FrozenClock(datetime(2026, 2, 17, 12, 0, tzinfo=timezone.utc)), database_url=database_url,
                      env={"COORD_RATE_LIMITS": "off"})
    alice = client(srv, "alice")
    hook = alice.post("/api/buzz/webhooks", json={"appName": "storm", "title": "Storm", "wakeAgent": "bob"}).json()
    url = f"/api/ingest/storm/{hook['token']}"
    lone = _answer(client(srv).post(url, json={"title": "disk full"}))
    assert lone == (200, {"content-type": "application/json", "content-length": "36"},
                    b'{"ok":true,"eventId":1,"alertId":1}\n')

    async def storm() -> list[tuple[int, dict[str, str], bytes]]:
        async with async_client(srv) as anon:
            responses = await asyncio.gather(*(anon.post(url, json={"title": "disk full", "n": n}) for n in range(48)))
        return [_answer(response) for response in responses]
    answers = asyncio.run(storm())
    event_ids = sorted(json.loads(body)["eventId"] for _status, _headers, body in answers)
    assert event_ids == list(range(2, 50))
    assert sorted(answers, key=lambda a: json.loads(a[2])["eventId"]) == [
        (200, {"content-type": "application/json", "content-length": str(len(body))}, body)
        for body in (b'{"ok":true,"eventId":%d,"alertId":1}\n' % event_id for event_id in event_ids)]
    assert alice.get("/api/buzz/alerts/1").json()["count"] == 49
    assert watch.merged != []
