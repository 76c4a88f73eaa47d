"""coordserver/auth.py's rules without a server (over HTTP: tests/server/api/test_auth.py,
test_identity_lifecycle.py, realtime/test_revocation.py): the token resolver on a real Store and bus, with
a frozen clock and a monotonic clock the test moves. What a token resolves to (database first, then the
environment; an archived identity's environment token refused; an environment token served while the
database is down), how long an answer is cached and what drops it, when last use is recorded, and the
header and guard helpers. Fast: the mutation run of auth.py uses these."""
from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest
from quart import Quart, g

from coordserver import auth
from coordserver.auth import (TokenResolver, bearer_token, current_principal, identity_required, parse_bearer,
                              request_token, require_admin, require_identity)
from coordserver.context import Coord
from coordserver.db import Store
from coordserver.domain import identities
from coordserver.errors import Forbidden, Unauthorized, Unavailable
from coordserver.events.bus import LocalBus
from coordserver.events.channels import TOKENS as TOKENS_CHANNEL
from coordserver.models import Token, User
from coordserver.principal import Principal, hash_token
from coordserver.settings import Settings
from coordserver.timeutil import FrozenClock, to_db
from tests.helpers import TOKENS, base_env

START = datetime(2026, 3, 7, 12, 0, tzinfo=timezone.utc)


class World:
    def __init__(self, url: str, monkeypatch):
        self.clock = FrozenClock(START)
        self.store = Store(url, self.clock)
        self.store.open()
        self.coord = Coord(Settings.from_env(base_env(url)), self.store, LocalBus(), self.clock)
        self.mono = 1000.0
        monkeypatch.setattr(auth, "time", SimpleNamespace(monotonic=lambda: self.mono))
        self.resolver = TokenResolver(self.coord)

    def unit(self, fn, *args):
        return self.store.run_sync(fn, *args)

    def issue(self, identity: str, is_admin: bool = False, expires_at=None) -> tuple[int, str]:
        token, plaintext = self.unit(identities.issue_token, identity, is_admin, None, "admin", expires_at)
        return token.id, plaintext

    async def revoke_silently(self, token_id: int) -> None:
        """As another process's revocation before its announcement arrives: the row only (after the writes
        already under way, e.g. a last use: two writers at once would find SQLite locked)."""
        await self.settled()
        self.unit(lambda: Token.update(revoked_at=to_db(self.clock.now())).where(Token.id == token_id).execute())

    async def settled(self) -> None:
        await asyncio.gather(*list(self.coord._tasks))

    def last_used(self, token_id: int):
        return self.unit(lambda: Token.get_by_id(token_id).last_used_at)


@pytest.fixture
async def world(sqlite_url, monkeypatch):
    world = World(sqlite_url, monkeypatch)
    await world.resolver.start()
    yield world
    await world.resolver.stop()
    await world.settled()
    world.store.close()


async def test_no_token_and_unknown_tokens_are_no_one(world):
    assert await world.resolver.resolve(None) is None
    assert await world.resolver.resolve("") is None
    assert await world.resolver.resolve("not-a-token") is None


async def test_database_and_environment_tokens(world):
    token_id, plaintext = world.issue("dana", expires_at=START + timedelta(days=1))
    admin_id, admin_plaintext = world.issue("root", is_admin=True)
    assert await world.resolver.resolve(plaintext) == Principal("dana", False, token_id, "db",
                                                                START + timedelta(days=1))
    assert await world.resolver.resolve(admin_plaintext) == Principal("root", True, admin_id, "db", None)
    assert await world.resolver.resolve(TOKENS["alice"]) == Principal("alice", False, None, "env")
    assert await world.resolver.resolve(TOKENS["admin"]) == Principal("admin", True, None, "env")


async def test_a_database_token_wins_and_once_revoked_the_environment_answers(world):
    """A token that is both a database token and an environment token (e.g. bob's) is the database's."""
    row = world.unit(lambda: Token.create(identity="dbbob", token_hash=hash_token(TOKENS["bob"]), is_admin=False,
                                          created_at=to_db(START)))
    assert (await world.resolver.resolve(TOKENS["bob"])).identity == "dbbob"
    await world.revoke_silently(row.id)
    world.resolver.forget([row.id])
    assert await world.resolver.resolve(TOKENS["bob"]) == Principal("bob", False, None, "env")


async def test_an_answer_is_cached_for_five_seconds(world):
    token_id, plaintext = world.issue("dana")
    assert (await world.resolver.resolve(plaintext)).identity == "dana"
    await world.revoke_silently(token_id)
    world.mono += 4.999
    assert (await world.resolver.resolve(plaintext)).identity == "dana"  # cached: the revocation unheard
    world.mono += 0.001
    assert await world.resolver.resolve(plaintext) is None
    # a refusal is cached too: the token, restored, is refused until the cache ends
    world.unit(lambda: Token.update(revoked_at=None).where(Token.id == token_id).execute())
    world.mono += 4.999
    assert await world.resolver.resolve(plaintext) is None
    world.mono += 0.001
    assert (await world.resolver.resolve(plaintext)).identity == "dana"


