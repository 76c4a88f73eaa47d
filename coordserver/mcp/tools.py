"""The MCP tools: each one names the REST route it calls and a one-line summary of the route's answer; its
arguments are shaped by the route's models (shapes.py). The table below is the whole of it; `coordserver
mcp-tools --markdown` prints it."""
from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Awaitable, Callable

import mcp_types as types
import msgspec

from ..realtime.ask_waiters import AskWaiters
from ..schemas.base import Model
from ..sendroute import SEND_ROUTE
from . import fence
from .routes import Reply, RouteCaller
from .shapes import Refused, Shape, object_schema
from .terminal_text import terminal_safe

_SAMPLE = re.compile(r"\{(\w+)\}")  # a path parameter; Catalog fills in a sample value to find the route


def _count(key: str, noun: str) -> Callable[[Any, dict], str]:
    return lambda result, _args: f"{len(result.get(key) or [])} {noun}."


def _wake(result: dict, _args: dict) -> str:
    return result.get("summary") or "Nothing waiting."


def _inbox(result: dict, _args: dict) -> str:
    more = " More with cursor=nextCursor." if result.get("nextCursor") else ""
    return f"{len(result['messages'])} of {result['total']} messages.{more}"


def _ack(result: dict, _args: dict) -> str:
    missing = f"; not found: {result['notFound']}" if result.get("notFound") else ""
    return f"Marked {len(result['success'])} message(s) read{missing}."


def _channels(result: dict, _args: dict) -> str:
    unread = sum(c.get("unread_count") or 0 for c in result["channels"])
    return f"{len(result['channels'])} channels, {unread} unread messages."


def _task(verb: str) -> Callable[[Any, dict], str]:
    return lambda t, _args: f"{verb} task {t['id']} '{t['title']}': {t['status']}, assignee {t['assigneeUserId']}."


def _leased(t: dict, _args: dict) -> str:
    return f"Task {t['id']} '{t['title']}': lease until {t.get('leaseExpiresAt') or '(none)'}."


def _reservation(verb: str) -> Callable[[Any, dict], str]:
    return lambda r, _args: (f"{verb} reservation {r['id']} of {r['resource']} "
                             f"({'exclusive' if r['exclusive'] else 'shared'}) until {r['expiresAt']}.")


def _reservations(result: dict, _args: dict) -> str:
    mine = sum(1 for r in result["reservations"] if r["exclusive"])
    return f"{len(result['reservations'])} reservations in force, {mine} exclusive."


def _presence(result: dict, _args: dict) -> str:
    online = sorted(i for i, p in result.items() if p.get("online"))
    return f"{len(online)} of {len(result)} online: {', '.join(online) or 'nobody'}."


def _doctor(result: dict, _args: dict) -> str:
    problems = result.get("errors", []) + result.get("warnings", [])
    return f"Doctor: {result['status']}" + (f" ({'; '.join(problems)})." if problems else ".")


def _ask(a: dict, _args: dict) -> str:
    """One line on an ask's state, and what to do next."""
    said = a["option"] if a["option"] is not None else json.dumps(a["text"], ensure_ascii=False)
    if a["option"] is not None:
        said = f"'{said}'"
    if a["status"] == "answered":
        return f"Ask {a['id']}: {a['answeredBy']} answered {said}."
    if a["status"] == "expired":
        return f"Ask {a['id']} expired" + (f"; the default applies: {said}." if a["option"] is not None
                                           else " unanswered.")
    if a["status"] == "cancelled":
        return f"Ask {a['id']} was cancelled."
    return f"Ask {a['id']} to {', '.join(a['to'])} is open (no answer yet): call get_ask with askId {a['id']} later."


def _asks(result: dict, _args: dict) -> str:
    open_ = sum(1 for a in result["asks"] if a["status"] == "open")
    return f"{len(result['asks'])} asks, {open_} open."


def _alert(verb: str) -> Callable[[Any, dict], str]:
    return lambda a, _args: (f"{verb} alert {a['id']} '{a['title']}': {a['state']}, {a['count']} firings"
                             + (f", acked by {a['ackedBy']}" if a.get("ackedBy") else "") + ".")


def _alerts(result: dict, _args: dict) -> str:
    states: dict[str, int] = {}
    for alert in result["alerts"]:
        states[alert["state"]] = states.get(alert["state"], 0) + 1
    return f"{len(result['alerts'])} alerts" + (f" ({', '.join(f'{n} {s}' for s, n in states.items())})"
                                                if states else "") + "."


