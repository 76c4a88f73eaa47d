"""Task leases through the store, no HTTP, on both backends (domain/leases.py and domain/lease_changes.py; over
HTTP: tests/server/api/test_leases.py): the bounds of a lease, the wake's warning lead time to the instant, a
claim's and a renewal's lease and what each tells the timer pass, renew's refusals in their words with nothing
written, and the expiry pass: what is due to the instant, the task back in ready, its history, its events and
their audiences, the wake pulses, and the lapse items of the former holder and the creator.
Fast: the mutation runs of both modules use these."""
from __future__ import annotations

from datetime import timedelta

import pytest

from coordserver.domain import lease_changes, leases, project_access, swarm
from coordserver.errors import Conflict, Forbidden, Invalid, NotFound
from coordserver.events.channels import LEASES, WAKE
from coordserver.models import Project, Task
from coordserver.timeutil import iso, to_db
from tests.server.domain.conftest import KNOWN, START, who, published, last_event_id, logged_after as logged, restricted_project

MISSING = "00000000-0000-0000-0000-000000000000"


def at(**delta) -> str | None:
    return iso(START + timedelta(**delta))


async def new_task(store, by: str = "alice", **body) -> dict:
    return await store.write(swarm.create_task, who(by), {"title": "Fix login", **body}, KNOWN)


async def move(store, identity: str, task_id: str, status: str, seconds: int | None = None, reason=None) -> dict:
    return await store.write(swarm.move_task, who(identity), task_id, status, reason, None, seconds)


async def renew(store, identity: str, task_id: str, seconds=None) -> dict:
    return await store.write(lease_changes.renew, who(identity), task_id, seconds)


def history(task_id: str) -> list[tuple]:
    return [(e["kind"], e["actorUserId"], e["beforeState"], e["afterState"], e["createdAt"])
            for e in swarm.list_task_events(who("admin"), task_id, 100)]


def retag(project_id: str, tagged: list[str]) -> None:
    Project.update(tagged_users=tagged).where(Project.id == project_id).execute()
    project_access.store_tags(project_id, tagged)


# --- bounds and the warning's lead time (pure) ---------------------------------------------------------------

def test_lease_seconds_are_an_integer_within_the_bounds():
    assert (leases.LEASE_MIN, leases.LEASE_MAX) == (60, 86_400)
    assert leases.valid_lease_seconds(60) == 60 and leases.valid_lease_seconds(86_400) == 86_400
    for bad in (59, 86_401, 0, -60, "60", True, False, 1.5, 60.0, None):
        with pytest.raises(Invalid) as refused:
            leases.valid_lease_seconds(bad)
        assert refused.value.message == "leaseSeconds must be an integer from 60 to 86400", bad


def test_the_warning_starts_in_the_last_fifth_at_most_five_minutes_before_the_end():
    end = START + timedelta(hours=1)
    assert leases.warn_from(end, 600) == end - timedelta(seconds=120)  # a fifth
    assert leases.warn_from(end, 1499) == end - timedelta(seconds=299.8)
    assert leases.warn_from(end, 1500) == end - timedelta(seconds=300)  # a fifth is five minutes
    assert leases.warn_from(end, 3600) == end - timedelta(seconds=300)  # at most five minutes
    assert leases.warn_from(end, None) == end - timedelta(seconds=60)  # length unknown: a fifth of five minutes
    assert leases.warn_from(end, 0) == end - timedelta(seconds=60)
    start = end - timedelta(seconds=120)
    assert leases.warning(end, 600, start) is True
    assert leases.warning(end, 600, start - timedelta(microseconds=1)) is False
    assert leases.warning(end, 600, end + timedelta(hours=1)) is True


def test_when_the_warnings_next_change_with_nothing_written():
    first, second = START + timedelta(minutes=10), START + timedelta(minutes=30)
    holds = [(second, 3600), (first, 600)]  # warnings from 25:00 and 8:00
    assert leases.warnings_change_at(holds, START) == START + timedelta(minutes=8)
    assert leases.warnings_change_at(holds, START + timedelta(minutes=8)) == first  # a start at now is past
    assert leases.warnings_change_at(holds, first) == START + timedelta(minutes=25)
    assert leases.warnings_change_at(holds, START + timedelta(minutes=25)) == second
    assert leases.warnings_change_at(holds, second) is None
    assert leases.warnings_change_at([], START) is None


# --- a lease taken and renewed ---------------------------------------------------------------------------------

