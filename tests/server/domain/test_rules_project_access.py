"""domain/project_access.py and domain/projects.py through the store, no HTTP (over HTTP:
tests/server/api/test_project_visibility.py, test_swarm.py): who sees a restricted project and its tasks
(the caller's token flag, or the stored facts: an unarchived admin row or a live admin token), who hears of
its tasks, and the project fields, leads, tags and archive with each refusal in words.
Fast: the mutation runs of both modules use these."""
from __future__ import annotations

from datetime import timedelta

import pytest

from coordserver.domain import identities, project_access, projects
from coordserver.errors import Forbidden, Invalid, NotFound
from coordserver.events.channels import WAKE_CHANGED
from coordserver.models import Project, ProjectTag, Task, Token, User
from coordserver.principal import Principal
from coordserver.timeutil import iso, to_db
from tests.server.domain.conftest import START

NOW = to_db(START)
KNOWN = frozenset({"cre", "pl", "dl", "tag", "out", "adm", "tokadm", "oldadm", "gone", "bob"})


def run(store, fn, *args):
    return store.run_sync(fn, *args)


def make_project(title: str, tagged: list[str] | None, created_by="cre", pl="pl", dl="dl") -> str:
    project = Project.create(title=title, color="#000000", project_lead_user_id=pl, developer_lead_user_id=dl,
                             created_by=created_by, tagged_users=tagged, created_at=NOW, updated_at=NOW)
    project_access.store_tags(project.id, tagged)
    return project.id


@pytest.fixture
def world(store):
    def setup():
        identities.issue_token("adm", False, None, "x")
        User.update(is_admin=True).where(User.id == "adm").execute()  # an admin row, its token not flagged
        identities.issue_token("tokadm", True, None, "x")  # a live admin token
        User.update(is_admin=False).where(User.id == "tokadm").execute()
        identities.issue_token("oldadm", True, None, "x")  # an admin whose row is archived...
        User.update(archived_at=NOW).where(User.id == "oldadm").execute()
        Token.update(revoked_at=NOW).where(Token.identity == "oldadm").execute()  # ...and tokens revoked
        identities.issue_token("gone", True, None, "x")  # a revoked admin token, a plain row
        User.update(is_admin=False).where(User.id == "gone").execute()
        Token.update(revoked_at=NOW).where(Token.identity == "gone").execute()
        ids = {"open": make_project("Open", None), "closed": make_project("Closed", ["tag"]),
               "leadless": make_project("Leadless", ["tag"], created_by=None, pl=None, dl=None)}
        tasks = {name: Task.create(title=name, project_id=pid, creator_user_id="cre", created_at=NOW,
                                   updated_at=NOW).id for name, pid in ids.items()}
        tasks["loose"] = Task.create(title="loose", creator_user_id="cre", created_at=NOW, updated_at=NOW).id
        return ids, tasks
    store.ids, store.tasks = run(store, setup)
    return store


def visible(store, identity, is_admin) -> set[str]:
    names = {pid: name for name, pid in store.ids.items()}
    return run(store, lambda: {names[p.id] for p in Project.select().where(
        project_access.project_visible(identity, is_admin))})


def hidden(store, identity, is_admin) -> set[str]:
    names = {pid: name for name, pid in store.ids.items()}
    return run(store, lambda: {names[p.id] for p in project_access.hidden_projects(identity, is_admin)})


def tasks_seen(store, identity, is_admin, fast=False) -> set[str]:
    condition = (lambda: project_access.task_visible_fast(identity)) if fast else \
        (lambda: project_access.task_visible(identity, is_admin))
    names = {tid: name for name, tid in store.tasks.items()}
    return run(store, lambda: {names[t.id] for t in Task.select().where(condition())})


ALL = {"open", "closed", "leadless"}


@pytest.mark.parametrize("identity, is_admin, sees", [
    ("cre", False, {"open", "closed"}), ("pl", False, {"open", "closed"}), ("dl", False, {"open", "closed"}),
    ("tag", False, ALL), ("out", False, {"open"}),
    ("out", True, ALL),                       # the caller's admin token
    ("adm", False, {"open"}),                 # the caller's token is not an admin's: the row does not count
    ("adm", None, ALL), ("tokadm", None, ALL),  # decided from the stored facts
    ("oldadm", None, {"open"}), ("gone", None, {"open"}), ("out", None, {"open"}), ("tag", None, ALL),
])
def test_who_sees_which_project_and_its_tasks(world, identity, is_admin, sees):
    assert visible(world, identity, is_admin) == sees
    assert hidden(world, identity, is_admin) == ALL - sees
    assert tasks_seen(world, identity, is_admin) == sees | {"loose"}
    if is_admin is None:
        assert tasks_seen(world, identity, None, fast=True) == sees | {"loose"}
    for name, pid in world.ids.items():
        assert run(world, project_access.sees_project, identity, pid) is (name in visible(world, identity, None))