def _silence(s: dict, _args: dict) -> str:
    return f"Silence {s['id']} on {s['appName'] or 'webhook ' + str(s['webhookId'])} until {s['endsAt']}."


def _preview(p: dict, _args: dict) -> str:
    return f"Would have hidden {p['events']} events of the last 24 h, of {len(p['alerts'])} alerts."


def _guards(result: dict, _args: dict) -> str:
    return f"{len(result['active'])} active loop guards, {len(result['cleared'])} cleared in the last 24 h."


def _guard_cleared(g: dict, _args: dict) -> str:
    return f"Cleared guard {g['id']} ({g['summary']})."


WAIT_MAX = 300  # seconds ask_human may block
RECHECK_SECONDS = 10.0  # a blocked ask_human reads its ask at least this often (announcements can be missed)


class AskWait(Model):
    """ask_human's own argument: how long to block for an answer."""
    wait_seconds: Annotated[int, msgspec.Meta(
        ge=0, le=WAIT_MAX, description=f"seconds to wait for the answer (at most {WAIT_MAX}); then the ask is "
                                       "returned still open, and get_ask reads it later")] = \
        msgspec.field(default=60, name="wait_seconds")


@dataclass(frozen=True)
class Follow:
    """What a tool that goes on after its route's answer (`then`) may use."""
    caller: RouteCaller
    scope: dict
    asks: AskWaiters | None


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    method: str
    path: str
    summary: Callable[[Any, dict], str]
    fixed: dict[str, Any] = field(default_factory=dict)  # body fields the tool always sends
    wrap: str | None = None  # a route answering with a bare array: its key in the structured result
    own: type[Model] | None = None  # arguments of the tool itself, not sent to the route
    # After a successful route call: the tool's answer instead (same response model), from the route's and `own`.
    then: Callable[[Follow, Reply, Any], Awaitable[Reply]] | None = None


async def _await_answer(follow: Follow, created: Reply, own: AskWait) -> Reply:
    """ask_human: after POST /api/asks, block until the ask is no longer open or wait_seconds have passed,
    then answer with GET /api/asks/{id} (as the asker: reading a closed ask marks its outcome read). A change
    made by any process wakes it (realtime/ask_waiters.py)."""
    ask_id = created.json()["id"]
    loop = asyncio.get_running_loop()
    until = loop.time() + own.wait_seconds
    waiters = follow.asks
    if waiters is None:
        return created
    with waiters.watch(ask_id) as changed:
        while True:
            changed.clear()
            current = await follow.caller.call(follow.scope, "GET", f"/api/asks/{ask_id}")
            remaining = until - loop.time()
            if not current.ok or current.json()["status"] != "open" or remaining <= 0:
                return current
            try:
                await asyncio.wait_for(changed.wait(), min(remaining, RECHECK_SECONDS))
            except asyncio.TimeoutError:
                pass


class Catalog:
    """The tools as one application serves them: each one's shape comes from its route's view."""

    def __init__(self, app):
        adapter = app.url_map.bind("mcp.internal")
        self.shapes: dict[str, Shape] = {}
        answers: dict[str, type] = {}
        for tool in TOOLS:
            sample = _SAMPLE.sub(lambda m: "1" if m[1] == "id" else "x", tool.path)
            endpoint, _values = adapter.match(sample, method=tool.method)
            view = app.view_functions[endpoint]
            self.shapes[tool.name] = Shape(tool.path, view, tuple(tool.fixed), tool.own)
            answers[tool.name] = _answer(tool, getattr(view, "__schema__", None))
        self.tools = tuple(types.Tool(
            name=t.name, description=t.description, input_schema=self.shapes[t.name].input_schema(),
            output_schema=object_schema(answers[t.name], t.wrap),
            annotations=types.ToolAnnotations(read_only_hint=t.method == "GET")) for t in TOOLS)
        self._schemas = {t.name: t.input_schema for t in self.tools}

    def input_schema(self, name: str) -> dict | None:
        """For the SDK's Mcp-Param header check, without listing every tool on each call."""
        return self._schemas.get(name)

    def request(self, tool: Tool, arguments: dict) -> tuple[str, dict[str, str], dict | None, Any]:
        """(path, query, body) of the tool's route, and the tool's own arguments (Tool.own, parsed)."""
        shape = self.shapes[tool.name]
        given, own = shape.own_arguments(arguments)
        path, query, body = shape.request(tool.method, given)
        return path, query, None if body is None else {**body, **tool.fixed}, own


