"""`coordtui --serve --demo`: the bundled server, in a data dir of its own, with a small cast acting on it.

Two agents (build-bot, review-bot) and one human teammate (dana) act through the real API, each with its own
token (the SDK: client/), at a human pace and within bounded loops, so the first screen shows what coord is for:
- build-bot mails build results, asks the user whether to deploy (an ask) and proceeds once answered;
- review-bot creates, claims and moves tasks, gives the user one, and edits a runbook page live;
- dana chats in a group channel with the user and the agents;
- a Buzz webhook (Prometheus, say) fires an alert now and then, and build-bot resolves it;
- whoever the user mails answers back (a reply), dana included.

Every wait is `seconds * pace` (1.0: a person's pace; tests pass a small one), and every script runs at most
`rounds` times. The cast's tokens are kept in the demo's data dir (0600), so a second run reuses them.
`run()` is cancelled to stop: each actor stops where it is and every client is closed.
"""
from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable, TypeVar
from urllib.parse import urlsplit

import httpx
import platformdirs

from .client.api import ApiError, ConnectionFailed, CoordClient

T = TypeVar("T")

BUILD_BOT, REVIEW_BOT, TEAMMATE = "build-bot", "review-bot", "dana"
AGENTS = (BUILD_BOT, REVIEW_BOT)
CAST_FILE = "demo-cast.json"  # in the demo's data dir: the cast's tokens
MARKER_FILE = "DEMO"  # in the demo's data dir: says what it is
CHANNEL = "ops"
ALERT_APP = "prometheus"
RUNBOOK = "Runbook: deploying checkout"

# What each actor says, in turn (the scripts loop over them, `rounds` times at most).
BUILDS = [("passed", "All 412 tests passed in 6m 12s."),
          ("failed", "test_checkout_retries failed (timeout after 30 s)."),
          ("passed", "All 413 tests passed in 6m 40s; the flaky retry test is quarantined.")]
CHAT = ["morning! anyone looking at the checkout latency?", "build-bot says #2 is red, I'll look at the retry test",
        "pushed a fix for the flaky test, should be green next build", "review-bot: can you take PR 481 after lunch?",
        "the runbook now has the rollback steps, thanks review-bot", "heading out soon, ping me by mail if needed"]
REVIEWS = ["PR 481: retry budget for the payment client", "PR 482: cache warm-up on deploy",
           "PR 483: structured logs for checkout"]
RUNBOOK_STEPS = ["Check the build on main is green (build-bot mails every result).",
                 "Ask build-bot to deploy to staging; watch p99 latency for 10 minutes.",
                 "If p99 > 800 ms: roll back with `deploy rollback checkout`.",
                 "Promote to production; post in #ops when done.",
                 "Close the deploy task and link the build in the page history."]
REPLIES = {BUILD_BOT: "On it: I will rerun the pipeline and mail you the result.",
           REVIEW_BOT: "Thanks, I picked it up and moved the review along.",
           TEAMMATE: "Sounds good, let's talk in #ops."}


def demo_data_dir() -> Path:
    """The demo's data: next to the real one, never the same (coordtui --serve keeps platformdirs' "coord")."""
    return Path(platformdirs.user_data_dir("coord-demo"))


def mark_demo_dir(data_dir: Path) -> None:
    """Refuse a dir holding real data (a database and no demo marker); mark an empty or demo one."""
    marker = data_dir / MARKER_FILE
    if (data_dir / "coord.db").exists() and not marker.exists():
        raise RuntimeError(f"{data_dir} holds a coord database that is not a demo's: the demo never touches it")
    data_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text("coordtui --serve --demo: simulated data, safe to delete\n", encoding="utf-8")


