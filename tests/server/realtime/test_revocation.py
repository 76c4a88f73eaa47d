"""Revoke, rotate, expiry and archiving end every stream and notebook socket opened with the token,
within a second, on every process; the token cache forgets it at once; the control event reaches no
client. Through the real server: SSE over httpx, sockets over `websockets`."""
from __future__ import annotations

import pytest

import asyncio
import time
from contextlib import asynccontextmanager
from datetime import timedelta

import httpx

from coordserver.domain import identities
from coordserver.models import Event, PushDelivery
from coordserver.timeutil import FrozenClock
from tests.helpers import TOKENS, async_client
from tests.sse_helpers import emit, message_event, open_stream, run_unit, server_process, wait_for
from tests.server.realtime.test_notebook_ws import RawClient

GRACE = 1.0  # the issue's bound: closed within one second


async def register(base: str, identity: str) -> tuple[int, str]:
    """A database token for a new identity, through invite + register. Returns (token id, token)."""
    async with httpx.AsyncClient(base_url=base, timeout=30,
                                 headers={"Authorization": f"Bearer {TOKENS['admin']}"}) as admin:
        code = (await admin.post("/api/auth/invites", json={})).json()["invite"]["code"]
        token = (await admin.post("/api/auth/register", json={"code": code, "identity": identity})).json()["token"]
        tokens = (await admin.get("/api/auth/tokens")).json()["tokens"]
    return next(t["id"] for t in tokens if t["identity"] == identity), token


async def new_page(base: str, token: str) -> str:
    async with httpx.AsyncClient(base_url=base, timeout=30, headers={"Authorization": f"Bearer {token}"}) as http:
        response = await http.post("/api/notebook", json={"title": "Mine"})
        assert response.status_code == 200, response.text
        return response.json()["page"]["id"]


async def ended(reader, timeout: float = GRACE) -> str | None:
    """Read until the stream ends; returns its last comment (the closing reason) or fails after `timeout`."""
    last = None

    async def drain():
        nonlocal last
        try:
            while True:
                frame = await reader.next(timeout=timeout + 1, comments=True)
                if frame.comment is not None:
                    last = frame.comment
        except (StopAsyncIteration, httpx.HTTPError):
            return
    await asyncio.wait_for(drain(), timeout)
    return last


async def verify_status(base: str, token: str) -> int:
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        return (await http.get("/api/auth/verify", headers={"Authorization": f"Bearer {token}"})).status_code


async def identity_with_editor(srv, identity: str):
    """A freshly registered identity with a synced notebook socket: (token id, token, socket)."""
    token_id, token = await register(srv.url, identity)
    editor = await RawClient(srv, await new_page(srv.url, token), token=token).connect()
    await editor.wait(lambda c: c.of_type("sync"))
    return token_id, token, editor


async def test_revoke_ends_streams_and_sockets_at_once(make_server):
    srv = make_server()
    token_id, token, editor = await identity_with_editor(srv, "dave")
    async with open_stream(srv, None, token=token) as stream, open_stream(srv, "bob") as bob:
        assert await verify_status(srv.url, token) == 200  # the token is in the cache now
        async with async_client(srv, "admin") as admin:
            started = time.monotonic()
            assert (await admin.post(f"/api/auth/tokens/{token_id}/revoke")).status_code == 200
        assert await ended(stream) == "closing: token revoked"
        assert await editor.closed(GRACE) == (4001, "Token revoked")
        assert time.monotonic() - started < GRACE + 0.5
        assert await verify_status(srv.url, token) == 401  # not after the 5 s cache
        # the control event is no client's frame: bob's next logged frame is his own mail
        sent = emit(srv, *message_event("bob", 1))
        assert (await bob.logged()).id == sent
    async with open_stream(srv, "bob", last_event_id=0) as bob:  # nor part of a resume
        replayed = [await bob.logged()]
        while replayed[-1].id != sent:
            replayed.append(await bob.logged())
        assert "token_revoked" not in {f.event for f in replayed}
    rows = srv.call(lambda: srv.coord.store.read(lambda: list(Event.select().where(Event.type == "token_revoked"))))
    assert [(r.data["tokenIds"], r.data["reason"], r.to_all) for r in rows] == [([token_id], "revoked", False)]
    assert srv.call(lambda: srv.coord.store.read(
        lambda: PushDelivery.select().where(PushDelivery.event_type == "token_revoked").count())) == 0