def _answer(tool: Tool, declared: dict | None) -> type:
    """The response model the tool's route declares for its 2xx answer: the tool's outputSchema (its
    structuredContent)."""
    returns = (declared or {}).get("returns") or {}
    answer = next((model for status, model in sorted(returns.items()) if 200 <= status < 300), None)
    if answer is None:
        raise RuntimeError(f"MCP tool {tool.name}: its route declares no response model")
    return answer


TOOLS: list[Tool] = [
    Tool("wake", "What is waiting for you, most urgent first (the wake list). Buzz items returned are "
         "marked delivered.", "GET", "/api/wake", _wake),
    Tool("send_message", "Send a mailbox message to an identity.", "POST",
         SEND_ROUTE, lambda m, _: f"Sent message {m['id']} to {m['recipient']}."),
    Tool("list_inbox", "Your received messages: unread ones urgent first, then oldest first.",
         "GET", "/api/mailboxes/me/messages", _inbox),
    Tool("search_messages", "Full-text search over your received messages, newest first.",
         "GET", "/api/mailboxes/me/messages/search", _count("messages", "messages match")),
    Tool("ack_messages", "Mark received messages read.", "POST", "/api/mailboxes/me/messages/ack",
         _ack),
    Tool("reply", "Reply to a message you received (goes to its sender, in its thread).", "POST",
         "/api/mailboxes/me/messages/{id}/reply",
         lambda m, _: f"Replied to message {m['replyToMessageId']} (message {m['id']} to {m['recipient']})."),
    Tool("set_pending", "Mark a message you received as awaiting your answer (it stays in your wake).",
         "POST", "/api/mailboxes/me/messages/{id}/pending",
         lambda m, _: f"Message {m['id']} is pending your reply."),
    Tool("clear_pending", "Clear the pending mark of a message you received.", "DELETE",
         "/api/mailboxes/me/messages/{id}/pending", lambda m, _: f"Message {m['id']} is no longer pending."),
    Tool("chat_channels", "Your chat channels, latest activity first, with unread counts.",
         "GET", "/api/chat/channels", _channels),
    Tool("chat_read", "Messages of a chat channel, oldest first. Does not mark the channel read.",
         "GET", "/api/chat/channels/{channelId}/messages", _count("messages", "messages")),
    Tool("chat_send", "Post a message to a chat channel you belong to.", "POST",
         "/api/chat/channels/{channelId}/messages", lambda m, _: f"Posted message {m['id']}."),
    Tool("chat_mark_read", "Mark a chat channel read up to its latest message.", "POST",
         "/api/chat/channels/{channelId}/read", lambda _r, args: f"Channel {args['channelId']} marked read."),
    Tool("list_tasks", "Tasks you can see; complete and closed ones only with includeCompleted or statuses.",
         "GET", "/api/swarm/tasks", _count("tasks", "tasks")),
    Tool("create_task", "Create a task (status defaults to ready).", "POST", "/api/swarm/tasks",
         _task("Created")),
    Tool("update_task", "Change a task's fields other than its status; null clears a field.",
         "PATCH", "/api/swarm/tasks/{taskId}", _task("Updated")),
    Tool("move_task", "Move a task to another status by the state table; a refused move names the "
         "statuses allowed from the current one (`allowed`).", "PATCH",
         "/api/swarm/tasks/{taskId}/status", _task("Moved")),
    Tool("claim_task", "Start a ready task: an unassigned one becomes yours (of racing claims exactly one "
         "wins). With leaseSeconds it is yours only until then unless you renew_task_lease: a lease that runs out "
         "returns the task to ready.", "PATCH", "/api/swarm/tasks/{taskId}/status", _task("Claimed"),
         fixed={"status": "in_progress"}),
    Tool("renew_task_lease", "Extend the lease of a task you hold (by leaseSeconds, else the lease's own length).",
         "POST", "/api/swarm/tasks/{taskId}/renew", _leased),
    Tool("reserve", "Reserve a resource (a path, a glob such as src/** or src/*.py, or a name) for ttlSeconds: "
         "exclusive unless exclusive=false (shared ones coexist). Refused with the conflicts when it overlaps "
         "others' reservations. Advisory: reserve before editing files others may edit.", "POST",
         "/api/reservations", _reservation("Made")),
    Tool("list_reservations", "Reservations in force you can see, soonest to end first; resource= lists those "
         "overlapping it.", "GET", "/api/reservations", _reservations),
    Tool("renew_reservation", "Extend a reservation you hold (by ttlSeconds, else its own length).", "POST",
         "/api/reservations/{reservationId}/renew", _reservation("Renewed")),
    Tool("release", "Release a reservation you hold (an admin may release any).", "DELETE",
         "/api/reservations/{reservationId}", lambda _r, args: f"Released reservation {args['reservationId']}."),
    Tool("list_projects", "Projects you can see, by title.", "GET", "/api/swarm/projects",
         _count("projects", "projects")),
    Tool("task_workflows", "The workflows (procedures) attached to a task: follow an enabled, unexpired one.",
         "GET", "/api/swarm/tasks/{taskId}/workflows", _count("workflows", "workflows")),
    Tool("notebook_search", "Notebook pages you can see, most recently updated first (without content).",
         "GET", "/api/notebook", _count("pages", "pages")),
    Tool("notebook_read", "A notebook page with its content (the live text while someone edits it).",
         "GET", "/api/notebook/{pageId}",
         lambda r, _: f"Page '{r['page']['title']}' ({len(r['page']['content'] or '')} characters)."),
    Tool("notebook_edit", "Change a notebook page; new content is merged into the live document like a "
         "REST PATCH, so editors keep their own edits.", "PATCH", "/api/notebook/{pageId}",
         lambda r, _: f"Saved page '{r['page']['title']}'."),
    Tool("notebook_versions", "A notebook page's stored versions, newest first: when, who edited since the "
         "previous one, size, label (without their text).", "GET", "/api/notebook/{pageId}/versions",
         _count("versions", "versions")),
    Tool("notebook_version", "One stored version of a notebook page, with its text.", "GET",
         "/api/notebook/{pageId}/versions/{versionId}",
         lambda r, _: f"Version {r['version']['id']} ({r['version']['size']} characters, {r['version']['reason']})."),
    Tool("notebook_checkpoint", "Keep a notebook page's text now as a version, with an optional label.", "POST",
         "/api/notebook/{pageId}/versions", lambda r, _: f"Kept version {r['version']['id']}."),
    Tool("notebook_restore", "Make a notebook page's text that of an older version, as an ordinary edit that "
         "live editors receive; the text replaced is kept as a version first.", "POST",
         "/api/notebook/{pageId}/versions/{versionId}/restore",
         lambda r, _: f"Restored page '{r['page']['title']}' (version {r['version']['id']})."),
    Tool("directory", "Directory entries (links) you can see, newest first.", "GET",
         "/api/directory", _count("entries", "entries"), wrap="entries"),
    Tool("update_link", "Change a directory link's title, url, description or taggedUsers (its creator or an "
         "admin); the fields not given stay, null clears description or taggedUsers.", "PATCH",
         "/api/directory/{entryId}", lambda e, _: f"Updated link {e['id']} '{e['title']}'."),
    Tool("buzz_events", "Buzz (broadcast) events addressed to you or everyone, newest first.",
         "GET", "/api/broadcast/events", _count("events", "events")),
    Tool("presence", "Who is online, with unread and active-task counts.", "GET", "/api/presence",
         _presence),
    Tool("doctor", "Checks of your setup: token, identity, stream, webhooks, pending replies.", "GET",
         "/api/doctor", _doctor),
    Tool("ask_human", "Ask one identity or a group (a human, or an agent) a question with options, and wait for "
         "the answer: returns once it is answered or expires, or after wait_seconds with status open (then "
         "get_ask reads it later).", "POST", "/api/asks", _ask, own=AskWait, then=_await_answer),
    Tool("get_ask", "One ask you made or were asked; reading the outcome of one you made clears it from your wake.",
         "GET", "/api/asks/{askId}", _ask),
    Tool("list_asks", "Asks put to you (role received) or made by you (role sent), newest first.", "GET",
         "/api/asks", _asks),
    Tool("answer_ask", "Answer an ask put to you with an option (its number or label) or, where allowed, text; "
         "the first answer wins.", "POST", "/api/asks/{askId}/answer", _ask),
    Tool("list_alerts", "Buzz alerts you can see (one per problem, with its firing count), newest activity "
         "first; filter by state (open, acked, snoozed, resolved) and appName.", "GET", "/api/buzz/alerts",
         _alerts),
    Tool("ack_alert", "Acknowledge an alert: you are on it (it leaves the others' wake; 409 names who was first).",
         "POST", "/api/buzz/alerts/{alertId}/ack", _alert("Acked")),
    Tool("snooze_alert", "Snooze an alert for minutes, or until a time: it is open again then, by itself.",
         "POST", "/api/buzz/alerts/{alertId}/snooze", _alert("Snoozed")),
    Tool("resolve_alert", "Resolve an alert (the problem is over); a new firing reopens it.", "POST",
         "/api/buzz/alerts/{alertId}/resolve", _alert("Resolved")),
    Tool("preview_silence", "What a silence would hide: events of the last 24 h it matches, and their alerts. "
         "Nothing is created; run it before silence_alerts.", "POST", "/api/buzz/silences/preview", _preview),
    Tool("silence_alerts", "Silence ingests of a webhook or app name matching a title (substring or /regex/) "
         "and/or labels, for minutes or until endsAt: stored and counted, with no wake, stream event or push.",
         "POST", "/api/buzz/silences", _silence),
    Tool("list_guards", "Admin: loop guards holding now (agents suspected of looping, their pulses and pushes "
         "held) and those cleared in the last 24 h, with who cleared them.", "GET", "/api/admin/guards", _guards),
    Tool("clear_guard", "Admin: clear a loop guard now, so its members' wake pulses and pushes flow again "
         "(409 when already cleared).", "POST", "/api/admin/guards/{guardId}/clear", _guard_cleared),
]
BY_NAME = {tool.name: tool for tool in TOOLS}


