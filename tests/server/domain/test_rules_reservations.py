"""Reservation rules through the store, no HTTP, on both backends (domain/reservations.py; over HTTP:
tests/server/api/test_reservations.py): a reservation and its event whole, conflicts (exclusive or shared, the
holder's own, the scope, expiry to the instant) with their words and nothing written, the list's filters and
order, renew and release with their refusals, the expiry pass, and the holder's wake items (expired, expiring).
Fast: the mutation run of the module uses these."""
from __future__ import annotations

from datetime import timedelta

import pytest

from coordserver.domain import identities, project_access, reservations
from coordserver.errors import Conflict, Forbidden, Invalid, NotFound
from coordserver.events.channels import LEASES, WAKE
from coordserver.models import Project, Reservation, User
from coordserver.timeutil import iso, to_db
from tests.server.domain.conftest import START, who, published, last_event_id, logged_after as logged, while_held, restricted_project


def at(**delta) -> str | None:
    return iso(START + timedelta(**delta))


async def reserve(store, identity: str, resource: str, ttl: int = 600, **fields) -> dict:
    return await store.write(reservations.create, who(identity), {"resource": resource, "ttl_seconds": ttl, **fields})


async def listed(store, identity: str = "alice", resource=None, holder=None, project_id=None) -> list[dict]:
    return await store.read(reservations.list_reservations, who(identity), resource, holder, project_id)


def rows() -> list[tuple]:
    return [(r.id, r.resource, r.holder, r.expires_at, r.ttl_seconds, r.expired_at)
            for r in Reservation.select().order_by(Reservation.id)]


async def refused(kind, message: str, call):
    with pytest.raises(kind) as error:
        await call
    assert error.value.message == message
    return error.value


# --- reserve ---------------------------------------------------------------------------------------------------

async def test_a_reservation_and_its_event_whole(store):
    made = await reserve(store, "alice", "./src//", 600, reason="refactor")
    expected = {"id": made["id"], "resource": "src/**", "exclusive": True, "holder": "alice", "reason": "refactor",
                "projectId": None, "ttlSeconds": 600, "createdAt": at(), "expiresAt": at(minutes=10),
                "expired": False}
    assert made == expected
    assert published(store, LEASES) == [{"dueAt": at(minutes=10)}]
    assert await store.read(logged) == [
        ("reservation_changed", {"type": "reservation_changed", "reservationId": made["id"], "change": "created",
                                 "reservation": expected, "by": "alice"}, None)]
    shared = await reserve(store, "alice", "docs/*.md", 10, exclusive=False)
    assert (shared["exclusive"], shared["reason"], shared["ttlSeconds"], shared["expiresAt"]) == (
        False, None, 10, at(seconds=10))
    assert await listed(store, "bob") == [shared, expected]  # soonest to end first


async def test_what_a_new_reservation_may_carry(store):
    project = await store.write(restricted_project, ["alice"])
    await refused(Invalid, "resource is required", reserve(store, "alice", "  "))
    await refused(Invalid, "exclusive must be true or false", reserve(store, "alice", "a", exclusive="yes"))
    await refused(Invalid, "exclusive must be true or false", reserve(store, "alice", "a", exclusive=None))
    for bad in (9, 86_401, "60", True, 1.5, None):
        await refused(Invalid, "ttlSeconds must be an integer from 10 to 86400", reserve(store, "alice", "a", bad))
    for bad in ("x" * 501, 5, ["r"]):
        await refused(Invalid, "reason must be a string of at most 500 characters",
                      reserve(store, "alice", "a", reason=bad))
    await refused(NotFound, "Project not found", reserve(store, "bob", "a", project_id=project))
    await refused(NotFound, "Project not found", reserve(store, "alice", "a", project_id="nope"))
    assert await store.read(rows) == [] and await store.read(logged) == []
    assert (await reserve(store, "alice", "a", 10, reason="r" * 500))["reason"] == "r" * 500
    assert (await reserve(store, "alice", "b", 86_400))["expiresAt"] == at(days=1)
    in_project = await reserve(store, "alice", "a", project_id=project)
    assert in_project["projectId"] == project


