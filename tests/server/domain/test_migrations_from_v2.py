"""Schema 2 -> 3 (API.md §18) -> 4 (the wake index) -> 5 (notebook read bases) -> 6 (asks) -> 7
(notebook page versions) -> 8 (alerts) -> 9 (leases, reservations) -> … -> 13 (sortKey a double): a version-2 database with projects and
tasks opens, is upgraded, and its projects stay open to everyone (taggedUsers null, createdBy null) until someone restricts them."""
from __future__ import annotations

from datetime import datetime

from coordserver.database import open_database
from coordserver.db import Store
from coordserver.migrations import SCHEMA_VERSION
from tests.helpers import client


def create_v2_database(url: str) -> tuple[str, str]:
    """A version-2 database: today's schema without what version 3 added, holding a project and a task.
    Returns (project id, task id)."""
    store = Store(url)
    store.open()
    store.close()
    database = open_database(url)
    with database.atomic():
        for table in ("project_tag", "workflow", "task_workflow"):
            database.execute_sql(f"DROP TABLE {table}")
        for column in ("created_by", "tagged_users"):
            database.execute_sql(f"ALTER TABLE project DROP COLUMN {column}")
        database.execute_sql("DROP INDEX event_to_all")  # version 4
        database.execute_sql("DROP TABLE notebook_read_base")  # version 5
        for table in ("notebook_version", "notebook_pending_editor"):  # version 7
            database.execute_sql(f"DROP TABLE {table}")
        if not store.sqlite:  # version 13: PostgreSQL's sortKey column was `real`
            database.execute_sql("ALTER TABLE task ALTER COLUMN sort_key TYPE real")
        database.execute_sql("UPDATE schema_version SET version = 2")
        now = datetime(2026, 1, 5, 12, 0, 0)
        database.execute_sql(
            "INSERT INTO project (id, title, color, project_lead_user_id, developer_lead_user_id, work_hours_timezone,"
            " blocking_mode, created_at, updated_at) VALUES ('p-old', 'Old project', '#123456', 'bob', 'bob',"
            f" 'America/Chicago', {database.param}, {database.param}, {database.param})", (False, now, now))
        database.execute_sql(
            "INSERT INTO task (id, project_id, title, creator_user_id, assignee_user_id, status, created_at, updated_at)"
            f" VALUES ('t-old', 'p-old', 'Old task', 'bob', 'carol', 'ready', {database.param}, {database.param})",
            (now, now))
    database.close()
    return "p-old", "t-old"


def test_v2_database_is_upgraded_through_every_version(make_server, database_url):
    project_id, task_id = create_v2_database(database_url)
    srv = make_server(database_url=database_url)
    alice, bob, carol = client(srv, "alice"), client(srv, "bob"), client(srv, "carol")
    old = next(p for p in alice.get("/api/swarm/projects").json()["projects"] if p["id"] == project_id)
    assert (old["createdBy"], old["taggedUsers"], old["title"]) == (None, None, "Old project")
    assert [t["id"] for t in carol.get(f"/api/swarm/tasks?projectId={project_id}").json()["tasks"]] == [task_id]
    # a lead restricts it: the tagged assignee keeps it, an outsider loses it
    assert bob.patch(f"/api/swarm/projects/{project_id}", json={"taggedUsers": ["carol"]}).status_code == 200
    assert alice.get(f"/api/swarm/tasks?projectId={project_id}").json()["tasks"] == []
    assert carol.get(f"/api/swarm/tasks?projectId={project_id}").json()["tasks"][0]["id"] == task_id
    # without a creator, only leads and admins may change who is tagged
    assert carol.patch(f"/api/swarm/projects/{project_id}", json={"taggedUsers": None}).status_code == 403
    workflow = alice.post("/api/swarm/workflows", json={"title": "after the upgrade"})
    assert workflow.status_code == 200
    for sort_key in (0.1, 1e299):  # 13: stored as sent on both backends (`real` gave 0.10000000149011612; 1e299 a 500)
        changed = bob.patch(f"/api/swarm/tasks/{task_id}", json={"sortKey": sort_key})
        assert changed.status_code == 200, changed.text
        assert carol.get(f"/api/swarm/tasks?projectId={project_id}").json()["tasks"][0]["sortKey"] == sort_key
    srv.stop()
    store = Store(database_url)
    assert store.open() == (SCHEMA_VERSION, SCHEMA_VERSION) == (14, 14)
    assert store.database.table_exists("buzz_alert_tally")  # 14
    assert store.database.table_exists("notebook_read_base")
    assert store.database.table_exists("notebook_version") and store.database.table_exists("notebook_pending_editor")
    assert store.database.table_exists("ask") and store.database.table_exists("ask_recipient")
    assert store.database.table_exists("buzz_alert")
    assert "alert_id" in {c.name for c in store.database.get_columns("buzz_event")}
    assert {"flap_resolutions", "flap_window_minutes"} <= {c.name for c in store.database.get_columns("buzz_webhook")}
    assert store.database.table_exists("guard") and store.database.table_exists("chat_wake")  # 10: loop guards
    assert "is_agent" in {c.name for c in store.database.get_columns("invite")}
    assert store.database.table_exists("reservation")  # 11: leases and reservations
    assert {"lease_expires_at", "lease_seconds", "lease_lapsed_by", "lease_lapsed_at"} <= \
        {c.name for c in store.database.get_columns("task")}
    assert {"loop_messages", "loop_minutes"} <= {c.name for c in store.database.get_columns("user")}  # 12
    store.close()