@dataclass
class Demo:
    """The simulation: `await run()` until cancelled (or every script is done). `events` counts what the cast did
    (mail, replies, tasks, alerts, ...) and `problems` keeps refusals, which never end it."""
    base_url: str
    admin_token: str
    data_dir: Path
    pace: float = 1.0
    rounds: int = 12
    poll: float = 2.0  # seconds between inbox and ask checks (times pace, at least 0.05)
    events: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    user: str = ""
    clients: dict[str, CoordClient] = field(default_factory=dict)
    builds_before: int = 0  # a second run goes on numbering builds where the first one stopped

    async def wait(self, seconds: float) -> None:
        await asyncio.sleep(seconds * self.pace)

    async def wait_poll(self) -> None:
        await asyncio.sleep(max(0.05, self.poll * self.pace))

    def did(self, what: str) -> None:
        self.events[what] = self.events.get(what, 0) + 1

    async def attempt(self, what: str, call: Callable[[], Awaitable[T]]) -> T | None:
        """One step of a script: a refusal or an unreachable server is noted, and the script goes on."""
        try:
            result = await call()
        except (ApiError, ConnectionFailed, httpx.HTTPError) as exc:
            self.problems.append(f"{what}: {exc}")
            return None
        self.did(what)
        return result

    # --- the cast and the stage -----------------------------------------------------------------------------

    async def run(self) -> None:
        admin = CoordClient(self.base_url, self.admin_token)
        try:
            self.user = (await admin.verify()).identity
            for name, token in (await self.cast(admin)).items():
                self.clients[name] = CoordClient(self.base_url, token)
            channel = await self.channel()
            await self.pick_up(self.clients[BUILD_BOT])
            hook_url = await self.webhook(admin)
            async with asyncio.TaskGroup() as group:
                group.create_task(self.builds())
                group.create_task(self.deploy_questions())
                group.create_task(self.reviews())
                group.create_task(self.runbook())
                group.create_task(self.chat(channel))
                group.create_task(self.alerts(hook_url))
                for name in self.clients:
                    group.create_task(self.answer_mail(name))
        finally:
            await asyncio.shield(self.close(admin))

    async def close(self, admin: CoordClient) -> None:
        for client in [admin, *self.clients.values()]:
            await client.aclose()

    async def cast(self, admin: CoordClient) -> dict[str, str]:
        """The cast's tokens: kept from an earlier run when they still work, else issued (agents flagged)."""
        path = self.data_dir / CAST_FILE
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            kept = {}
        tokens: dict[str, str] = {}
        for name in (*AGENTS, TEAMMATE):
            token = kept.get(name) if isinstance(kept, dict) else None
            if not isinstance(token, str) or not await self.works(token):
                token = await self.issue(admin, name)
            tokens[name] = token
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(tokens, handle)
        return tokens

    async def works(self, token: str) -> bool:
        async with CoordClient(self.base_url, token) as probe:
            try:
                await probe.verify()
            except (ApiError, ConnectionFailed):
                return False
        return True

    async def issue(self, admin: CoordClient, name: str) -> str:
        try:
            issued = await admin.create_token(name, False, "coordtui --demo")
        except ApiError as exc:
            if exc.status != 409:
                raise
            live = [t for t in await admin.tokens() if t.identity == name and t.revoked_at is None]
            if not live:
                raise
            issued = await admin.rotate_token(live[0].id)  # the demo's own identity, its token file lost
        if name in AGENTS:
            await self.attempt("flag agent", lambda: admin.update_user(name, isAgent=True))
        return issued.token

    async def pick_up(self, bot: CoordClient) -> None:
        """After an earlier run: builds are numbered on, and its unanswered questions are withdrawn (nobody
        waits for their answer any more)."""
        sent = await bot.sent(limit=100)
        self.builds_before = sum(1 for m in sent if m.title.startswith("Build #"))
        for ask in await bot.asks(role="sent", status="open"):
            await self.attempt("withdraw", lambda: bot.cancel_ask(ask.id))

    async def channel(self) -> str:
        dana = self.clients[TEAMMATE]
        for channel in await dana.channels():
            if channel.name == CHANNEL:
                return channel.id
        return await dana.create_group(CHANNEL, [self.user, *AGENTS])

    async def webhook(self, admin: CoordClient) -> str:
        """The alert source's ingest URL on this server (the server's own may name its public base URL)."""
        hooks = [h for h in await admin.webhooks() if h.app_name == ALERT_APP]
        hook = hooks[0] if hooks else await admin.create_webhook(ALERT_APP, "Prometheus (demo)",
                                                                wakeAgent=self.user, notifyAgent=BUILD_BOT)
        return f"{self.base_url.rstrip('/')}{urlsplit(hook.ingest_url or '').path}"

    # --- the scripts ------------------------------------------------------------------------------------------

    async def builds(self) -> None:
        bot = self.clients[BUILD_BOT]
        await self.wait(2)
        for number in range(self.builds_before + 1, self.builds_before + self.rounds + 1):
            result, detail = BUILDS[(number - 1) % len(BUILDS)]
            await self.attempt("mail", lambda: bot.send(self.user, f"Build #{number} on main {result}", detail,
                                                        urgent=result == "failed"))
            await self.wait(40)

    async def deploy_questions(self) -> None:
        """An ask; once the user answers it, build-bot proceeds as told (a mail and a line in #ops)."""
        bot = self.clients[BUILD_BOT]
        await self.wait(6)
        for number in range(self.builds_before + 1, self.builds_before + self.rounds + 1):
            ask = await self.attempt("ask", lambda: bot.create_ask(
                self.user, f"Deploy build #{number} of checkout to staging?", ["Deploy", "Hold"]))
            if ask is None:
                await self.wait(30)
                continue
            answer = await self.answer_to(bot, ask.id)
            if answer is not None:
                await self.attempt("proceed", lambda: bot.send(
                    self.user, f"{answer}: build #{number}",
                    f"You said {answer}. {'Deploying to staging now.' if answer == 'Deploy' else 'Holding it.'}"))
            await self.wait(90)

    async def answer_to(self, bot: CoordClient, ask_id: int) -> str | None:
        """The option the user chose, once they chose (None when the ask expired or was cancelled)."""
        while True:
            await self.wait_poll()
            try:
                ask = await bot.get_ask(ask_id)
            except (ApiError, ConnectionFailed):
                continue
            if ask.status == "answered":
                return ask.option or ask.text or "answered"
            if ask.status != "open":
                return None

    async def reviews(self) -> None:
        """review-bot: a task per PR, claimed, moved to review and done; one for the user to approve."""
        bot = self.clients[REVIEW_BOT]
        await self.wait(4)
        await self.attempt("task", lambda: bot.create_task("Approve the release notes for checkout 2.4",
                                                           assigneeUserId=self.user))
        for number in range(self.rounds):
            title = REVIEWS[number % len(REVIEWS)]
            task = await self.attempt("task", lambda: bot.create_task(f"Review {title}", assigneeUserId=REVIEW_BOT))
            if task is None:
                await self.wait(30)
                continue
            task_id = str(task.id)
            for status in ("in_progress", "review", "complete"):
                await self.wait(15)
                await self.attempt("move", lambda: bot.move_task(task_id, status))
            await self.wait(20)

    async def runbook(self) -> None:
        """review-bot writes the runbook a step at a time (the Notes pane shows it change)."""
        bot = self.clients[REVIEW_BOT]
        await self.wait(8)
        pages = [p for p in await bot.pages(RUNBOOK) if p.title == RUNBOOK]
        page = pages[0] if pages else await bot.create_page(RUNBOOK, "# Deploying checkout\n", ["runbook", "demo"])
        steps: list[str] = []
        for number in range(min(self.rounds, len(RUNBOOK_STEPS))):
            steps.append(f"{number + 1}. {RUNBOOK_STEPS[number]}")
            content = "# Deploying checkout\n\n" + "\n".join(steps) + "\n"
            await self.attempt("page edit", lambda: bot.update_page(page.id, content=content))
            await self.wait(25)

    async def chat(self, channel: str) -> None:
        dana = self.clients[TEAMMATE]
        await self.wait(3)
        for number in range(self.rounds):
            line = CHAT[number % len(CHAT)]
            await self.attempt("chat", lambda: dana.post_chat(channel, line))
            await self.wait(30)

    async def alerts(self, hook_url: str) -> None:
        """A latency alert fires through the webhook; a while later build-bot resolves it."""
        bot = self.clients[BUILD_BOT]
        await self.wait(5)
        async with httpx.AsyncClient(timeout=10) as http:
            for number in range(1, self.rounds + 1):
                payload = {"title": "HighLatency: checkout p99 above 800 ms",
                           "body": f"p99 {820 + 37 * number} ms on checkout-{number % 3 + 1} for 5 minutes",
                           "dedupKey": f"checkout-latency-{number}", "labels": {"service": "checkout"}}

                async def fire() -> object:
                    response = await http.post(hook_url, json=payload)
                    response.raise_for_status()
                    return response.json()
                fired = await self.attempt("alert", fire)
                await self.wait(45)
                alert_id = fired.get("alertId") if isinstance(fired, dict) else None
                if isinstance(alert_id, int):
                    await self.attempt("resolve", lambda: bot.resolve_alert(alert_id))
                await self.wait(60)

    async def answer_mail(self, name: str) -> None:
        """Mail from the user (anyone outside the cast) gets a reply, at most `rounds` of them."""
        me = self.clients[name]
        replied = 0
        while replied < self.rounds:
            await self.wait_poll()
            try:
                unread = await me.inbox_all("unread", max_pages=1)
            except (ApiError, ConnectionFailed):
                continue
            for message in unread:
                if message.sender in self.clients:
                    continue
                await self.attempt("reply", lambda: me.reply(message.id, REPLIES[name]))
                await self.attempt("ack", lambda: me.ack(message.id))
                replied += 1
