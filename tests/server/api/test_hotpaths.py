"""Send and inbox are served straight from ASGI (coordserver/hotpaths.py). They must answer exactly as
the Quart views do: the same request goes to a server with hot paths and to one without
(COORD_HOT_PATHS=off), both on frozen clocks, and status, headers and body must match byte for byte."""
from __future__ import annotations

import json
import socket
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

import httpx
import pytest

from werkzeug import exceptions as werkzeug_errors

from coordserver import errors, http1
from coordserver.domain import messages as domain_messages
from coordserver.hotpaths import HotPaths
from coordserver.server import CoordConfig, ServerThread
from coordserver.settings import Settings
from coordserver.timeutil import FrozenClock
from tests.helpers import TOKENS, base_env, client

_VOLATILE = {"date"}  # the rate-limit windows follow the frozen clocks too


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(hot, cold): identical servers but for the hot paths; the send limit is 50 a minute on both."""
    servers = []
    for name, flag in (("hot", "on"), ("cold", "off")):
        path = tmp_path_factory.mktemp(name) / "coord.db"
        env = base_env(f"sqlite:///{path}", COORD_HOT_PATHS=flag, COORD_RATE_LIMITS="on",
                       COORD_RATE_LIMIT_OVERRIDES='{"send": 50, "other": 1000}')
        clock = FrozenClock(datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc))
        servers.append(ServerThread(Settings.from_env(env), clock=clock).start())
    hot, cold = servers
    assert isinstance(hot.app.asgi_app, HotPaths) and not isinstance(cold.app.asgi_app, HotPaths)
    served = []
    inner_serve = hot.app.asgi_app._serve

    async def counting(*args, **kwargs):
        served.append(args[1]["path"])
        return await inner_serve(*args, **kwargs)
    hot.app.asgi_app._serve = counting
    hot.served = served
    yield hot, cold
    for server in servers:
        server.stop()


def both(pair, method: str, path, who: str | None = "alice", token: str | None = None,
         source: str | None = None, volatile: frozenset[str] = frozenset(), **kwargs):
    """Send one request to each server (from the loopback address `source`, if given); assert the answers
    are identical; return the hot one. `path` may be a function of the server (each server's own webhook)."""
    answers = []
    for server in pair:
        each = {k: v() if callable(v) else v for k, v in kwargs.items()}  # a generator body is made per server
        transport = {"transport": httpx.HTTPTransport(local_address=source)} if source else {}
        with client(server, who, token, **transport) as http:
            answers.append(http.request(method, path(server) if callable(path) else path, **each))
    hot, cold = answers
    assert hot.status_code == cold.status_code, (hot.text, cold.text)
    assert hot.content == cold.content
    headers = [{k: v for k, v in r.headers.items() if k not in _VOLATILE | volatile} for r in answers]
    assert headers[0] == headers[1]
    return hot


def test_send_and_its_refusals_match(pair):
    hot_served_before = len(pair[0].served)
    ok = both(pair, "POST", "/api/mailboxes/bob/messages",
              json={"title": "Deploy é ß 🚀", "body": "x" * 20_000, "urgent": True, "threadId": 7,
                    "metadata": {"ticket": ["a", 1, None]}})
    assert ok.status_code == 200 and ok.json()["title"] == "Deploy é ß 🚀" and len(ok.json()["body"]) == 10_000
    assert "é" in ok.text  # not \\u-escaped, as Quart's provider (ensure_ascii off) writes it
    assert ok.headers["x-ratelimit-limit"] == "50"
    cases = [
        dict(who=None),
        dict(who=None, token="not-a-real-token"),
        dict(content=b"{not json"),
        dict(content=b""),
        dict(content=b"[1, 2]"),
        dict(content=b"\xff\xfe"),
        dict(json={}),
        dict(json={"title": "   "}),
        dict(json={"title": 5}),
        dict(json={"title": "t", "urgent": "yes"}),
        dict(json={"title": "t", "threadId": "x" * 101}),
        dict(json={"title": "t", "threadId": [1]}),
        dict(json={"title": "t", "replyToMessageId": 0}),
        dict(json={"title": "t", "replyToMessageId": 1.5}),
        dict(json={"title": "t", "dedupeKey": 3}),
        # hostile input: non-standard JSON, deep nesting, lone surrogates, NUL, out-of-range integers
        dict(content=b'{"title":"t","metadata":{"x":NaN}}'),
        dict(content=b'{"title":"t","metadata":{"x":-Infinity}}'),
        dict(content=b'{"title":"t","replyToMessageId":1e400}'),
        dict(content=b'{"title":"t","metadata":' + b"[" * 1000 + b"]" * 1000 + b"}"),
        dict(content=b'{"title":"\\ud800"}'),
        dict(content=b'{"title":"a\\u0000b"}'),
        dict(json={"title": "t", "replyToMessageId": 10**30}),
    ]
    for case in cases:
        answer = both(pair, "POST", "/api/mailboxes/bob/messages", **case)
        assert answer.status_code in (400, 401) and set(answer.json()) == {"error"}, case
    assert both(pair, "POST", "/api/mailboxes/nobody-here/messages", json={"title": "t"}).status_code == 400
    assert both(pair, "POST", "/api/mailboxes/b%00ob/messages", json={"title": "t"}).status_code == 400
    assert both(pair, "POST", "/api/mailboxes/%20BOB%20/messages", json={"title": "t"}).json()["recipient"] == "bob"
    first = both(pair, "POST", "/api/mailboxes/bob/messages", json={"title": "once", "dedupeKey": "k1"})
    again = both(pair, "POST", "/api/mailboxes/bob/messages", json={"title": "twice", "dedupeKey": "k1"})
    assert again.json() == first.json()
    assert len(pair[0].served) - hot_served_before == len(cases) + 6


def test_what_hot_paths_leave_to_quart_still_matches(pair):
    served_before = list(pair[0].served)
    # answered before its body was all read, or after: Connection: close depends on which (http1.py)
    oversized = both(pair, "POST", "/api/mailboxes/bob/messages", content=b"{" + b" " * 60_000 + b"}",
                     volatile=frozenset({"connection"}))
    assert oversized.status_code == 413

    def chunks():
        yield b'{"title": "chunked"'
        yield b"}"
    assert both(pair, "POST", "/api/mailboxes/bob/messages", content=chunks).json()["title"] == "chunked"
    assert both(pair, "HEAD", "/api/mailboxes/me/messages").status_code == 200
    assert both(pair, "POST", "/api/mailboxes/bob/messages/", json={"title": "t"}).status_code in (404, 405, 308)
    assert both(pair, "PUT", "/api/mailboxes/bob/messages", json={"title": "t"}).status_code == 405
    assert both(pair, "POST", "/api/mailboxes/me/messages", json={"title": "t"}).status_code == 405
    assert pair[0].served == served_before


def test_inbox_pages_and_refusals_match(pair):
    for i in range(7):
        both(pair, "POST", "/api/mailboxes/carol/messages", who="bob", json={"title": f"m{i}", "urgent": i == 5})
    page = both(pair, "GET", "/api/mailboxes/me/messages?status=unread&limit=3", who="carol")
    assert [m["title"] for m in page.json()["messages"]] == ["m5", "m0", "m1"] and page.json()["total"] == 7
    seen = [m["id"] for m in page.json()["messages"]]
    cursor = page.json()["nextCursor"]
    while cursor:
        page = both(pair, "GET", "/api/mailboxes/me/messages", who="carol",
                    params={"status": "unread", "limit": "3", "cursor": cursor})
        seen += [m["id"] for m in page.json()["messages"]]
        cursor = page.json().get("nextCursor")
    assert len(seen) == len(set(seen)) == 7
    both(pair, "GET", "/api/mailboxes/me/messages?status=read&status=unread&limit=2", who="carol")
    both(pair, "GET", "/api/mailboxes/me/messages?limit=1000", who="carol")
    both(pair, "GET", "/api/mailboxes/me/messages?limit=", who="carol")
    huge_cursor = "WyJuZXdlc3QiLDAsIjIwMjYtMDEtMDEgMDA6MDA6MDAiLDExODA1OTE2MjA3MTc0MTEzMDM0MjRd"  # id 2**70
    for query in ("status=new", "limit=abc", "limit=0", "cursor=%%%", "status=read&cursor=x",
                  f"cursor={huge_cursor}", "status=unread%00", "limit=1e400", "cursor=" + "W" * 3000):
        refused = both(pair, "GET", f"/api/mailboxes/me/messages?{query}", who="carol")
        assert refused.status_code == 400 and set(refused.json()) == {"error"}, query
    assert both(pair, "GET", "/api/mailboxes/me/messages", who=None).status_code == 401
    assert both(pair, "GET", "/api/mailboxes/me/messages", who=None, token="wrong").json() == {"error": "Invalid key"}
    # a query string is parsed once (hotpaths._query): every caller and every repeat is answered as the first
    both(pair, "POST", "/api/mailboxes/bob/messages", who="carol", json={"title": "for bob"})
    totals = []
    for who in ("carol", "bob", "carol"):
        again = both(pair, "GET", "/api/mailboxes/me/messages?status=unread&limit=3", who=who)
        assert {m["recipient"] for m in again.json()["messages"]} == {who}
        totals.append(again.json()["total"])
    assert totals[0] == totals[2] == 7 and totals[1] >= 1
    for _ in range(2):
        assert both(pair, "GET", "/api/mailboxes/me/messages?limit=abc", who="carol").status_code == 400


def test_wake_and_its_refusals_match(pair):
    """GET /api/wake (the caller's own) is a hot path too: same payloads, with buzz items delivered once."""
    served_before = len(pair[0].served)
    for i in range(3):
        both(pair, "POST", "/api/mailboxes/carol/messages", who="alice", json={"title": f"w{i} é", "urgent": i == 2})
    both(pair, "POST", "/api/mailboxes/carol/messages", who="alice", json={"title": "pending"})
    for server in pair:  # each server makes its own hook token: create and ingest on each
        hook = client(server, "alice").post("/api/buzz/webhooks",
                                            json={"appName": "ci", "title": "CI", "wakeAgent": "carol"}).json()
        assert client(server).post(f"/api/ingest/ci/{hook['token']}", json={"body": "red"}).status_code == 200
    first = both(pair, "GET", "/api/wake", who="carol")
    assert [i["source"] for i in first.json()["items"]].count("buzz") == 1
    assert {"From alice: 'w0 é'", "From alice: 'w2 é'"} <= {i["summary"] for i in first.json()["items"]}
    assert "é" in first.text
    again = both(pair, "GET", "/api/wake?includeOffHours=true", who="carol")
    assert "buzz" not in [i["source"] for i in again.json()["items"]]  # the alert went out once
    both(pair, "GET", "/api/wake?includeOffHours=yes&x=%ff", who="carol")
    assert both(pair, "GET", "/api/wake", who=None).status_code == 401
    assert both(pair, "GET", "/api/wake", who=None, token="wrong").json() == {"error": "Invalid key"}
    assert both(pair, "GET", "/api/wake/carol", who="admin").status_code == 200  # Quart: the admin view
    assert len(pair[0].served) - served_before == 4 + 1 + 5  # the sends, the ingest and the five GET /api/wake


def test_health_matches(pair):
    """GET /api/health, the floor every request pays, is a hot path: same answer with or without a token,
    with a wrong one, with a query string; HEAD and other methods stay Quart's."""
    served_before = len(pair[0].served)
    ok = both(pair, "GET", "/api/health", who=None)
    assert ok.json() == {"status": "ok", "timestamp": "2026-03-01T09:00:00.000Z"}
    assert both(pair, "GET", "/api/health", who="alice").content == ok.content
    assert both(pair, "GET", "/api/health?x=1&y", who=None).content == ok.content
    assert both(pair, "GET", "/api/health", who=None, token="wrong").content == ok.content
    assert both(pair, "GET", "/api/health?x=%00", who=None).status_code == 400
    assert len(pair[0].served) - served_before == 5
    assert both(pair, "HEAD", "/api/health", who=None).status_code == 200
    assert both(pair, "POST", "/api/health", who=None, json={}).status_code == 405
    assert both(pair, "GET", "/api/health/", who=None).status_code == 404
    assert len(pair[0].served) - served_before == 5


def test_ingest_and_its_refusals_match(pair):
    """POST /api/ingest/<appName>/<token> is a hot path: each server makes its own webhook (the same ids),
    and every kind of body, header and refusal answers alike; what it leaves to Quart still matches."""
    hooks = {}
    for server in pair:
        owner = client(server, "alice")
        hooks[server.port] = [owner.post("/api/buzz/webhooks", json={"appName": "hot", "title": "Hot", **extra}).json()
                              for extra in ({"wakeAgent": "carol"}, {}, {})]
        owner.patch(f"/api/buzz/webhooks/{hooks[server.port][2]['id']}", json={"enabled": False})

    def url(which: int = 0, app: str = "hot", suffix: str = ""):
        return lambda server: f"/api/ingest/{app}/{hooks[server.port][which]['token']}{suffix}"
    served_before = len(pair[0].served)
    github = {"X-GitHub-Event": "workflow_run", "X-GitHub-Delivery": "d-1"}
    run = {"action": "completed", "repository": {"full_name": "o/r"}, "sender": {"login": "bob"},
           "workflow_run": {"name": "CI", "conclusion": "failure", "head_branch": "main", "html_url": "http://x"}}
    cases = [
        dict(path=url(), json={"title": "disk full é", "dedupKey": "disk"}),
        dict(path=url(), json={"title": "disk full é", "dedupKey": "disk"}),  # a repeat
        dict(path=url(), json=run, headers=github),
        dict(path=url(), json=run, headers=github),  # the same delivery again
        dict(path=url(), content=b"plain \xe9", headers={"Content-Type": "text/plain; charset=latin-1"}),
        dict(path=url(), content=b""),
        dict(path=url(), content=b"{not json", headers={"Content-Type": "application/json"}),
        dict(path=url(1), json={"body": {"nested": [1, None]}}, who="carol"),  # its own ingest
        dict(path=url(1), json={"title": "x"}, who=None, token="wrong-token"),
        dict(path=url(suffix="x"), json={"title": "wrong token"}),
        dict(path=url(app="nosuch"), json={"title": "unknown app"}),
        dict(path=url(2), json={"title": "disabled"}),
        dict(path="/api/ingest/hot/%00", json={"title": "nul"}),
    ]
    for case in cases:
        answer = both(pair, "POST", case.pop("path"), **{"who": None, **case})
        assert answer.status_code in (200, 400, 404), answer.text
    assert len(pair[0].served) - served_before == len(cases)

    def chunks():
        yield b'{"title": "chunked"}'
    assert both(pair, "POST", url(), who=None, content=chunks).status_code == 200
    assert both(pair, "POST", url(), who=None, content=b"x" * 70_000,
                volatile=frozenset({"connection"})).status_code == 413  # see test_what_hot_paths_leave_to_quart
    assert both(pair, "POST", url(suffix="/"), who=None, json={}).status_code == 404
    assert both(pair, "GET", url(), who=None).status_code == 405
    assert len(pair[0].served) - served_before == len(cases)


def test_rate_limit_answers_match(pair):
    """Anonymous senders are limited by address before they are refused; both paths count alike. From an
    address no other test uses (127.0.0.35), so the count is this test's own: 50 refusals, then 429."""
    answers = [both(pair, "POST", "/api/mailboxes/bob/messages", who=None, source="127.0.0.35",
                    json={"title": "t"}) for _ in range(52)]
    assert [a.status_code for a in answers] == [401] * 50 + [429] * 2
    assert [a.headers.get("x-ratelimit-remaining") for a in answers[:50]] == [str(49 - i) for i in range(50)]
    limited = answers[50]
    assert limited.json() == {"error": f"Too many requests; retry in {limited.headers['retry-after']} s"}
    assert 1 <= int(limited.headers["retry-after"]) <= 60
    assert limited.headers["x-ratelimit-remaining"] == "0" and limited.headers["x-ratelimit-limit"] == "50"
    assert both(pair, "POST", "/api/mailboxes/bob/messages", who=None,  # another address: its own count
                source="127.0.0.36", json={"title": "t"}).status_code == 401


def test_expect_continue_and_keep_alive_on_the_hot_path(pair):
    """A client that waits for 100 Continue gets it, then its answer, then the connection serves again."""
    hot = pair[0]
    body = json.dumps({"title": "continued", "body": "y" * 3000}).encode()
    head = (f"POST /api/mailboxes/bob/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKENS['alice']}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n").encode()
    with socket.create_connection((hot.host, hot.port), timeout=10) as sock:
        sock.sendall(head)
        assert sock.recv(100).startswith(b"HTTP/1.1 100")
        sock.sendall(body)
        first = _read_response(sock)
        assert first.startswith(b"HTTP/1.1 200") and b'"title":"continued"' in first
        sock.sendall(b"GET /api/mailboxes/me/messages?limit=1 HTTP/1.1\r\nHost: x\r\n"
                     + f"Authorization: Bearer {TOKENS['bob']}\r\n\r\n".encode())
        assert _read_response(sock).startswith(b"HTTP/1.1 200")


def test_hot_paths_skip_hypercorns_stream_over_http11(pair, monkeypatch):
    """Over HTTP/1.1 the hot routes are answered by http1.py's direct lane, without Hypercorn's ASGI stream
    (the answers themselves are compared with Quart's in the tests above); other routes still get the stream."""
    streams = []

    class CountedStream(http1.HTTPStream):
        def __init__(self, *args, **kwargs):
            streams.append(self)
            super().__init__(*args, **kwargs)
    monkeypatch.setattr(http1, "HTTPStream", CountedStream)
    hot = pair[0]
    with client(hot, "alice") as http:
        assert http.post("/api/mailboxes/bob/messages", json={"title": "lane"}).status_code == 200
        assert http.get("/api/mailboxes/me/messages").status_code == 200
        assert http.get("/api/wake").status_code == 200
        assert http.get("/api/health").status_code == 200
        assert streams == []
        assert http.get("/api/presence").status_code == 200
    assert len(streams) == 1


def test_a_request_left_unfinished_on_the_direct_lane_is_not_answered(pair):
    """The client goes away mid-body: nothing is stored or answered, and the server serves on."""
    hot = pair[0]
    body = json.dumps({"title": "never finished"}).encode()
    head = (f"POST /api/mailboxes/bob/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKENS['alice']}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    with socket.create_connection((hot.host, hot.port), timeout=10) as sock:
        sock.sendall(head + body[:5])
        sock.shutdown(socket.SHUT_WR)
        assert sock.recv(100) == b""  # closed without an answer
    with client(hot, "bob") as http:
        titles = [m["title"] for m in http.get("/api/mailboxes/me/messages", params={"limit": 50}).json()["messages"]]
    assert "never finished" not in titles


def test_a_failing_direct_lane_answers_as_hypercorn_answers_a_failing_app(pair, monkeypatch, caplog):
    """A bug in the lane itself (not an error its routes render) is logged and answered 500 with an empty
    body, the connection closed after it: what Hypercorn does for an ASGI app that fails before answering."""
    lane = pair[0].app.asgi_app

    async def broken(*args):
        raise RuntimeError("a bug")
    monkeypatch.setattr(lane, "answer", broken)
    monkeypatch.setattr(http1, "HTTPStream", None)  # the 500 must come from the lane, not Hypercorn's stream
    with socket.create_connection((pair[0].host, pair[0].port), timeout=10) as sock:
        sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = _read_response(sock)
        assert sock.recv(100) == b""
    head = answer.split(b"\r\n\r\n")[0].lower()
    assert head.startswith(b"http/1.1 500") and b"content-length: 0" in head and b"connection: close" in head
    assert "Error in ASGI Framework" in caplog.text


def _read_response(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(rest) < length:
        rest += sock.recv(65536)
    return head + b"\r\n\r\n" + rest


def test_hot_paths_know_every_request_hook(pair):
    """The hot paths reproduce what the Quart hooks do (gate.Gate, the rate headers). A new hook would
    silently not apply to them: this fails first, so whoever adds one extends hotpaths.py too."""
    app = pair[1].app
    kinds = ("before_request_funcs", "after_request_funcs", "teardown_request_funcs",
             "url_value_preprocessors", "url_default_functions")
    hooks = {kind: sorted(f.__name__ for funcs in getattr(app, kind).values() for f in funcs) for kind in kinds}
    # start_timer/count_request (api/metrics.py): the hot paths count their requests with the same observe_request.
    assert hooks == {"before_request_funcs": ["authenticate_and_limit", "start_timer"],
                     "after_request_funcs": ["add_rate_headers", "count_request"],
                     "teardown_request_funcs": [], "url_value_preprocessors": [], "url_default_functions": []}


def _error_samples() -> list[BaseException]:
    """One of every error a request can raise: each ApiError kind, each HTTP error werkzeug knows, and
    an unexpected one (the 500)."""
    def kinds(base):
        for sub in base.__subclasses__():
            yield sub
            yield from kinds(sub)
    samples: list[BaseException] = [errors.ApiError("sample é", field="x"), errors.RateLimited(7), errors.Unavailable()]
    samples += [kind("sample é") for kind in kinds(errors.ApiError) if kind not in (errors.RateLimited, errors.Unavailable)]
    samples += [werkzeug_errors.MethodNotAllowed(valid_methods=["GET", "HEAD"])]
    samples += [kind() for kind in werkzeug_errors.default_exceptions.values()]
    return samples + [RuntimeError("boom")]


def _registered_handlers(app) -> list:
    """Every error handler of the app and its blueprints: exception classes, and status codes as
    werkzeug's class for that code."""
    found = []
    for by_code in app.error_handler_spec.values():
        for code, by_class in by_code.items():
            found += [werkzeug_errors.default_exceptions[code]] if code else list(by_class)
    return found


def test_hot_paths_render_every_error_as_quart_does(pair, monkeypatch, caplog):
    """The hot paths and Quart render errors with one function (errors.render_error). Every error
    handler registered on the app is exercised here: a handler added for a new error type, which the hot
    paths would not know, has no sample below and fails this test."""
    samples = _error_samples()
    for handled in _registered_handlers(pair[1].app):
        assert any(isinstance(sample, handled) for sample in samples), (
            f"{handled} has an error handler in app.py but no sample here: render it in errors.render_error "
            "(the hot paths call it) and add a sample")
    served_before = len(pair[0].served)
    for sample in samples:
        def fail(*args, **kwargs):
            raise sample
        monkeypatch.setattr(domain_messages, "inbox_page", fail)
        caplog.clear()
        answer = both(pair, "GET", "/api/mailboxes/me/messages", who="carol")
        status = getattr(sample, "status", None) or getattr(sample, "code", None) or 500
        assert answer.status_code == status and set(answer.json()) >= {"error"}, sample
        logged = [r.getMessage() for r in caplog.records if r.name == "coord" and "unhandled" in r.getMessage()]
        if isinstance(sample, RuntimeError):
            assert answer.json() == {"error": "Internal server error"}
            # one redacted line (with the traceback) from each door
            assert logged == ["unhandled error on GET /api/mailboxes/me/messages"] * 2
            assert all(r.exc_info and r.exc_info[1] is sample for r in caplog.records if r.name == "coord")
        else:
            assert logged == [], sample
    assert len(pair[0].served) - served_before == len(samples)


def test_the_send_route_is_matched_in_one_place():
    """The hot paths and the rate limiter recognise a send by sendroute.send_recipient, and agree."""
    from coordserver.ratelimit import route_class
    from coordserver.sendroute import send_recipient
    cases = {"/api/mailboxes/bob/messages": "bob", "/api/mailboxes//messages": "", "/api/mailboxes/me/messages": None,
             "/api/mailboxes/messages": None, "/api/mailboxes/a/b/messages": None, "/api/mailboxes/bob/sent": None}
    for path, recipient in cases.items():
        assert send_recipient(path) == recipient, path
        assert (route_class("POST", path) == "send") == (recipient is not None), path


def test_every_answer_has_a_date_and_names_no_server(pair):
    """Both paths answer through CoordConfig: a Date of this second (wall clock, not the frozen one) and no
    Server header."""
    for server in pair:
        with client(server) as c:
            before = datetime.now(timezone.utc).replace(microsecond=0)
            answers = [c.get("/api/health"), c.get("/api/mailboxes/me/messages", headers={"Authorization": ""}),
                       c.get("/api/openapi.json")]
            after = datetime.now(timezone.utc)
        for answer in answers:
            assert "server" not in answer.headers
            assert before <= parsedate_to_datetime(answer.headers["date"]) <= after


def test_the_date_header_is_formatted_once_a_second():
    now = iter([1000.2, 1000.9, 1001.0, 1001.5])
    config = CoordConfig(now=lambda: next(now))
    first, same = config.response_headers("h11"), config.response_headers("h11")
    assert first == same == [(b"date", b"Thu, 01 Jan 1970 00:16:40 GMT")]
    first.append((b"x-added", b"by hypercorn"))  # Hypercorn extends what it is given: later answers stay whole
    next_second, again = config.response_headers("h11"), config.response_headers("h11")
    assert next_second == again == [(b"date", b"Thu, 01 Jan 1970 00:16:41 GMT")]
    again.append((b"x-added", b"by hypercorn"))
    config.include_date_header = False
    assert config.response_headers("h11") == [] and config.include_server_header is False
    config.include_date_header, config._now = True, lambda: 1001.7
    assert config.response_headers("h11") == [(b"date", b"Thu, 01 Jan 1970 00:16:41 GMT")]
