"""Scriptable subcommands: output, --json and the documented exit codes (0 ok, 1 refused, 2 usage, 3 unreachable)."""
from __future__ import annotations

import json
import socket


from typer.testing import CliRunner

from coordtui.cli import cli
from coordtui.config import Profile, save_profile
from tests.conftest import TOKENS, client

runner = CliRunner()


def run(*args: str, env: dict | None = None):
    return runner.invoke(cli, list(args), env=env, catch_exceptions=False)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_not_configured_is_a_usage_error():
    result = run("inbox")
    assert result.exit_code == 2
    assert "not configured" in result.stderr


def test_url_without_token_is_a_usage_error(server):
    result = run("--url", server.url, "wake")
    assert result.exit_code == 2
    assert "--url and --token go together" in result.stderr


def test_unknown_profile_is_a_usage_error():
    result = run("--profile", "nope", "wake")
    assert result.exit_code == 2
    assert "no saved profile named 'nope'" in result.stderr


def test_unreachable_server_exits_3():
    result = run("--url", f"http://127.0.0.1:{closed_port()}", "--token", "x", "wake")
    assert result.exit_code == 3
    assert "cannot reach" in result.stderr


def test_refused_token_exits_1_with_the_server_error(server):
    result = run("--url", server.url, "--token", "not-a-token", "inbox")
    assert result.exit_code == 1
    assert "HTTP 401" in result.stderr


def test_send_and_inbox_through_env_and_profile(server):
    env = {"COORD_URL": server.url, "COORD_TOKEN": TOKENS["alice"]}
    sent = run("send", "bob", "CLI hello", "from the shell", "--urgent", env=env)
    assert sent.exit_code == 0, sent.stderr
    assert "sent message" in sent.stdout and "to bob" in sent.stdout

    save_profile(Profile("bob", server.url, TOKENS["bob"]))
    listed = run("--profile", "bob", "inbox", "--json")
    assert listed.exit_code == 0, listed.stderr
    rows = json.loads(listed.stdout)
    mine = [r for r in rows if r["title"] == "CLI hello"]
    assert mine and mine[0]["sender"] == "alice" and mine[0]["urgent"] is True and mine[0]["status"] == "unread"

    text = run("--profile", "bob", "inbox")
    header, first = text.stdout.splitlines()[:2]
    assert header.split() == ["ID", "FROM", "RECEIVED", "(UTC)", "TITLE"]
    assert first.startswith("!") and "CLI hello" in first and "alice" in first


def test_send_to_unknown_recipient_exits_1(server):
    result = run("--url", server.url, "--token", TOKENS["alice"], "send", "nobody-here", "Hi")
    assert result.exit_code == 1
    assert "Invalid recipient mailbox" in result.stderr


def test_wake_json_and_text(server):
    with client(server, "alice") as alice:
        alice.post("/api/mailboxes/carol/messages", json={"title": "Wake me", "urgent": True}).raise_for_status()
    as_json = run("--url", server.url, "--token", TOKENS["carol"], "wake", "--json")
    assert as_json.exit_code == 0, as_json.stderr
    payload = json.loads(as_json.stdout)
    assert any(i["source"] == "message" and "Wake me" in i["summary"] for i in payload["items"])
    as_text = run("--url", server.url, "--token", TOKENS["carol"], "wake")
    assert as_text.exit_code == 0
    assert payload["summary"] in as_text.stdout and "Wake me" in as_text.stdout and "[high" in as_text.stdout


def test_data_without_serve_is_a_usage_error(tmp_path):
    result = run("--data", str(tmp_path))
    assert result.exit_code == 2
    assert "--data needs --serve" in result.stderr


def test_a_broken_profile_file_is_a_config_error(isolated_config):
    isolated_config.mkdir(parents=True, exist_ok=True)
    (isolated_config / "profiles.json").write_text("{not json")
    result = run("inbox")
    assert result.exit_code == 2
    assert "cannot read" in result.stderr


def test_subcommands_with_the_bundled_server(tmp_path):
    data = str(tmp_path / "data")
    result = run("--serve", "--data", data, "send", "admin", "Note to self", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["recipient"] == "admin"
    listed = run("--serve", "--data", data, "inbox", "--json")  # a second run: same database, same admin token
    assert listed.exit_code == 0, listed.stderr
    assert [m["title"] for m in json.loads(listed.stdout)] == ["Note to self"]