async def test_conflicts_with_others_exclusive_or_shared_and_nothing_written(store):
    mine = await reserve(store, "alice", "src/**")
    await reserve(store, "bob", "docs/*.md", exclusive=False)  # elsewhere: no part of the conflict
    own = await reserve(store, "alice", "src/app.py")  # a holder's own never conflict
    mark, before = await store.read(last_event_id), await store.read(rows)
    store.published.clear()
    error = await refused(Conflict, "src/app.py overlaps 2 reservations held by others",
                          reserve(store, "bob", "src/app.py", exclusive=False))
    assert error.extra == {"conflicts": [{"id": mine["id"], "holder": "alice", "resource": "src/**",
                                          "exclusive": True, "expiresAt": at(minutes=10)},
                                         {"id": own["id"], "holder": "alice", "resource": "src/app.py",
                                          "exclusive": True, "expiresAt": at(minutes=10)}]}
    await refused(Conflict, "src/x.py overlaps a reservation held by others",
                  reserve(store, "bob", "src/x.py", exclusive=False))
    await refused(Conflict, "docs/a.md overlaps a reservation held by others", reserve(store, "carol", "docs/a.md"))
    error = await refused(Conflict, "** overlaps 3 reservations held by others", reserve(store, "carol", "/"))
    assert [c["resource"] for c in error.extra["conflicts"]] == ["src/**", "docs/*.md", "src/app.py"]
    assert await store.read(rows) == before and await store.read(logged, mark) == [] and store.published == []
    both_shared = await reserve(store, "carol", "docs/a.md", exclusive=False)  # shared ones coexist
    assert both_shared["holder"] == "carol"
    assert (await reserve(store, "carol", "lib/**"))["resource"] == "lib/**"  # no overlap


async def test_only_reservations_in_force_in_the_same_scope_conflict(store):
    project = await store.write(restricted_project, ["alice", "bob"])
    other = await store.write(restricted_project, ["alice", "bob"])
    await reserve(store, "alice", "src/**", 60, project_id=project)
    await reserve(store, "bob", "src/**", project_id=other)  # another project
    await reserve(store, "bob", "src/**")  # no project
    await refused(Conflict, "src/a.py overlaps a reservation held by others",
                  reserve(store, "bob", "src/a.py", project_id=project))
    store.clock.advance(seconds=59)
    await refused(Conflict, "src/a.py overlaps a reservation held by others",
                  reserve(store, "bob", "src/a.py", project_id=project))
    store.clock.advance(seconds=1)  # its end, to the instant: no longer in force
    taken = await reserve(store, "bob", "src/a.py", project_id=project)
    assert taken["projectId"] == project


async def test_reserving_again_clears_the_holders_expired_one_of_that_resource(store):
    project = await store.write(restricted_project, ["alice"])
    gone = await reserve(store, "alice", "src/**", 10, exclusive=False)
    other = await reserve(store, "alice", "lib/**", 10)
    scoped = await reserve(store, "alice", "src/**", 10, project_id=project)
    bobs = await reserve(store, "bob", "src/**", 10, exclusive=False)
    live = await reserve(store, "alice", "src/**", 600, exclusive=False)
    store.clock.advance(seconds=10)
    assert await store.write(reservations.expire_due) == 4
    again = await reserve(store, "alice", "src/**", 60)
    left = [(r[0], r[5] is not None) for r in await store.read(rows)]
    assert left == [(other["id"], True), (scoped["id"], True), (bobs["id"], True), (live["id"], False),
                    (again["id"], False)]
    assert gone["id"] not in [r[0] for r in await store.read(rows)]
    assert [i["id"] for i in (await store.read(reservations.expired_items, "alice", 10))[0]] == [
        other["id"], scoped["id"]]


# --- read ------------------------------------------------------------------------------------------------------

async def test_the_list_its_filters_and_who_sees_what(store):
    project = await store.write(restricted_project, ["alice"])
    a = await reserve(store, "alice", "src/**", 300)
    b = await reserve(store, "bob", "docs/*.md", 120)
    c = await reserve(store, "alice", "lib/x.py", 600, project_id=project)
    d = await reserve(store, "bob", "tmp/", 120)
    assert await listed(store, "alice") == [b, d, a, c]  # by end, then id
    assert await listed(store, "bob") == [b, d, a]  # the hidden project's left out
    assert await listed(store, "admin") == [b, d, a, c]
    assert await listed(store, "alice", holder=" Bob ") == [b, d]
    assert await listed(store, "alice", holder="  ") == [b, d, a, c]
    assert await listed(store, "alice", project_id=project) == [c]
    assert await listed(store, "alice", resource="src/app.py") == [a]
    assert await listed(store, "alice", resource="**/*.py") == [d, a, c]  # tmp/x.py, src/x.py, lib/x.py
    assert await listed(store, "alice", resource="  ") == [b, d, a, c]
    store.clock.advance(minutes=2)  # b and d end, to the instant
    assert await listed(store, "alice") == [a, c]
    await refused(NotFound, "Reservation not found", store.write(reservations.renew, who("bob"), c["id"], None))
    await refused(NotFound, "Reservation not found", store.write(reservations.release, who("bob"), c["id"]))
    await refused(NotFound, "Reservation not found", store.write(reservations.release, who("bob"), 999_999))

    def stored_admin():  # an admin users row, but the caller's token is not an admin's: the row does not count
        identities.issue_token("carol", False, None, "x")
        User.update(is_admin=True).where(User.id == "carol").execute()
    await store.write(stored_admin)
    assert await listed(store, "carol") == [a]
    await refused(NotFound, "Project not found", reserve(store, "carol", "x", project_id=project))


