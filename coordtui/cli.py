"""coordtui: the terminal client, and scriptable subcommands.

Exit codes: 0 ok; 1 the server refused (its error on stderr); 2 usage or configuration error; 3 cannot connect
(or the URL answers but is not a coord server). Global options may stand anywhere on the line.
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, List, NoReturn, Optional, TypeVar
from urllib.parse import urlsplit

import typer
from typer.core import TyperGroup

from .client.api import ApiError, ConnectionFailed, CoordClient
from .config import ConfigError, Profile, default_data_dir, load_profile
from .demo import demo_data_dir

if TYPE_CHECKING:
    from typer._click.core import Context as ClickContext  # typer vendors click: what TyperGroup.parse_args takes

    from .bundled import Bundled  # imported when --serve asks for it: it starts the server
    from .demo import Demo

T = TypeVar("T")

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3

GLOBAL_WITH_VALUE = ("--url", "--token", "--token-file", "--profile", "--data")
GLOBAL_FLAGS = ("--serve", "--bell", "--demo")


def hoist_global_options(args: list[str]) -> list[str]:
    """`coordtui inbox --url U` means `coordtui --url U inbox`: global options move before the subcommand
    (everything after a `--` stays where it is)."""
    front, rest, i = [], [], 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        name = arg.split("=", 1)[0]
        if arg in GLOBAL_FLAGS:
            front.append(arg)
        elif name in GLOBAL_WITH_VALUE:
            take = 1 if "=" in arg else 2
            front.extend(args[i:i + take])
            i += take - 1
        else:
            rest.append(arg)
        i += 1
    return front + rest


class GlobalOptionsGroup(TyperGroup):
    def parse_args(self, ctx: ClickContext, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_global_options(list(args)))


HELP = f"""coordtui: the coord terminal client (run without a subcommand for the full-screen UI).

Connection: --url and a token (--token, --token-file PATH, or COORD_TOKEN / COORD_TOKEN_FILE; prefer the file or
the variable: --token shows in `ps`), or --profile NAME, or COORD_URL + COORD_TOKEN, or the default saved profile.
Global options may stand anywhere on the line: `coordtui inbox --url U`.

--serve runs the bundled server on 127.0.0.1 (a free port) with its data in --data (default:
{default_data_dir()}). Its URL shows in the header of the UI and in DATA/serve.lock (JSON: url, port, pid). A second
`coordtui --serve` on the same data dir, or `coordtui --serve send|wake|inbox|ack|reply|show`, attaches to the
running one instead of starting another.

--serve --demo runs it in a data dir of its own ({demo_data_dir()}; never the real one) with simulated agents
(build-bot, review-bot) and a teammate (dana) acting through the API: mail, tasks, chat, a question for you, alerts,
a runbook edited live. Answer them: they answer back. Quitting stops them. COORD_DEMO_PACE=0.2 runs it 5x faster.

Exit codes: 0 ok, 1 server refused, 2 usage/config error, 3 cannot connect (or not a coord server)."""

cli = typer.Typer(cls=GlobalOptionsGroup, help=HELP, add_completion=False, rich_markup_mode=None)


@dataclasses.dataclass
class Options:
    url: str | None
    token: str | None
    profile: str | None
    serve: bool
    data: Path | None
    bell: bool
    token_file: Path | None = None
    notify: bool = False
    demo: bool = False


def _read_token_file(path: Path | str | None) -> str | None:
    if not path:
        return None
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(f"cannot read the token file {path}: {exc.strerror or exc}") from exc
    if not token:
        raise ConfigError(f"the token file {path} is empty")
    return token


def check_url(url: str, where: str = "--url") -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"{where} must be a full URL starting with http:// or https:// (got {url!r})")
    return url


def resolve(options: Options) -> Profile | None:
    """--url with --token/--token-file/COORD_TOKEN, then --profile, then COORD_URL + COORD_TOKEN, then the default
    saved profile."""
    def env_token() -> str | None:
        return os.environ.get("COORD_TOKEN") or _read_token_file(os.environ.get("COORD_TOKEN_FILE"))
    token = options.token or _read_token_file(options.token_file)
    if options.url or token:
        url = options.url or os.environ.get("COORD_URL")
        token = token or env_token()
        if not (url and token):
            raise ConfigError("--url and --token go together (the token may also come from --token-file PATH or "
                              "COORD_TOKEN; the URL from COORD_URL)")
        return Profile("command line", check_url(url), token)
    if options.profile:
        named = load_profile(options.profile)
        if named is None:  # not so: given a name, load_profile refuses an unknown one rather than answer None
            raise ConfigError(f"no saved profile named {options.profile!r}")
        check_url(named.url, f"profile {named.name!r}: url")
        return named
    url = os.environ.get("COORD_URL")
    if url:
        token = env_token()
        if token:
            return Profile("environment", check_url(url, "COORD_URL"), token)
    profile = load_profile(None)
    if profile is not None:
        check_url(profile.url, f"profile {profile.name!r}: url")
    return profile


def _fail(code: int, message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _usage(ok: bool, message: str) -> None:
    if not ok:
        _fail(EXIT_USAGE, message)


def _bundled(options: Options) -> Bundled:
    from .bundled import serve_or_attach
    from .demo import mark_demo_dir
    try:
        if options.demo:
            mark_demo_dir(demo_data_dir())
            return serve_or_attach(demo_data_dir())
        return serve_or_attach(options.data or default_data_dir())
    except Exception as exc:  # the data dir or port is unusable: a configuration error
        _fail(EXIT_USAGE, f"cannot start or reach the bundled server: {exc}")


def _connection(ctx: typer.Context) -> Profile:
    options: Options = ctx.obj
    if options.serve:  # e.g. `coordtui --serve inbox`: the running bundled server, else one for this command
        bundled = _bundled(options)
        ctx.call_on_close(bundled.stop)
        return Profile("local", bundled.url, bundled.token)
    try:
        profile = resolve(options)
    except ConfigError as exc:
        _fail(EXIT_USAGE, str(exc))
    if profile is None:
        _fail(EXIT_USAGE, "not configured: pass --url and --token (or --token-file), --profile NAME, "
                          "or set COORD_URL and COORD_TOKEN")
    return profile


def _call(profile: Profile, fn: Callable[[CoordClient], Awaitable[T]]) -> T:
    async def main() -> T:
        async with CoordClient(profile.url, profile.token) as client:
            return await fn(client)
    try:
        return asyncio.run(main())
    except ApiError as exc:
        _fail(EXIT_REFUSED, f"{exc.message} (HTTP {exc.status})")
    except ConnectionFailed as exc:
        _fail(EXIT_UNREACHABLE, str(exc))


def _jsonable(value: object) -> Any:
    """A dataclass from the SDK (or a list or dict of them) as JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return value