async def test_a_claim_takes_a_lease_and_the_holder_renews_it(store):
    made = await new_task(store)
    assert "leaseExpiresAt" not in made
    store.clock.advance(minutes=1)
    claimed = await move(store, "bob", made["id"], "in_progress", 600)
    assert claimed == {**made, "status": "in_progress", "assigneeUserId": "bob", "updatedAt": at(minutes=1),
                       "leaseExpiresAt": at(minutes=11)}
    assert published(store, LEASES) == [{"dueAt": at(minutes=11)}]
    store.published.clear()
    mark = await store.read(last_event_id)
    store.clock.advance(minutes=4)
    again = await renew(store, "bob", made["id"])  # its own length again, from now
    assert again == {**claimed, "updatedAt": at(minutes=5), "leaseExpiresAt": at(minutes=15)}
    assert published(store, LEASES) == [{"dueAt": at(minutes=15)}]
    assert await store.read(logged, mark) == [
        ("swarm_task_updated", {"type": "swarm_task_updated", "taskId": made["id"], "title": "Fix login",
                                "status": "in_progress", "actor": "bob"}, None)]
    longer = await renew(store, "bob", made["id"], 3600)
    assert longer == {**again, "leaseExpiresAt": at(minutes=65)}
    shorter = await renew(store, "bob", made["id"], 60)  # a given length is the lease's length from then on
    store.clock.advance(seconds=59)
    assert (await renew(store, "bob", made["id"]))["leaseExpiresAt"] == at(minutes=6, seconds=59)
    assert shorter["leaseExpiresAt"] == at(minutes=6)
    assert await store.read(lambda: Task.get_by_id(made["id"]).lease_seconds) == 60


async def test_renew_refusals_in_their_words_and_nothing_written(store):
    made = await new_task(store)
    unclaimed = await new_task(store, title="Nobody's")
    await move(store, "bob", made["id"], "in_progress", 60)
    plain = await new_task(store, title="No lease")
    await move(store, "bob", plain["id"], "in_progress")
    mark = await store.read(last_event_id)
    rows = await store.read(lambda: sorted((t.id, t.status, t.assignee_user_id, t.lease_expires_at, t.updated_at)
                                           for t in Task.select()))
    store.published.clear()

    async def refused(kind, message, identity, task_id, seconds=None):
        with pytest.raises(kind) as error:
            await renew(store, identity, task_id, seconds)
        assert error.value.message == message

    await refused(Forbidden, "Only the task's holder (bob) may renew its lease", "alice", made["id"])
    await refused(Forbidden, "Only the task's holder (nobody) may renew its lease", "bob", unclaimed["id"])
    await refused(NotFound, "Task not found", "bob", MISSING)
    await refused(Conflict, "Task has no lease: claim it with leaseSeconds to take one", "bob", plain["id"])
    for bad in (59, 86_401, "60", True, 1.5):
        await refused(Invalid, "leaseSeconds must be an integer from 60 to 86400", "bob", made["id"], bad)
    store.clock.advance(seconds=60)  # the end of the lease, to the instant
    await refused(Conflict, "The lease has run out; the task returns to ready", "bob", made["id"])
    assert await store.read(logged, mark) == [] and store.published == []
    assert await store.read(lambda: sorted((t.id, t.status, t.assignee_user_id, t.lease_expires_at, t.updated_at)
                                           for t in Task.select())) == rows
    await move(store, "bob", plain["id"], "review")
    await refused(Conflict, "Task is review, not in progress: there is no lease to renew", "bob", plain["id"])


async def test_a_lease_is_set_only_on_the_holders_task_in_progress(store):
    made = await new_task(store)
    for task_id, holder in ((made["id"], "bob"), (MISSING, "bob")):
        with pytest.raises(Conflict) as refused:
            await store.write(leases.set_lease, task_id, holder, 600)
        assert refused.value.message == "Task changed meanwhile; reload and retry"
    await move(store, "bob", made["id"], "in_progress")
    with pytest.raises(Conflict):
        await store.write(leases.set_lease, made["id"], "carol", 600)
    with pytest.raises(Invalid):
        await store.write(leases.set_lease, made["id"], "bob", 59)
    assert await store.read(lambda: Task.get_by_id(made["id"]).lease_expires_at) is None
    store.clock.advance(minutes=2)
    await store.write(leases.set_lease, made["id"], "bob", 600)
    task = await store.read(swarm.visible_task, made["id"], who("bob"))
    assert (swarm.task_json(task)["leaseExpiresAt"], swarm.task_json(task)["updatedAt"], task.lease_seconds) == (
        at(minutes=12), at(minutes=2), 600)