def shown(text: str) -> types.TextContent:
    """A text content: what agent front-ends print, so neutralised for the terminal (terminal_text.py)."""
    return types.TextContent(type="text", text=terminal_safe(text))


def refusal(message: str, body: dict | None = None) -> types.CallToolResult:
    """A refused call: an MCP tool error (isError) carrying our error message, never a protocol error."""
    return types.CallToolResult(content=[shown(message)], structured_content=body or {"error": message},
                                is_error=True)


async def call(catalog: Catalog, caller: RouteCaller, scope: dict, name: str,
               arguments: dict | None, asks: AskWaiters | None = None) -> types.CallToolResult:
    tool = BY_NAME.get(name)
    if tool is None:
        return refusal(f"Unknown tool '{name}'. tools/list names them.")
    try:
        path, query, body, own = catalog.request(tool, arguments or {})
    except Refused as error:
        return refusal(str(error))
    reply = await caller.call(scope, tool.method, path, query, body)
    if tool.then is not None and reply.ok:
        reply = await tool.then(Follow(caller, scope, asks), reply, own)
    if not reply.ok:
        refused = reply.error()
        return refusal(refused["error"], refused)
    result = reply.json()
    structured = {tool.wrap: result} if tool.wrap else result
    found = fence.pieces(structured, scope["coord.principal"].identity, tool.name)
    agents = await agent_flags(caller, scope, found)
    return result_of(tool, structured, arguments or {}, found, agents)