def _print_json(value: object) -> None:
    typer.echo(json.dumps(_jsonable(value), indent=2))


@cli.callback(invoke_without_command=True)
def main_options(ctx: typer.Context,
                 url: Optional[str] = typer.Option(None, "--url", help="Server base URL, http(s)://… (else COORD_URL)."),
                 token: Optional[str] = typer.Option(None, "--token", help="API token (visible in ps: prefer "
                                                                            "--token-file or COORD_TOKEN)."),
                 token_file: Optional[Path] = typer.Option(None, "--token-file", help="Read the API token from this "
                                                                                      "file (else COORD_TOKEN_FILE)."),
                 profile: Optional[str] = typer.Option(None, "--profile", help="A saved connection profile."),
                 serve: bool = typer.Option(False, "--serve", help="Run the bundled server on 127.0.0.1 (free port; "
                                            "URL in the header and DATA/serve.lock), or attach to the one already "
                                            "running on the same data dir."),
                 data: Optional[Path] = typer.Option(None, "--data", help="Data directory for --serve (default: "
                                                     f"{default_data_dir()})."),
                 bell: bool = typer.Option(False, "--bell", help="Ring the terminal bell on urgent wake items."),
                 notify: bool = typer.Option(False, "--notify", help="Desktop notifications through the terminal "
                                             "(OSC 9 and OSC 777) for new mail, chat and urgent items."),
                 demo: bool = typer.Option(False, "--demo", help="With --serve: a demo in its own data dir "
                                           f"({demo_data_dir()}), with simulated agents and a teammate.")) -> None:
    ctx.obj = Options(url, token, profile, serve, data, bell, token_file, notify, demo)
    if data and not serve:
        _fail(EXIT_USAGE, "--data needs --serve")
    if demo and (not serve or data or ctx.invoked_subcommand is not None):
        _fail(EXIT_USAGE, "--demo goes with --serve alone (it keeps its data in a dir of its own, never --data)")
    if ctx.invoked_subcommand is None:
        run_tui(ctx.obj)


def run_tui(options: Options) -> None:
    from .app import CoordApp
    if options.serve:
        bundled = _bundled(options)
        where = bundled.url.split("://", 1)[-1]
        name = f"{'demo' if options.demo else 'bundled'} http://{where}"
        app = CoordApp(Profile(name, bundled.url, bundled.token), bell=options.bell, notify=options.notify,
                       embedded=bundled, demo=demo_cast(bundled) if options.demo else None)
        bundled.on_takeover = lambda text: app.call_from_thread(app.notify, text, title="Bundled server", timeout=8)
        bundled.watch()
        try:
            app.run()
        finally:
            bundled.stop()
        return
    try:
        profile = resolve(options)
    except ConfigError as exc:
        _fail(EXIT_USAGE, str(exc))
    CoordApp(profile, bell=options.bell, notify=options.notify).run()


def demo_cast(bundled: Bundled) -> Demo | None:
    """The simulated cast, for the window that serves the demo (an attached window shows it, runs no second one)."""
    from .demo import Demo
    if not bundled.owner:
        return None
    try:
        pace = float(os.environ.get("COORD_DEMO_PACE") or 1.0)
    except ValueError:
        _fail(EXIT_USAGE, "COORD_DEMO_PACE must be a number (1 is a human pace, 0.2 five times faster)")
    return Demo(bundled.url, bundled.token, bundled.data_dir, pace=max(pace, 0.01))


