"""Scripting CLI additions: global options anywhere, token from a file or COORD_TOKEN, usage errors exit 2,
a URL that is not a coord server says so, ack/reply/show, inbox column headers, and the help text."""
from __future__ import annotations

import http.server
import json
import threading

import pytest
from typer.testing import CliRunner

from coordtui.cli import cli, hoist_global_options
from tests.conftest import TOKENS, client

runner = CliRunner()


def run(*args: str, env: dict | None = None):
    return runner.invoke(cli, list(args), env=env, catch_exceptions=False)


def as_alice(server) -> list[str]:
    return ["--url", server.url, "--token", TOKENS["alice"]]


def mail(server, sender: str, recipient: str, title: str, body: str = "") -> int:
    with client(server, sender) as http:
        return http.post(f"/api/mailboxes/{recipient}/messages", json={"title": title, "body": body}).json()["id"]


def test_global_options_may_follow_the_subcommand(server):
    mail(server, "bob", "alice", "Options anywhere")
    result = run("inbox", "--url", server.url, "--token", TOKENS["alice"])
    assert result.exit_code == 0, result.stderr
    assert "Options anywhere" in result.stdout
    mixed = run("inbox", f"--url={server.url}", "--json", "--token", TOKENS["alice"])
    assert mixed.exit_code == 0 and any(m["title"] == "Options anywhere" for m in json.loads(mixed.stdout))


def test_hoisting_leaves_arguments_after_a_double_dash_alone():
    assert hoist_global_options(["send", "bob", "--", "--serve"]) == ["send", "bob", "--", "--serve"]
    assert hoist_global_options(["send", "bob", "t", "--serve", "--data", "D"]) == ["--serve", "--data", "D",
                                                                                  "send", "bob", "t"]


def test_token_from_a_file_or_coord_token(server, tmp_path):
    mail(server, "bob", "alice", "Token elsewhere")
    token_file = tmp_path / "token"
    token_file.write_text(TOKENS["alice"] + "\n")
    by_file = run("inbox", "--url", server.url, "--token-file", str(token_file))
    assert by_file.exit_code == 0, by_file.stderr
    assert "Token elsewhere" in by_file.stdout
    by_env = run("--url", server.url, "inbox", env={"COORD_TOKEN": TOKENS["alice"]})
    assert by_env.exit_code == 0 and "Token elsewhere" in by_env.stdout
    by_env_file = run("inbox", env={"COORD_URL": server.url, "COORD_TOKEN_FILE": str(token_file)})
    assert by_env_file.exit_code == 0 and "Token elsewhere" in by_env_file.stdout


@pytest.mark.parametrize("args, message", [
    (["--token-file", "/nonexistent/token", "--url", "http://127.0.0.1:1", "inbox"], "cannot read the token file"),
    (["--url", "127.0.0.1:8080", "--token", "x", "inbox"], "--url must be a full URL starting with http://"),
    (["--url", "http://", "--token", "x", "wake"], "--url must be a full URL"),
    (["--url", "http://127.0.0.1:1", "--token", "x", "send", "", "title"], "the recipient must not be empty"),
    (["--url", "http://127.0.0.1:1", "--token", "x", "send", "  ", "title"], "the recipient must not be empty"),
    (["--url", "http://127.0.0.1:1", "--token", "x", "send", "bob", ""], "the title must not be empty"),
    (["--url", "http://127.0.0.1:1", "--token", "x", "reply", "3", " "], "the reply body must not be empty"),
])
def test_usage_and_configuration_errors_exit_2(args, message):
    result = run(*args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert message in result.stderr


def test_an_empty_token_file_and_a_non_numeric_id_exit_2(tmp_path):
    empty = tmp_path / "empty"
    empty.write_text("\n")
    result = run("--url", "http://127.0.0.1:1", "--token-file", str(empty), "inbox")
    assert result.exit_code == 2 and "is empty" in result.stderr
    assert run("--url", "http://127.0.0.1:1", "--token", "x", "ack", "abc").exit_code == 2


@pytest.fixture
def web_page():
    """Something that answers HTTP but is not a coord server: a plain static-file server."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.do_GET()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_a_url_that_is_not_a_coord_server_says_so(web_page):
    result = run("inbox", "--url", web_page, "--token", "x")
    assert result.exit_code == 3
    assert f"{web_page} answers but is not a coord server" in result.stderr and "text/html" in result.stderr


def test_ack_marks_read_and_names_unknown_ids(server):
    first, second = mail(server, "bob", "alice", "Ack one"), mail(server, "bob", "alice", "Ack two")
    result = run("ack", str(first), str(second), *as_alice(server))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == f"acknowledged {first} {second}"
    with client(server, "alice") as alice:
        unread = [m["id"] for m in alice.get("/api/mailboxes/me/messages", params={"status": "unread"}).json()["messages"]]
    assert first not in unread and second not in unread
    partial = run("ack", str(first), "999999", *as_alice(server))
    assert partial.exit_code == 1
    assert "not found in your mailbox: 999999" in partial.stderr and f"acknowledged {first}" in partial.stdout


def test_reply_goes_to_the_sender(server):
    original = mail(server, "bob", "alice", "Question", "lunch?")
    result = run("reply", str(original), "yes, 12:30", *as_alice(server))
    assert result.exit_code == 0, result.stderr
    assert "sent reply" in result.stdout and "to bob" in result.stdout
    with client(server, "bob") as bob:
        titles = {m["title"]: m for m in bob.get("/api/mailboxes/me/messages").json()["messages"]}
    assert titles["Re: Question"]["body"] == "yes, 12:30" and titles["Re: Question"]["replyToMessageId"] == original
    missing = run("reply", "999999", "hello", *as_alice(server))
    assert missing.exit_code == 1 and "HTTP 404" in missing.stderr


def test_show_prints_one_message_without_marking_it_read(server):
    message_id = mail(server, "carol", "alice", "Runbook", "Step 1: breathe.\nStep 2: roll back.")
    result = run("show", str(message_id), *as_alice(server))
    assert result.exit_code == 0, result.stderr
    assert f"Message {message_id}" in result.stdout and "From:    carol" in result.stdout
    assert "Title:   Runbook" in result.stdout and result.stdout.rstrip().endswith("Step 2: roll back.")
    as_json = json.loads(run("show", str(message_id), "--json", *as_alice(server)).stdout)
    assert as_json["status"] == "unread" and as_json["body"].startswith("Step 1")
    missing = run("show", "999999", *as_alice(server))
    assert missing.exit_code == 1 and "message 999999 is not in your mailbox" in missing.stderr


def test_help_says_where_the_bundled_server_listens():
    result = run("--help")
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert "127.0.0.1" in text and "serve.lock" in text and "header" in text
    assert "--token-file" in text and "COORD_TOKEN" in text and "anywhere on the line" in text