async def test_ties_are_broken_by_id(store):
    """Reservations ending, or expired, at the same instant come in the order they were made, whatever order the
    rows were last written in (on PostgreSQL an updated row moves)."""
    a = await reserve(store, "alice", "a", 600)
    b = await reserve(store, "alice", "b", 300)
    c = await reserve(store, "alice", "c", 120)
    d = await reserve(store, "alice", "d", 60)
    a = await store.write(reservations.renew, who("alice"), a["id"], 300)  # now ends with b
    assert [r["id"] for r in await listed(store)] == [d["id"], c["id"], a["id"], b["id"]]
    store.clock.advance(minutes=2)
    assert await store.write(reservations.expire_due) == 2  # d, then c: one instant, written d first

    def expired_ids() -> list[int]:
        return [i["id"] for i in reservations.expired_items("alice", 10)[0]]
    assert await store.read(expired_ids) == [c["id"], d["id"]]
    store.clock.advance(minutes=3)
    assert await store.write(reservations.expire_due, 1) == 1
    assert await store.read(expired_ids) == [c["id"], d["id"], a["id"]]


# --- renew, release --------------------------------------------------------------------------------------------

async def test_renew_by_the_holder_while_in_force(store):
    made = await reserve(store, "alice", "src/**", 600)
    others = await reserve(store, "bob", "lib/**", 3600)
    store.clock.advance(minutes=4)
    mark = await store.read(last_event_id)
    store.published.clear()
    again = await store.write(reservations.renew, who("alice"), made["id"], None)  # its own length, from now
    assert again == {**made, "expiresAt": at(minutes=14)}
    assert published(store, LEASES) == [{"dueAt": at(minutes=14)}]
    assert await store.read(logged, mark) == [
        ("reservation_changed", {"type": "reservation_changed", "reservationId": made["id"], "change": "renewed",
                                 "reservation": again, "by": "alice"}, None)]
    shorter = await store.write(reservations.renew, who("alice"), made["id"], 10)
    assert shorter == {**made, "ttlSeconds": 10, "expiresAt": at(minutes=4, seconds=10)}
    assert await listed(store, "bob", holder="bob") == [others]  # only the one renewed changed
    before = await store.read(rows)
    await refused(Forbidden, "Only its holder (alice) may renew a reservation",
                  store.write(reservations.renew, who("admin"), made["id"], None))
    for bad in (9, 86_401, True):
        await refused(Invalid, "ttlSeconds must be an integer from 10 to 86400",
                      store.write(reservations.renew, who("alice"), made["id"], bad))
    store.clock.advance(seconds=10)  # its end, to the instant
    await refused(Conflict, "The reservation has expired: reserve the resource again",
                  store.write(reservations.renew, who("alice"), made["id"], None))
    assert await store.read(rows) == before
    await refused(Conflict, "The reservation has expired: reserve the resource again",  # before its length
                  store.write(reservations.renew, who("alice"), made["id"], 5))
    store.clock.advance(seconds=1)
    await store.write(reservations.expire_due)
    await refused(Conflict, "The reservation has expired: reserve the resource again",
                  store.write(reservations.renew, who("alice"), made["id"], None))
    store.clock.advance(seconds=-60)  # marked expired, whatever its end says
    await refused(Conflict, "The reservation has expired: reserve the resource again",
                  store.write(reservations.renew, who("alice"), made["id"], 5))