async def test_lease_columns_clear_any_lapse(store):
    def columns():
        return leases.lease_columns(120)
    assert await store.write(columns) == {"lease_expires_at": to_db(START + timedelta(minutes=2)),
                                          "lease_seconds": 120, "lease_lapsed_by": None, "lease_lapsed_at": None}
    assert published(store, LEASES) == [{"dueAt": at(minutes=2)}]


# --- expiry ----------------------------------------------------------------------------------------------------

async def test_the_expiry_pass_returns_what_is_due_to_ready_and_tells_holder_and_creator(store):
    made = await new_task(store)
    kept = await new_task(store, title="Kept alive")
    loose = await new_task(store, title="Holderless")
    await move(store, "bob", made["id"], "in_progress", 120)
    await move(store, "bob", kept["id"], "in_progress", 300)
    await move(store, "bob", loose["id"], "in_progress", 60)
    await store.write(lambda: Task.update(assignee_user_id=None).where(Task.id == loose["id"]).execute())
    assert await store.read(lease_changes.next_due) == START + timedelta(minutes=2)  # a holder's leases only
    mark = await store.read(last_event_id)
    store.published.clear()
    store.clock.advance(minutes=1, seconds=59)
    assert await store.write(lease_changes.expire_due) == 0
    store.clock.advance(seconds=1)  # exactly the end
    assert await store.write(lease_changes.expire_due) == 1
    assert await store.write(lease_changes.expire_due) == 0
    back = swarm.task_json(await store.read(swarm.visible_task, made["id"], who("alice")))
    assert back == {**made, "updatedAt": at(minutes=2)}  # ready, unassigned, no lease
    assert (await store.read(history, made["id"]))[0] == (
        "lease_expired", "bob", {"status": "in_progress", "assigneeUserId": "bob", "leaseExpiresAt": at(minutes=2)},
        {"status": "ready", "assigneeUserId": None}, at(minutes=2))
    assert await store.read(logged, mark) == [
        ("swarm_task_updated", {"type": "swarm_task_updated", "taskId": made["id"], "title": "Fix login",
                                "status": "ready", "previousStatus": "in_progress", "actor": "bob"}, None),
        ("task_lease_expired", {"type": "task_lease_expired", "taskId": made["id"], "title": "Fix login",
                                "holder": "bob", "creator": "alice", "leaseExpiresAt": at(minutes=2)},
         ["alice", "bob"])]
    assert published(store, WAKE) == [{"identity": "alice"}, {"identity": "bob"}]
    assert await store.read(lease_changes.next_due) == START + timedelta(minutes=5)
    assert (await store.read(swarm.visible_task, loose["id"], who("alice"))).status == "in_progress"
    store.clock.advance(minutes=3)
    assert await store.write(lease_changes.expire_due) == 1
    assert await store.read(lease_changes.next_due) is None


async def test_the_pass_takes_the_soonest_first_up_to_its_limit(store):
    ids = []
    for n, seconds in enumerate((180, 60, 120, 120, 120, 120, 120)):
        made = await new_task(store, title=f"t{n}")
        await move(store, "bob", made["id"], "in_progress", seconds)
        ids.append(made["id"])
    working = await new_task(store, title="No lease")  # in progress, held, no lease: never due
    await move(store, "carol", working["id"], "in_progress")
    store.clock.advance(minutes=5)

    def lapsed_in_order() -> list[str]:
        return [t.id for t in Task.select().where(Task.status == "ready").order_by(Task.updated_at)]
    order: list[str] = []
    for _ in range(7):
        assert await store.write(lease_changes.expire_due, 1) == 1
        order.append(next(i for i in await store.read(lapsed_in_order) if i not in order))
        store.clock.advance(seconds=1)
    assert order == [ids[1], *sorted(ids[2:]), ids[0]]  # by the lease's end, then id
    assert await store.write(lease_changes.expire_due, 1) == 0
    assert (await store.read(swarm.visible_task, working["id"], who("carol"))).status == "in_progress"