async def agent_flags(caller: RouteCaller, scope: dict, found: list[fence.Piece]) -> dict[str, bool]:
    """Whether each author of an untrusted text is an agent (GET /api/users, as the caller)."""
    if not any(piece.author for piece in found):
        return {}
    users = await caller.call(scope, "GET", "/api/users")
    if not users.ok:
        return {}
    return {u["id"]: bool(u.get("isAgent")) for u in users.json().get("users", [])}


def result_of(tool: Tool, structured: dict, arguments: dict, found: list[fence.Piece],
              agents: dict[str, bool]) -> types.CallToolResult:
    """The route's answer as the tool's result; what others wrote is fenced (fence.py)."""
    summary = tool.summary(structured, arguments)
    if not found:
        text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
        return types.CallToolResult(content=[shown(summary), shown(text)], structured_content=structured)
    fenced = fence.fence_answer(structured, found, agents)
    return types.CallToolResult(
        content=[shown(fence.summary_without(summary, found)), shown(fenced.text), *map(shown, fenced.blocks)],
        structured_content=fenced.structured)


def markdown_table() -> str:
    """The tool list as README shows it (generated: tests/server/mcp/test_mcp.py compares the two)."""
    lines = ["| Tool | What it does | REST equivalent |", "|---|---|---|"]
    for t in TOOLS:
        route = f"`{t.method} {t.path}`" + (f" `{json.dumps(t.fixed)}`" if t.fixed else "")
        lines.append(f"| `{t.name}` | {t.description} | {route} |")
    return "\n".join(lines)