async def test_a_token_expires_on_the_instant_even_while_cached(world):
    token_id, plaintext = world.issue("dana", expires_at=START + timedelta(minutes=10))
    assert (await world.resolver.resolve(plaintext)).token_id == token_id
    world.clock.advance(minutes=10, seconds=-1)
    assert (await world.resolver.resolve(plaintext)).token_id == token_id
    world.clock.advance(seconds=1)
    assert await world.resolver.resolve(plaintext) is None  # the cached answer is not used past expiry
    fresh = TokenResolver(world.coord)  # and the database's answer is the same
    assert await fresh.resolve(plaintext) is None


async def test_forgetting_drops_the_named_tokens_or_the_whole_identity(world):
    (dana_one, dana_one_text), (dana_two, dana_two_text) = world.issue("dana"), world.issue("dana")
    erin, erin_text = world.issue("erin")
    for text in (dana_one_text, dana_two_text, erin_text, "guessed"):
        await world.resolver.resolve(text)
    for token_id in (dana_one, dana_two, erin):
        await world.revoke_silently(token_id)

    world.resolver.forget([dana_one])
    assert await world.resolver.resolve(dana_one_text) is None
    assert (await world.resolver.resolve(dana_two_text)).identity == "dana"
    assert (await world.resolver.resolve(erin_text)).identity == "erin"

    world.resolver.forget([], "dana")
    assert await world.resolver.resolve(dana_two_text) is None
    assert (await world.resolver.resolve(erin_text)).identity == "erin"


async def test_a_refusal_is_dropped_only_when_an_identity_changes(world):
    """An archived environment identity's refusal is forgotten when that identity is unarchived
    (announced with the identity), not when some database tokens change."""
    now = to_db(START)
    world.unit(lambda: User.create(id="carol", display_name="carol", is_admin=False, is_agent=False,
                                   created_at=now, updated_at=now, archived_at=now))
    assert await world.resolver.resolve(TOKENS["carol"]) is None
    world.unit(lambda: User.update(archived_at=None).where(User.id == "carol").execute())
    world.resolver.forget([12345])
    assert await world.resolver.resolve(TOKENS["carol"]) is None
    world.resolver.forget([], "carol")
    assert await world.resolver.resolve(TOKENS["carol"]) == Principal("carol", False, None, "env")


async def test_announcements_on_the_bus_drop_tokens_until_the_resolver_stops(world):
    token_id, plaintext = world.issue("dana")
    other_id, other_text = world.issue("erin")
    await world.resolver.resolve(plaintext)
    await world.resolver.resolve(other_text)
    await world.revoke_silently(token_id)
    await world.revoke_silently(other_id)
    world.coord.bus.publish(TOKENS_CHANNEL, {"tokenIds": [str(token_id), None], "identity": 5})
    assert (await world.resolver.resolve(plaintext)).identity == "dana"  # neither an int id nor a name
    world.coord.bus.publish(TOKENS_CHANNEL, {"tokenIds": [token_id], "identity": None})
    assert await world.resolver.resolve(plaintext) is None
    world.coord.bus.publish(TOKENS_CHANNEL, {"identity": "erin"})
    assert await world.resolver.resolve(other_text) is None

    third_id, third_text = world.issue("dana")
    await world.resolver.resolve(third_text)
    await world.revoke_silently(third_id)
    await world.resolver.stop()
    world.coord.bus.publish(TOKENS_CHANNEL, {"tokenIds": [third_id], "identity": "dana"})
    assert (await world.resolver.resolve(third_text)).identity == "dana"  # no longer listening


async def test_the_cache_is_emptied_beyond_ten_thousand_answers(world):
    token_id, plaintext = world.issue("dana")
    await world.resolver.resolve(plaintext)
    await world.revoke_silently(token_id)
    for n in range(9_999):  # with dana's: 10,000 answers cached
        world.resolver._cache[f"filler-{n}"] = (world.mono + 5, None, None)
    await world.resolver.resolve("guessed-1")  # 10,000 cached: kept, and this one makes 10,001
    assert (await world.resolver.resolve(plaintext)).identity == "dana"
    await world.resolver.resolve("guessed-2")  # more than 10,000: emptied before this answer is cached
    assert await world.resolver.resolve(plaintext) is None


async def test_the_archived_identitys_environment_token_is_refused(world):
    now = to_db(START)
    world.unit(lambda: User.create(id="bob", display_name="bob", is_admin=False, is_agent=False,
                                   created_at=now, updated_at=now))
    assert (await world.resolver.resolve(TOKENS["bob"])).identity == "bob"  # a users row, not archived
    world.unit(lambda: User.update(archived_at=now).where(User.id == "bob").execute())
    world.resolver.forget([], "bob")
    assert await world.resolver.resolve(TOKENS["bob"]) is None