@cli.command()
def wake(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print the raw wake payload.")) -> None:
    """What is waiting for you (GET /api/wake)."""
    profile = _connection(ctx)
    payload = _call(profile, lambda client: client.wake_raw())
    if as_json:
        typer.echo(json.dumps(payload, indent=2))
        return
    typer.echo(payload.get("summary") or "All clear.")
    for item in payload.get("items") or []:
        typer.echo(f"[{item.get('priority', 'normal'):6}] {item.get('source', '?'):15} {str(item.get('id')):>8} "
                   f"{item.get('age') or '':>7}  {item.get('summary', '')}")


@cli.command()
def send(ctx: typer.Context, recipient: str = typer.Argument(..., help="Identity to send to."),
         title: str = typer.Argument(...), body: str = typer.Argument(""),
         urgent: bool = typer.Option(False, "--urgent"),
         as_json: bool = typer.Option(False, "--json", help="Print the created message as JSON.")) -> None:
    """Send a mailbox message."""
    _usage(bool(recipient.strip()), "the recipient must not be empty")
    _usage(bool(title.strip()), "the title must not be empty")
    profile = _connection(ctx)
    message = _call(profile, lambda client: client.send(recipient.strip(), title, body, urgent))
    if as_json:
        _print_json(message)
    else:
        typer.echo(f"sent message {message.id} to {message.recipient}")


INBOX_COLUMNS = f"  {'ID':>6}  {'FROM':12} {'RECEIVED (UTC)':16}  TITLE"


@cli.command()
def inbox(ctx: typer.Context, as_json: bool = typer.Option(False, "--json"),
          all_messages: bool = typer.Option(False, "--all", help="Read messages too, not only unread.")) -> None:
    """List your unread mail (or all with --all). Flags: ! urgent, * unread."""
    profile = _connection(ctx)
    messages = _call(profile, lambda client: client.inbox_all(None if all_messages else "unread"))
    if as_json:
        _print_json(messages)
        return
    if not messages:
        typer.echo("No messages." if all_messages else "No unread messages.")
        return
    typer.echo(INBOX_COLUMNS)
    for message in messages:
        flag = "!" if message.urgent else ("*" if message.unread else " ")
        received = message.created_at.strftime("%Y-%m-%d %H:%M") if message.created_at else ""
        typer.echo(f"{flag} {message.id:>6}  {message.sender:12} {received:16}  {message.title}")


@cli.command()
def ack(ctx: typer.Context, ids: List[int] = typer.Argument(..., help="Message ids to mark read."),
        as_json: bool = typer.Option(False, "--json")) -> None:
    """Mark messages read. Exits 1 if any id is not one of your messages."""
    profile = _connection(ctx)
    result = _call(profile, lambda client: client.ack_many(list(ids)))
    done, missing = result.get("success") or [], result.get("notFound") or []
    if as_json:
        typer.echo(json.dumps({"success": done, "notFound": missing}, indent=2))
    elif done:
        typer.echo(f"acknowledged {' '.join(str(i) for i in done)}")
    if missing:
        _fail(EXIT_REFUSED, f"not found in your mailbox: {' '.join(str(i) for i in missing)}")


@cli.command()
def reply(ctx: typer.Context, message_id: int = typer.Argument(..., metavar="ID"),
          body: str = typer.Argument(..., metavar="BODY"),
          as_json: bool = typer.Option(False, "--json", help="Print the reply as JSON.")) -> None:
    """Reply to a message you received (goes to its sender)."""
    _usage(bool(body.strip()), "the reply body must not be empty")
    profile = _connection(ctx)
    message = _call(profile, lambda client: client.reply(message_id, body))
    if as_json:
        _print_json(message)
    else:
        typer.echo(f"sent reply {message.id} to {message.recipient}")


@cli.command()
def show(ctx: typer.Context, message_id: int = typer.Argument(..., metavar="ID"),
         as_json: bool = typer.Option(False, "--json")) -> None:
    """Print one message you received, with its body (does not mark it read; see `ack`)."""
    profile = _connection(ctx)
    messages = _call(profile, lambda client: client.inbox_all(None, max_pages=100))
    message = next((m for m in messages if m.id == message_id), None)
    if message is None:
        _fail(EXIT_REFUSED, f"message {message_id} is not in your mailbox")
    if as_json:
        _print_json(message)
        return
    received = message.created_at.strftime("%Y-%m-%d %H:%M UTC") if message.created_at else ""
    typer.echo(f"Message {message.id}{' (urgent)' if message.urgent else ''} · {message.status}")
    typer.echo(f"From:    {message.sender}\nTo:      {message.recipient}\nDate:    {received}\n"
               f"Title:   {message.title}\n")
    typer.echo(message.body or "")


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