def test_a_visible_project_or_not_found(world):
    assert run(world, project_access.visible_project, world.ids["closed"], "tag", False).title == "Closed"
    assert run(world, project_access.visible_project, world.ids["closed"], "out", True, True).title == "Closed"
    for project_id, identity in ((world.ids["closed"], "out"), ("nope", "tag"), ("", "tag"), (None, "tag"),
                                 (5, "tag")):
        with pytest.raises(NotFound) as missing:
            run(world, project_access.visible_project, project_id, identity, False)
        assert missing.value.message == "Project not found"
    assert run(world, project_access.sees_project, "out", None) is True


def test_only_who_sees_the_project_may_be_assigned(world):
    run(world, project_access.require_assignable, "tag", world.ids["closed"])
    run(world, project_access.require_assignable, None, world.ids["closed"])
    run(world, project_access.require_assignable, "out", None)
    with pytest.raises(Invalid) as refused:
        run(world, project_access.require_assignable, "out", world.ids["closed"])
    assert refused.value.message == "assigneeUserId out cannot see this task's project"
    with pytest.raises(Invalid) as refused:
        run(world, project_access.require_assignable, "out", world.ids["leadless"], "nextTaskAssigneeUserId")
    assert refused.value.message == "nextTaskAssigneeUserId out cannot see this task's project"


def test_who_hears_of_a_projects_tasks(world):
    assert run(world, project_access.audience, None) is None
    assert run(world, project_access.audience, world.ids["open"]) is None
    assert run(world, project_access.audience, "absent") is None
    assert run(world, project_access.audience, world.ids["closed"]) == ["adm", "cre", "dl", "pl", "tag", "tokadm"]
    assert run(world, project_access.audience, world.ids["leadless"]) == ["adm", "tag", "tokadm"]


def test_tags_are_stored_once_each_and_replaced(store):
    pid = run(store, make_project, "P", ["b", "a", "b"])
    def tags():
        return run(store, lambda: sorted(t.identity for t in ProjectTag.select().where(ProjectTag.project_id == pid)))
    assert tags() == ["a", "b"]
    run(store, project_access.store_tags, pid, ["c"])
    assert tags() == ["c"]
    run(store, project_access.store_tags, pid, None)
    assert tags() == []


# --- projects.py ---------------------------------------------------------------------------------

def admin(identity="adm") -> Principal:
    return Principal(identity, True)


def user(identity) -> Principal:
    return Principal(identity, False)


def create(store, viewer, body, known=KNOWN):
    return run(store, projects.create_project, viewer, body, known)


def test_creating_a_project_with_defaults(store):
    made = create(store, user("cre"), {"title": "  Site  ", "color": "#AABBCC"})
    assert made == {"id": made["id"], "title": "Site", "description": None, "websiteUrl": None, "onedevUrl": None,
                    "githubUrl": None, "dokployDeployUrl": None, "color": "#aabbcc", "projectLeadUserId": "cre",
                    "developerLeadUserId": "cre", "workHoursStart": None, "workHoursEnd": None,
                    "workHoursTimezone": "America/Chicago", "blockingMode": False, "archivedAt": None,
                    "createdAt": iso(NOW), "updatedAt": iso(NOW), "createdBy": "cre", "taggedUsers": None}


def test_creating_a_project_with_every_field(store):
    body = {"title": "Site", "color": "#000000", "description": "d", "websiteUrl": "https://w",
            "onedevUrl": "https://o",
            "githubUrl": "https://g", "dokployDeployUrl": "https://k", "projectLeadUserId": "PL",
            "developerLeadUserId": None, "workHoursStart": 0, "workHoursEnd": 23, "workHoursTimezone": "Europe/Paris",
            "blockingMode": True, "taggedUsers": ["tag", "bob", "tag"]}
    made = create(store, user("cre"), body)
    assert {k: made[k] for k in body} == {**body, "projectLeadUserId": "pl", "taggedUsers": ["bob", "tag"]}
    assert run(store, lambda: sorted(t.identity for t in ProjectTag.select())) == ["bob", "tag"]