async def test_release_by_the_holder_or_an_admin(store):
    project = await store.write(restricted_project, ["alice", "bob"])
    mine = await reserve(store, "alice", "src/**", project_id=project)
    other = await reserve(store, "alice", "lib/**")
    await refused(Forbidden, "Only its holder (alice) or an admin may release a reservation",
                  store.write(reservations.release, who("bob"), mine["id"]))
    mark = await store.read(last_event_id)
    assert await store.write(reservations.release, who("alice"), mine["id"]) is None
    assert await store.write(reservations.release, who("admin"), other["id"]) is None
    assert await store.read(rows) == []
    assert await store.read(logged, mark) == [
        ("reservation_changed", {"type": "reservation_changed", "reservationId": mine["id"], "change": "released",
                                 "reservation": mine, "by": "alice"}, ["alice", "bob", "cre", "dl", "pl"]),
        ("reservation_changed", {"type": "reservation_changed", "reservationId": other["id"], "change": "released",
                                 "reservation": other, "by": "admin"}, None)]
    await refused(NotFound, "Reservation not found", store.write(reservations.release, who("alice"), mine["id"]))


async def test_the_event_of_a_project_reservation_reaches_its_holder_only_while_they_see_it(store):
    project = await store.write(restricted_project, ["alice", "bob"])
    made = await reserve(store, "bob", "src/**", 10, project_id=project)

    def retag(tagged):
        Project.update(tagged_users=tagged).where(Project.id == project).execute()
        project_access.store_tags(project, tagged)
    await store.write(retag, ["alice"])  # the holder no longer sees the project
    mark = await store.read(last_event_id)
    store.clock.advance(seconds=10)
    assert await store.write(reservations.expire_due) == 1
    [(_kind, data, audience)] = await store.read(logged, mark)
    assert (data["change"], audience) == ("expired", ["alice", "cre", "dl", "pl"])
    assert made["holder"] == "bob"


# --- expiry and the wake ---------------------------------------------------------------------------------------

async def test_the_expiry_pass_marks_what_is_due_once_and_tells_the_holder(store):
    first = await reserve(store, "alice", "a", 60)
    second = await reserve(store, "bob", "b", 30)
    third = await reserve(store, "alice", "c", 120)
    assert await store.read(reservations.next_due) == START + timedelta(seconds=30)
    mark = await store.read(last_event_id)
    store.published.clear()
    store.clock.advance(seconds=29)
    assert await store.write(reservations.expire_due) == 0
    store.clock.advance(seconds=31)  # both ends passed, the second's to the instant
    assert await store.write(reservations.expire_due, 1) == 1  # soonest first, up to the limit
    assert await store.write(reservations.expire_due, 1) == 1
    assert await store.write(reservations.expire_due) == 0
    assert await store.read(reservations.next_due) == START + timedelta(minutes=2)
    assert await store.read(logged, mark) == [
        ("reservation_changed", {"type": "reservation_changed", "reservationId": r["id"], "change": "expired",
                                 "reservation": {**r, "expired": True}, "by": None}, None)
        for r in (second, first)]
    assert published(store, WAKE) == [{"identity": "bob"}, {"identity": "alice"}]
    assert await listed(store, "alice") == [third]
    store.clock.advance(minutes=1)
    assert await store.write(reservations.expire_due) == 1
    assert await store.read(reservations.next_due) is None


async def test_the_holders_expired_items(store):
    made = [await reserve(store, "alice", name, ttl) for name, ttl in (("b", 20), ("a", 10), ("c", 10))]
    await reserve(store, "bob", "d", 10)
    store.clock.advance(seconds=10)
    await store.write(reservations.expire_due)
    store.clock.advance(seconds=10)
    await store.write(reservations.expire_due)

    def item(r: dict, seconds: int) -> dict:
        return {"source": "reservation_expired", "id": r["id"], "summary": r["resource"],
                "action": f"Your reservation ran out: reserve it again (POST /api/reservations) if you still need "
                          f"it, or release it (DELETE /api/reservations/{r['id']}) to clear this.",
                "priority": "normal", "projectId": None, "ephemeral": False, "_at": START + timedelta(seconds=seconds)}
    expected = [item(made[1], 10), item(made[2], 10), item(made[0], 20)]
    assert await store.read(reservations.expired_items, "alice", 10) == (expected, 3)
    assert await store.read(reservations.expired_items, "alice", 3) == (expected, 3)
    assert await store.read(reservations.expired_items, "alice", 2) == (expected[:2], 3)
    assert await store.read(reservations.expired_items, "alice", 1) == (expected[:1], 3)
    assert await store.read(reservations.expired_items, "carol", 2) == ([], 0)
    await store.write(reservations.release, who("alice"), made[1]["id"])
    assert await store.read(reservations.expired_items, "alice", 10) == ([expected[1], expected[2]], 2)


