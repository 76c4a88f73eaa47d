"""Who is who (domain/kinds.py) and whom a change wakes (domain/wake_signal.py), through the store on both backends:
an identity is an agent by its users row alone, COORD_AGENTS makes such rows, and an identity's own actions (or a
guard's held pair) announce `wake_changed` where others' announce a pulse."""
from __future__ import annotations

from datetime import timedelta

from coordserver import db
from coordserver.domain import identities, kinds, wake_signal
from coordserver.events.channels import WAKE, WAKE_CHANGED
from coordserver.models import Guard, User
from coordserver.timeutil import to_db
from tests.server.domain.conftest import START


def rows() -> list[tuple]:
    return list(User.select(User.id, User.display_name, User.is_admin, User.is_agent, User.created_at,
                            User.updated_at).order_by(User.id).tuples())


async def test_an_identity_is_an_agent_by_its_users_row_alone(store):
    def setup() -> None:
        identities.ensure_user("ann", is_agent=True)
        identities.ensure_user("hal")  # a human with a row
    await store.write(setup)
    assert await store.read(kinds.agents_among, ["ann", "hal", "bob", "ann"]) == {"ann"}  # bob: no row
    assert await store.read(kinds.agents_among, iter(["hal", "bob"])) == set()
    assert await store.read(kinds.agents_among, []) == set()
    assert [await store.read(kinds.is_agent, who) for who in ("ann", "hal", "bob")] == [True, False, False]

    def agents_by_sql() -> list[str]:
        return [r[0] for r in db.sql_rows(f'SELECT o.id FROM "user" o WHERE {kinds.is_agent_sql("o.id")} ORDER BY o.id')]
    assert await store.read(agents_by_sql) == ["ann"]


async def test_the_environment_s_agents_get_a_row_saying_agent_at_every_start(store):
    await store.write(identities.ensure_user, "hal", "Hal the human")
    await store.write(identities.ensure_user, "hum", "Not named")
    store.clock.advance(minutes=5)
    await store.write(kinds.declare_env_agents, frozenset({"zed", "hal"}))
    now, start = to_db(START + timedelta(minutes=5)), to_db(START)
    declared = [("hal", "Hal the human", False, True, start, start), ("hum", "Not named", False, False, start, start),
                ("zed", "zed", False, True, now, now)]
    assert await store.read(rows) == declared
    store.clock.advance(minutes=5)
    await store.write(kinds.declare_env_agents, frozenset({"zed", "hal"}))  # again: nothing changes
    await store.write(kinds.declare_env_agents, frozenset())
    assert await store.read(rows) == declared


async def test_a_change_wakes_others_never_its_actor(store):
    def wakes() -> list[bool]:
        return [wake_signal.enters_wake("ann", "bob"), wake_signal.enters_wake("ann", None),
                wake_signal.enters_wake("ann", "ann"), wake_signal.enters_wake("", "bob"),
                wake_signal.enters_wake(None, None)]
    assert await store.write(wakes) == [True, True, False, False, False]
    assert store.published == [(WAKE, {"identity": "ann"}), (WAKE, {"identity": "ann"}),
                               (WAKE_CHANGED, {"identity": "ann"})]


async def test_a_guard_holds_a_pair_s_pulses_to_one_each_but_not_the_server_s(store):
    def guard() -> None:
        now = to_db(START)
        Guard.create(kind="mail_loop", scope="mail:ann,ben", members="ann,ben", messages=41, minutes=2,
                     tripped_at=now, until=now + timedelta(minutes=15))

    def wakes() -> list[bool]:
        return [wake_signal.enters_wake("ann", "ben"), wake_signal.enters_wake("ann", "ben"),
                wake_signal.enters_wake("ann", None), wake_signal.enters_wake("ann", "cat"),
                wake_signal.enters_wake("ben", "ann")]
    await store.write(guard)
    assert await store.write(wakes) == [True, False, True, True, True]
    assert store.published == [(WAKE, {"identity": "ann"}), (WAKE_CHANGED, {"identity": "ann"}),
                               (WAKE, {"identity": "ann"}), (WAKE, {"identity": "ann"}),
                               (WAKE, {"identity": "ben"})]