async def test_while_the_database_is_down_environment_tokens_still_get_in(world):
    class Down:
        async def read(self, fn, *args):
            raise Unavailable()
    world.resolver.coord = SimpleNamespace(store=Down(), now=world.coord.now)
    assert await world.resolver.resolve(TOKENS["admin"]) == Principal("admin", True, None, "env")
    with pytest.raises(Unavailable):
        await world.resolver.resolve("a-database-token")


async def test_last_use_is_recorded_at_most_once_a_minute(world):
    token_id, plaintext = world.issue("dana")
    assert world.last_used(token_id) is None
    await world.resolver.resolve(plaintext)
    await world.settled()
    assert world.last_used(token_id) == to_db(START)
    world.clock.advance(seconds=30)
    await world.resolver.resolve(plaintext)  # cached: this process remembers the use it recorded
    await world.settled()
    assert world.last_used(token_id) == to_db(START)
    world.clock.advance(seconds=29)
    world.mono += 10  # a lookup, not the cache
    await world.resolver.resolve(plaintext)
    await world.resolver.resolve(plaintext)  # and a cached answer
    await world.settled()
    assert world.last_used(token_id) == to_db(START)
    world.clock.advance(seconds=1)
    await world.resolver.resolve(plaintext)
    await world.settled()
    assert world.last_used(token_id) == to_db(START + timedelta(seconds=60))
    # another process (a new resolver) knows the recorded use from the row and does not repeat it
    world.clock.advance(seconds=30)
    other = TokenResolver(world.coord)
    await other.resolve(plaintext)
    await world.settled()
    assert world.last_used(token_id) == to_db(START + timedelta(seconds=60))
    world.clock.advance(seconds=30)
    await other.resolve(plaintext)  # cached: the use is still recorded
    await world.settled()
    assert world.last_used(token_id) == to_db(START + timedelta(seconds=120))


@pytest.mark.parametrize("header, token", [
    ("Bearer abc", "abc"), ("bearer abc", "abc"), ("BEARER  abc  ", "abc"), ("Bearer ", None), ("Bearer    ", None),
    ("Bearerabc", None), ("Basic abc", None), ("", None), ("abc", None),
])
def test_parse_bearer(header, token):
    assert parse_bearer(header) == token


def test_identity_required_says_why():
    alice = Principal("alice", False)
    assert identity_required(alice, True) is alice
    with pytest.raises(Unauthorized) as refused:
        identity_required(None, True)
    assert refused.value.message == "Invalid key"
    with pytest.raises(Unauthorized) as refused:
        identity_required(None, False)
    assert refused.value.message == "Authentication required: send Authorization: Bearer <token>"


async def test_the_request_guards():
    app = Quart(__name__)
    async with app.test_request_context("/api/x?token=from-query", headers={"Authorization": "Bearer from-header"}):
        assert bearer_token() == "from-header"
        assert request_token(True) == request_token(False) == "from-header"
        assert current_principal() is None
        with pytest.raises(Unauthorized) as refused:
            require_identity()
        assert refused.value.message == "Authentication required: send Authorization: Bearer <token>"
        g.token_given = True
        with pytest.raises(Unauthorized) as refused:
            require_identity()
        assert refused.value.message == "Invalid key"
        g.principal = Principal("alice", False)
        assert require_identity() == current_principal() == Principal("alice", False)
        with pytest.raises(Forbidden) as refused:
            require_admin()
        assert refused.value.message == "Admin access required"
        with pytest.raises(Forbidden) as refused:
            require_admin("Only admins list tokens", code="admin_only")
        assert refused.value.message == "Only admins list tokens"
        assert refused.value.extra == {"code": "admin_only"}
        g.principal = Principal("root", True)
        assert require_admin() == Principal("root", True)
    async with app.test_request_context("/api/x?token=from-query"):
        assert bearer_token() is None
        assert (request_token(True), request_token(False)) == ("from-query", None)
    async with app.test_request_context("/api/x?token="):
        assert request_token(True) is None


async def test_a_failed_use_record_is_logged_by_name(world, caplog):
    class ReadOnly:
        def __init__(self, store):
            self.store = store

        async def read(self, fn, *args):
            return await self.store.read(fn, *args)

        async def write(self, fn, *args):
            raise RuntimeError("disk on fire")
    _token_id, plaintext = world.issue("dana")
    world.coord.store = ReadOnly(world.store)
    try:
        with caplog.at_level("ERROR", logger="coord"):
            assert (await world.resolver.resolve(plaintext)).identity == "dana"  # served all the same
            await asyncio.gather(*list(world.coord._tasks), return_exceptions=True)
            await asyncio.sleep(0)
    finally:
        world.coord.store = world.store
    assert [r.getMessage() for r in caplog.records if r.name == "coord"] == ["background task touch-token failed"]