async def test_the_holders_expiring_items_and_when_they_change(store):
    project = await store.write(restricted_project, ["alice"])
    short = await reserve(store, "alice", "a", 600, project_id=project)  # warns from 8:00, ends at 10:00
    long = await reserve(store, "alice", "b", 3600)  # warns from 55:00
    soon = await reserve(store, "alice", "c", 700)  # warns from 9:20, ends at 11:40
    await reserve(store, "bob", "d", 60)

    def expiring(seconds: int, limit: int = 10):
        return reservations.expiring_items("alice", START + timedelta(seconds=seconds), limit)

    def item(r: dict, warn_seconds: int) -> dict:
        return {"source": "reservation_expiring", "id": r["id"], "summary": r["resource"],
                "expiresAt": r["expiresAt"],
                "action": f"Your reservation runs out at {r['expiresAt']}: renew it (POST /api/reservations/"
                          f"{r['id']}/renew) if you still need it, or release it (DELETE /api/reservations/"
                          f"{r['id']}).",
                "priority": "high", "projectId": r["projectId"], "ephemeral": False,
                "_at": START + timedelta(seconds=warn_seconds)}
    assert await store.read(expiring, 0) == ([], 0, START + timedelta(minutes=8))
    assert await store.read(expiring, 480) == ([item(short, 480)], 1, START + timedelta(seconds=560))
    both = [item(short, 480), item(soon, 560)]
    assert await store.read(expiring, 570) == (both, 2, START + timedelta(minutes=10))
    assert await store.read(expiring, 570, 1) == (both[:1], 2, START + timedelta(minutes=10))
    assert await store.read(expiring, 600) == ([item(soon, 560)], 1, START + timedelta(seconds=700))  # ended
    assert await store.read(expiring, 3540) == ([item(long, 3300)], 1, START + timedelta(hours=1))
    assert await store.read(expiring, 3600) == ([], 0, None)
    await store.write(reservations.release, who("alice"), short["id"])
    assert await store.read(expiring, 570) == ([item(soon, 560)], 1, START + timedelta(seconds=700))
    await store.write(lambda: Reservation.update(expired_at=to_db(START)).where(
        Reservation.id == soon["id"]).execute())
    assert await store.read(expiring, 570) == ([], 0, START + timedelta(minutes=55))


# --- two processes on one PostgreSQL -------------------------------------------------------------------------

async def test_two_creates_at_once_never_both_win(two_stores):
    """The conflict check and the insert are one decision: a create in another process waits for one in progress
    (its transaction held open a moment after its insert), then sees it and is refused."""
    import asyncio
    import threading
    import time
    here, there = two_stores
    held = threading.Event()

    def first():
        made = reservations.create(who("alice"), {"resource": "src/**", "ttl_seconds": 600})
        held.set()
        time.sleep(0.5)
        return made
    mine = asyncio.ensure_future(here.write(first))
    assert await asyncio.to_thread(held.wait, 10)
    with pytest.raises(Conflict) as refused:
        await there.write(reservations.create, who("bob"), {"resource": "src/a.py", "ttl_seconds": 600})
    made = await mine
    assert refused.value.extra["conflicts"] == [{"id": made["id"], "holder": "alice", "resource": "src/**",
                                                 "exclusive": True, "expiresAt": at(minutes=10)}]
    assert [r[1] for r in await here.read(rows)] == ["src/**"]


async def test_a_renewal_racing_the_expiry_elsewhere_is_refused(two_stores):
    """The renewal read the reservation in force, but another process's expiry pass marked it expired before the
    renewal's write: the write waits for that unit and then finds nothing in force."""
    here, there = two_stores
    made = await here.write(reservations.create, who("alice"), {"resource": "src/**", "ttl_seconds": 60})
    here.clock.advance(seconds=60)  # this process's pass is due; the other's clock has not got there
    with pytest.raises(Conflict) as refused:
        await while_held(here, reservations.expire_due,
                         lambda: there.write(reservations.renew, who("alice"), made["id"], None))
    assert refused.value.message == "The reservation has expired: reserve the resource again"
    [row] = await here.read(rows)
    assert (row[3], row[5]) == (to_db(START + timedelta(seconds=60)), to_db(START + timedelta(seconds=60)))


async def test_of_two_releases_at_once_one_is_not_found(two_stores):
    here, there = two_stores
    made = await here.write(reservations.create, who("alice"), {"resource": "src/**", "ttl_seconds": 60})
    with pytest.raises(NotFound) as refused:
        await while_held(here, lambda: reservations.release(who("alice"), made["id"]),
                         lambda: there.write(reservations.release, who("admin"), made["id"]))
    assert refused.value.message == "Reservation not found"
    assert [kind for kind, data, _ in await here.read(logged) if data["change"] == "released"] == [
        "reservation_changed"]