async def test_a_task_expired_or_renewed_meanwhile_is_skipped(store):
    """What a pass finds when another process expired the task first, or its holder renewed it, after this pass
    read what is due (one unit here: the task is expired through the pass's own step)."""
    gone = await new_task(store)
    kept = await new_task(store, title="Renewed")
    await move(store, "bob", gone["id"], "in_progress", 60)
    await move(store, "bob", kept["id"], "in_progress", 600)
    store.clock.advance(minutes=1)
    assert await store.write(lease_changes.expire_due) == 1
    now = to_db(START + timedelta(minutes=1))
    mark = await store.read(last_event_id)
    assert await store.write(lease_changes._expire, gone["id"], now) == 0  # expired already: unassigned
    assert await store.write(lease_changes._expire, kept["id"], now) == 0  # its lease runs on
    assert await store.read(logged, mark) == []
    assert (await store.read(swarm.visible_task, kept["id"], who("bob"))).status == "in_progress"


async def test_who_is_told_of_an_expiry_sees_the_project(store):
    project = await store.write(restricted_project, ["alice", "bob"])
    made = await new_task(store, projectId=project)
    await move(store, "bob", made["id"], "in_progress", 60)
    own = await new_task(store, title="Mine")
    await move(store, "alice", own["id"], "in_progress", 60)
    with pytest.raises(NotFound) as hidden:  # a task whose project the caller may not see does not exist for them
        await renew(store, "carol", made["id"])
    assert hidden.value.message == "Task not found"
    await store.write(retag, project, ["bob"])  # the creator no longer sees it
    mark = await store.read(last_event_id)
    store.published.clear()
    store.clock.advance(minutes=1)
    assert await store.write(lease_changes.expire_due) == 2
    told = {data["taskId"]: audience for kind, data, audience in await store.read(logged, mark)
            if kind == "task_lease_expired"}
    assert told == {made["id"]: ["bob"], own["id"]: ["alice"]}  # holder and creator one identity: told once
    assert sorted(p["identity"] for p in published(store, WAKE)) == ["alice", "bob"]
    updated = [audience for kind, data, audience in await store.read(logged, mark)
               if kind == "swarm_task_updated" and data["taskId"] == made["id"]]
    assert updated == [["bob", "cre", "dl", "pl"]]
    assert [i["id"] for i in (await store.read(leases.lapsed_items, "alice", 10))[0]] == [own["id"]]
    assert [(i["id"], i["projectId"]) for i in (await store.read(leases.lapsed_items, "bob", 10))[0]] == [
        (made["id"], project)]


async def test_the_lapse_items_of_the_former_holder_and_the_creator(store):
    tasks = []
    for n in range(3):
        made = await new_task(store, title=f"t{n}")
        await move(store, "bob", made["id"], "in_progress", 60 * (1 + n // 2))  # t0, t1 at 1 min; t2 at 2 min
        tasks.append(made)
    other = await new_task(store, by="carol", title="carol's")
    await move(store, "carol", other["id"], "in_progress", 60)
    store.clock.advance(minutes=1)
    assert await store.write(lease_changes.expire_due) == 3
    store.clock.advance(minutes=1)
    assert await store.write(lease_changes.expire_due) == 1
    first_two = sorted(t["id"] for t in tasks[:2])
    by_id = {t["id"]: t for t in tasks}
    holder_action = ("Your lease ran out and the task is back in ready, unassigned: claim it again (PATCH its "
                     "status to in_progress) if you are still on it.")
    creator_action = ("The lease on your task ran out and it is back in ready, unassigned: find someone for it "
                      "or claim it.")

    def item(task_id: str, action: str, minutes: int) -> dict:
        return {"source": "lease_expired", "id": task_id, "summary": by_id[task_id]["title"], "action": action,
                "priority": "normal", "formerHolder": "bob", "projectId": None, "ephemeral": False,
                "_at": START + timedelta(minutes=minutes)}
    expected = [item(first_two[0], holder_action, 1), item(first_two[1], holder_action, 1),
                item(tasks[2]["id"], holder_action, 2)]
    assert await store.read(leases.lapsed_items, "bob", 10) == (expected, 3)
    assert await store.read(leases.lapsed_items, "bob", 3) == (expected, 3)
    assert await store.read(leases.lapsed_items, "bob", 2) == (expected[:2], 3)
    assert await store.read(leases.lapsed_items, "alice", 1) == (
        [{**expected[0], "action": creator_action}], 3)
    carols, total = await store.read(leases.lapsed_items, "carol", 10)
    assert total == 1 and carols[0]["formerHolder"] == "carol" and carols[0]["action"] == holder_action
    assert await store.read(leases.lapsed_items, "dave", 10) == ([], 0)
    await move(store, "carol", tasks[2]["id"], "in_progress")  # claimed again: the notices leave
    assert await store.read(leases.lapsed_items, "bob", 10) == (expected[:2], 2)