@pytest.mark.parametrize("body, message", [
    ({"color": "#000000"}, "title and color are required"),
    ({"title": " ", "color": "#000000"}, "title and color are required"),
    ({"title": "T"}, "title and color are required"), ({"title": "T", "color": ""}, "title and color are required"),
    ({"title": 5, "color": "#000000"}, "title and color are required"),
    ({"title": "T", "color": 5}, "title and color are required"),
    ({"title": "x" * 256, "color": "#000000"}, "title is longer than 255 characters"),
    ({"title": "T", "color": "#00000"}, "color must look like #rrggbb"),
    ({"title": "T", "color": "#00000g"}, "color must look like #rrggbb"),
    ({"title": "T", "color": "#000000", "description": 5}, "description must be a string"),
    ({"title": "T", "color": "#000000", "description": "x" * 20_001}, "description is longer than 20000 characters"),
    ({"title": "T", "color": "#000000", "githubUrl": "x" * 501}, "githubUrl is longer than 500 characters"),
    ({"title": "T", "color": "#000000", "developerLeadUserId": "ghost"},
     "Unknown identity for developerLeadUserId: ghost"),
    ({"title": "T", "color": "#000000", "workHoursStart": -1}, "workHoursStart must be an hour from 0 to 23 (or null)"),
    ({"title": "T", "color": "#000000", "workHoursEnd": 24}, "workHoursEnd must be an hour from 0 to 23 (or null)"),
    ({"title": "T", "color": "#000000", "workHoursEnd": True}, "workHoursEnd must be an hour from 0 to 23 (or null)"),
    ({"title": "T", "color": "#000000", "workHoursEnd": 9.0}, "workHoursEnd must be an hour from 0 to 23 (or null)"),
    ({"title": "T", "color": "#000000", "workHoursTimezone": "Mars/Base"}, "Unknown timezone: Mars/Base"),
    ({"title": "T", "color": "#000000", "workHoursTimezone": ""},
     "workHoursTimezone must be an IANA timezone name such as America/Chicago"),
    ({"title": "T", "color": "#000000", "taggedUsers": "tag"},
     "taggedUsers must be null or an array of at most 100 identities"),
    ({"title": "T", "color": "#000000", "taggedUsers": ["tag"] * 101},
     "taggedUsers must be null or an array of at most 100 identities"),
    ({"title": "T", "color": "#000000", "taggedUsers": ["ghost"]}, "Unknown identity for taggedUsers: ghost"),
])
def test_a_refused_project_says_why_and_is_not_made(store, body, message):
    with pytest.raises(Invalid) as refused:
        create(store, user("cre"), body)
    assert refused.value.message == message
    assert run(store, lambda: Project.select().count()) == 0


def test_tagged_users_of_exactly_a_hundred_and_none_for_empty(store):
    known = frozenset(f"u{n}" for n in range(100))
    assert projects.tagged_users(None, known) is None
    assert run(store, projects.tagged_users, [], known) is None
    assert run(store, projects.tagged_users, sorted(known, reverse=True), known) == sorted(known)


def test_projects_of_one_title_are_listed_by_creation_time_then_id(store):
    stepped_back = []  # each made an hour before the one made just before it (a clock stepped back)
    for _ in range(6):
        stepped_back.append(create(store, user("cre"), {"title": "Same", "color": "#000000"})["id"])
        store.clock.advance(hours=-1)
    at_once = [create(store, user("cre"), {"title": "Twin", "color": "#000000"})["id"] for _ in range(6)]
    listed = [p["id"] for p in run(store, projects.list_projects, user("cre"), False)]
    assert listed == [*reversed(stepped_back), *sorted(at_once)]


def test_the_project_list(world):
    for title in ("b", "a", "c"):
        create(world, user("out"), {"title": title, "color": "#000000"})
    run(world, lambda: Project.update(archived_at=NOW).where(Project.title == "c").execute())
    titles = lambda viewer, archived: [p["title"] for p in run(world, projects.list_projects, viewer, archived)]
    assert titles(user("out"), False) == ["Open", "a", "b"]
    assert titles(user("out"), True) == ["Open", "a", "b", "c"]
    assert titles(user("tag"), False) == ["Closed", "Leadless", "Open", "a", "b"]
    assert titles(admin("out"), False) == ["Closed", "Leadless", "Open", "a", "b"]


async def test_updating_a_project(world):
    pid = world.ids["closed"]
    world.clock.advance(minutes=5)
    changed = await world.write(projects.update_project, user("pl"), pid,
                                {"title": "Renamed", "workHoursTimezone": None, "projectLeadUserId": "bob"}, KNOWN)
    assert (changed["title"], changed["workHoursTimezone"], changed["projectLeadUserId"], changed["updatedAt"]) == \
        ("Renamed", "America/Chicago", "bob", iso(to_db(START + timedelta(minutes=5))))
    assert world.published == [(WAKE_CHANGED, {"identity": None})]
    world.published.clear()
    same = await world.write(projects.update_project, user("tag"), pid, {}, KNOWN)
    assert same["title"] == "Renamed" and world.published == []
    # the same leads and tags, restated by someone who may not change them, are no change
    await world.write(projects.update_project, user("tag"), pid,
                      {"projectLeadUserId": "bob", "developerLeadUserId": "dl", "taggedUsers": ["tag"]}, KNOWN)