async def test_rotate_ends_the_old_tokens_connections(make_server):
    srv = make_server()
    token_id, token, editor = await identity_with_editor(srv, "dave")
    async with open_stream(srv, None, token=token) as stream:
        async with httpx.AsyncClient(base_url=srv.url, timeout=30, headers={"Authorization": f"Bearer {token}"}) as me:
            rotated = (await me.post(f"/api/auth/tokens/{token_id}/rotate")).json()
        assert await ended(stream) == "closing: token revoked"
        assert (await editor.closed(GRACE))[0] == 4001
    fresh = rotated["newToken"]["token"]
    assert await verify_status(srv.url, fresh) == 200 and await verify_status(srv.url, token) == 401
    async with open_stream(srv, None, token=fresh) as stream:  # the new token's stream stays open
        sent = emit(srv, *message_event("dave", 1))
        assert (await stream.logged()).id == sent


async def test_expiry_ends_connections_when_the_clock_passes_it(make_server):
    clock = FrozenClock()
    srv = make_server(clock=clock)
    _row, token = srv.call(lambda: srv.coord.store.write(
        identities.issue_token, "temp", False, "short-lived", "admin", clock.now() + timedelta(minutes=10)))
    page = await new_page(srv.url, token)
    editor = await RawClient(srv, page, token=token).connect()
    await editor.wait(lambda c: c.of_type("sync"))
    async with open_stream(srv, None, token=token) as stream:
        await asyncio.sleep(0.6)  # a sweep or two: nothing has expired yet
        sent = emit(srv, *message_event("temp", 1))
        assert (await stream.logged()).id == sent
        clock.advance(minutes=11)
        assert await ended(stream) == "closing: token expired"
        assert await editor.closed(GRACE) == (4001, "Token expired")


async def test_archiving_ends_every_connection_of_the_identity(make_server):
    """The mechanism user archiving calls: database tokens revoked, environment-token streams closed too."""
    srv = make_server()
    token_id, token = await register(srv.url, "carol2")
    async with open_stream(srv, None, token=token) as db_stream, open_stream(srv, "carol") as env_stream, \
            open_stream(srv, "bob") as bob:
        assert run_unit(srv, identities.revoke_identity_tokens, "carol2") == [token_id]
        assert await ended(db_stream) == "closing: identity archived"
        run_unit(srv, identities.revoke_identity_tokens, "carol")
        assert await ended(env_stream) == "closing: identity archived"
        sent = emit(srv, *message_event("bob", 1))
        assert (await bob.logged()).id == sent  # others keep their streams
    assert await verify_status(srv.url, token) == 401


@asynccontextmanager
async def connected_here_admin_elsewhere(here, other: str, identity: str, token: str):
    """`identity` holds a synced notebook socket and an SSE stream on server `here`; an admin client talks to
    the second process `other`. Yields (editor, stream, admin)."""
    page = await new_page(here.url, token)
    editor = await RawClient(here, page, token=token).connect()
    await editor.wait(lambda c: c.of_type("sync"))
    async with open_stream(here, None, token=token) as stream:
        assert await verify_status(here.url, token) == 200
        await wait_for(lambda: here.coord.services.sse.has_stream(identity))
        async with httpx.AsyncClient(base_url=other, timeout=30,
                                     headers={"Authorization": f"Bearer {TOKENS['admin']}"}) as admin:
            yield editor, stream, admin


@pytest.mark.single_process  # `here` is one process; `other` is the second
async def test_revoking_on_one_server_ends_connections_on_another(make_server, pg_cluster):
    url = pg_cluster.create_database()
    here = make_server(database_url=url)
    with server_process(url) as other:
        token_id, token = await register(here.url, "dave")
        async with connected_here_admin_elsewhere(here, other, "dave", token) as (editor, stream, admin):
            assert (await admin.post(f"/api/auth/tokens/{token_id}/revoke")).status_code == 200
            started = time.monotonic()
            assert await ended(stream) == "closing: token revoked"
            assert await editor.closed(GRACE) == (4001, "Token revoked")
            assert time.monotonic() - started < GRACE
            assert await verify_status(here.url, token) == 401  # this process's cache dropped it too


async def test_an_admin_flag_change_reaches_another_servers_token_cache_at_once(make_server, pg_cluster):
    """The unit that changes isAdmin announces it after its commit ("tokens" on the bus): the other
    process drops its cached principal then, not when its 5 s cache entry runs out."""
    url = pg_cluster.create_database()
    here = make_server(database_url=url)
    with server_process(url) as other:
        _token_id, token = await register(here.url, "erin")

        async def is_admin_on_other() -> bool:
            async with httpx.AsyncClient(base_url=other, timeout=30) as http:
                response = await http.get("/api/auth/verify", headers={"Authorization": f"Bearer {token}"})
                return response.json()["isAdmin"]
        cached_from = time.monotonic()
        assert await is_admin_on_other() is False  # now cached there for 5 s
        async with async_client(here, "admin") as admin:
            assert (await admin.patch("/api/admin/users/erin", json={"isAdmin": True})).status_code == 200
        while not await is_admin_on_other():
            assert time.monotonic() - cached_from < 4.5, "the other server kept its cached principal"
            await asyncio.sleep(0.05)
