"""Issue 32 item 3 over real HTTP and MCP, on SQLite and PostgreSQL: a recurring template of a restricted
project is invisible and unchangeable to whoever cannot see the project, on every route; the rule is
checked for every viewer × route against the project list, also after a project becomes restricted."""
from __future__ import annotations

import uuid

import pytest

from coordserver.mcp import tools
from tests.helpers import backend_server, client, ok
from tests.server.mcp.test_mcp import connect, succeeded

ROUTES = ("list", "patch", "delete")
VIEWERS = ("alice", "bob", "carol", "admin")


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def srv(request, tmp_path_factory):
    with backend_server(request, tmp_path_factory, scheduler_interval_seconds=3600, push_enabled=False) as server:
        yield server


def project(who: str, srv, tagged: list[str] | None) -> str:
    body = {"title": f"p{uuid.uuid4().hex[:6]}", "color": "#000000", "taggedUsers": tagged}
    return ok(client(srv, who).post("/api/swarm/projects", json=body))["id"]


def template(srv, project_id: str | None, who: str = "alice") -> dict:
    return ok(client(srv, who).post("/api/swarm/recurring", json={
        "title": f"t{uuid.uuid4().hex[:6]}", "detail": "secret detail", "cronExpr": "0 9 * * 1",
        "projectId": project_id, "assigneeUserId": who}))


def listed(srv, who: str) -> set[str]:
    return {t["id"] for t in ok(client(srv, who).get("/api/swarm/recurring?includeDisabled=true"))["templates"]}


def sees_project(srv, who: str, project_id: str) -> bool:
    return project_id in {p["id"] for p in ok(client(srv, who).get("/api/swarm/projects"))["projects"]}


def test_an_outsider_neither_sees_nor_changes_a_restricted_projects_template(srv):
    hidden = template(srv, project(srv=srv, who="alice", tagged=["bob"]))
    carol = client(srv, "carol")
    assert hidden["id"] not in listed(srv, "carol")
    for method, body in (("PATCH", {"title": "hijacked", "assigneeUserId": "carol"}), ("DELETE", None)):
        refused = carol.request(method, f"/api/swarm/recurring/{hidden['id']}", json=body)
        assert refused.status_code == 404 and refused.json() == {"error": "Template not found"}, refused.text
    unchanged = next(t for t in ok(client(srv, "alice").get("/api/swarm/recurring"))["templates"]
                     if t["id"] == hidden["id"])
    assert unchanged == hidden  # nothing half-written
    assert hidden["id"] in listed(srv, "bob") and hidden["id"] in listed(srv, "admin")
    assert ok(client(srv, "bob").patch(f"/api/swarm/recurring/{hidden['id']}", json={"title": "by bob"}))


def test_rule_every_viewer_and_route_follows_project_visibility(srv):
    restricted = project(srv=srv, who="alice", tagged=["bob"])
    opened = project(srv=srv, who="alice", tagged=None)
    later = project(srv=srv, who="alice", tagged=None)
    cases = {"restricted": restricted, "open": opened, "none": None, "later": later}
    made = {(who, route, kind): template(srv, pid)
            for who in VIEWERS for route in ROUTES for kind, pid in cases.items()}
    ok(client(srv, "alice").patch(f"/api/swarm/projects/{later}", json={"taggedUsers": ["carol"]}))
    for (who, route, kind), tpl in made.items():
        pid = cases[kind]
        visible = pid is None or sees_project(srv, who, pid)
        assert visible == (kind in ("open", "none") or who in ("alice", "admin")
                           or (kind, who) in (("restricted", "bob"), ("later", "carol")))
        path = f"/api/swarm/recurring/{tpl['id']}"
        if route == "list":
            assert (tpl["id"] in listed(srv, who)) == visible, (who, kind)
        elif route == "patch":
            answer = client(srv, who).patch(path, json={"enabled": False})
            assert answer.status_code == (200 if visible else 404), (who, kind, answer.text)
        else:
            answer = client(srv, who).delete(path)
            assert answer.status_code == (200 if visible else 404), (who, kind, answer.text)


async def test_mcp_reaches_no_template_of_a_hidden_project(srv):
    """No MCP tool reads or changes templates except through their routes, and none is a recurring route;
    what a template made in a hidden project is not listed over MCP either."""
    assert not [t for t in tools.BY_NAME.values() if t.path.startswith("/api/swarm/recurring")]
    hidden_project = project(srv=srv, who="alice", tagged=["bob"])
    template(srv, hidden_project)
    ok(client(srv, "alice").post("/api/swarm/tasks", json={"title": "inside", "projectId": hidden_project}))
    async with connect(srv.url, "carol") as carol:
        projects = succeeded(await carol.call_tool("list_projects", {}))["projects"]
        assert hidden_project not in {p["id"] for p in projects}
        tasks = succeeded(await carol.call_tool("list_tasks", {"includeCompleted": True}))["tasks"]
        assert hidden_project not in {t["projectId"] for t in tasks}
