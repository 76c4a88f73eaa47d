"""Operator commands: init, token create, invite create, migrate."""
from __future__ import annotations

import re

from typer.testing import CliRunner

from coordserver.cli import cli
from coordserver.migrations import SCHEMA_VERSION
from tests.helpers import client


def run(args, url):
    return CliRunner().invoke(cli, args, env={"COORD_DATABASE_URL": url, "COORD_BASE_URL": "http://coord.test"})


def test_init_prints_admin_token_once(sqlite_url, make_server):
    first = run(["init"], sqlite_url)
    assert first.exit_code == 0, first.output
    token = re.search(r"Admin token .*: ([0-9a-f]{64})", first.output).group(1)
    second = run(["init"], sqlite_url)
    assert second.exit_code == 1 and "already has tokens" in second.output

    issued = run(["token", "create", "--identity", "opsbot"], sqlite_url)
    assert issued.exit_code == 0, issued.output
    ops_token = re.search(r"\(shown once\): ([0-9a-f]{64})", issued.output).group(1)
    invite = run(["invite", "create", "--identity", "invitee"], sqlite_url)
    code = re.search(r"Invite code: ([0-9a-f]{48})", invite.output).group(1)
    assert f"http://coord.test/onboard?code={code}" in invite.output
    assert run(["token", "create", "--identity", "Not Valid"], sqlite_url).exit_code != 0

    srv = make_server(database_url=sqlite_url)
    assert client(srv, token=token).post("/api/auth/verify").json() == {"identity": "admin", "isAdmin": True}
    assert client(srv, token=ops_token).post("/api/auth/verify").json() == {"identity": "opsbot", "isAdmin": False}
    registered = client(srv).post("/api/auth/register", json={"code": code, "identity": "invitee"})
    assert registered.status_code == 200


def test_migrate_reports_versions(sqlite_url):
    result = run(["migrate"], sqlite_url)
    assert result.exit_code == 0 and "new database -> schema version" in result.output
    assert f"version {SCHEMA_VERSION} -> schema version {SCHEMA_VERSION}" in run(["migrate"], sqlite_url).output