@pytest.mark.parametrize("viewer, body, message", [
    (user("tag"), {"developerLeadUserId": "bob"},
     "Only the project's leads (bob, dl) or an admin may change its leads"),
    (user("tag"), {"projectLeadUserId": None}, "Only the project's leads (bob, dl) or an admin may change its leads"),
    (user("tag"), {"taggedUsers": ["tag", "bob"]},
     "Only the project's creator, its leads or an admin may change taggedUsers"),
    (user("tag"), {"taggedUsers": None}, "Only the project's creator, its leads or an admin may change taggedUsers"),
])
async def test_who_may_change_leads_and_tags(world, viewer, body, message):
    pid = world.ids["closed"]
    await world.write(projects.update_project, user("pl"), pid, {"projectLeadUserId": "bob"}, KNOWN)
    with pytest.raises(Forbidden) as refused:
        await world.write(projects.update_project, viewer, pid, body, KNOWN)
    assert refused.value.message == message


@pytest.mark.parametrize("viewer", [user("cre"), user("pl"), user("dl"), admin("out")])
async def test_the_creator_leads_and_admins_change_tags(world, viewer):
    pid = world.ids["closed"]
    changed = await world.write(projects.update_project, viewer, pid, {"taggedUsers": ["bob"]}, KNOWN)
    assert changed["taggedUsers"] == ["bob"]
    assert run(world, lambda: [t.identity for t in ProjectTag.select().where(ProjectTag.project_id == pid)]) == ["bob"]
    assert visible(world, "tag", False) == {"open", "leadless"}


async def test_a_leadless_project_may_be_given_leads_by_anyone_who_sees_it(world):
    changed = await world.write(projects.update_project, user("tag"), world.ids["leadless"],
                                {"projectLeadUserId": "tag"}, KNOWN)
    assert changed["projectLeadUserId"] == "tag"
    with pytest.raises(NotFound):
        await world.write(projects.update_project, user("out"), world.ids["closed"], {"title": "x"}, KNOWN)


async def test_archiving_a_project_keeps_the_first_instant(world):
    pid = world.ids["open"]
    world.clock.advance(minutes=1)
    first = await world.write(projects.archive_project, user("out"), pid)
    assert first["archivedAt"] == first["updatedAt"] == iso(to_db(START + timedelta(minutes=1)))
    assert world.published == [(WAKE_CHANGED, {"identity": None})]
    world.clock.advance(minutes=1)
    again = await world.write(projects.archive_project, user("out"), pid)
    assert again["archivedAt"] == first["archivedAt"] and again["updatedAt"] == first["updatedAt"]
    with pytest.raises(NotFound):
        await world.write(projects.archive_project, user("out"), world.ids["closed"])
    # a tagged member, and an admin by its token, archive the restricted project
    assert (await world.write(projects.archive_project, user("tag"), world.ids["closed"]))["archivedAt"]
    assert (await world.write(projects.archive_project, admin("out"), world.ids["leadless"]))["archivedAt"]


async def test_a_lead_change_waits_for_one_in_progress_elsewhere(pg_cluster):
    """update_project locks the project for the unit: a lead whose leadership is being taken away by another
    process's change, still uncommitted, is judged by the leads that change leaves."""
    import asyncio
    import threading
    import time
    from coordserver.db import Store
    from coordserver.timeutil import FrozenClock
    url = pg_cluster.create_database()
    here, there = (Store(url, FrozenClock(START)) for _ in range(2))
    for each in (here, there):
        each.open()
    try:
        pid = await here.write(make_project, "P", None)
        held = threading.Event()

        def take_over():
            projects.update_project(admin("root"), pid, {"projectLeadUserId": "bob", "developerLeadUserId": "bob"},
                                    KNOWN)
            held.set()
            time.sleep(0.5)
        first = asyncio.ensure_future(here.write(take_over))
        assert await asyncio.to_thread(held.wait, 10)
        with pytest.raises(Forbidden) as refused:
            await there.write(projects.update_project, user("pl"), pid, {"developerLeadUserId": "cre"}, KNOWN)
        assert refused.value.message == "Only the project's leads (bob) or an admin may change its leads"
        await first
        row = await here.read(Project.get_by_id, pid)
        assert (row.project_lead_user_id, row.developer_lead_user_id) == ("bob", "bob")
    finally:
        for each in (here, there):
            each.close()
