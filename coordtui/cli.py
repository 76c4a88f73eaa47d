"""coordtui: the terminal client, and scriptable subcommands.

Exit codes: 0 ok; 1 the server refused (its error on stderr); 2 usage or configuration error; 3 cannot connect.
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from datetime import datetime
from pathlib import Path
from typing import Optional

import typer

from .client.api import ApiError, ConnectionFailed, CoordClient
from .config import ConfigError, Profile, load_profile

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3

cli = typer.Typer(help="coordtui: the coord terminal client. Exit codes: 0 ok, 1 server refused, "
                       "2 usage/config error, 3 cannot connect.", add_completion=False)


@dataclasses.dataclass
class Options:
    url: str | None
    token: str | None
    profile: str | None
    serve: bool
    data: Path | None
    bell: bool
    notify: bool = False


def resolve(options: Options) -> Profile | None:
    """--url/--token, then --profile, then COORD_URL/COORD_TOKEN, then the default saved profile."""
    if options.url or options.token:
        if not (options.url and options.token):
            raise ConfigError("--url and --token go together (or set COORD_URL and COORD_TOKEN)")
        return Profile("command line", options.url, options.token)
    if options.profile:
        return load_profile(options.profile)
    url, token = os.environ.get("COORD_URL"), os.environ.get("COORD_TOKEN")
    if url and token:
        return Profile("environment", url, token)
    return load_profile(None)


def _fail(code: int, message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _connection(ctx: typer.Context) -> Profile:
    options: Options = ctx.obj
    if options.serve:  # e.g. `coordtui --serve inbox`: the bundled server, for this one command
        from .embedded import EmbeddedServer
        server = EmbeddedServer(options.data)
        try:
            server.start()
        except Exception as exc:
            _fail(EXIT_USAGE, f"cannot start the bundled server: {exc}")
        ctx.call_on_close(server.stop)
        return Profile("local", server.url, server.token)
    try:
        profile = resolve(options)
    except ConfigError as exc:
        _fail(EXIT_USAGE, str(exc))
    if profile is None:
        _fail(EXIT_USAGE, "not configured: pass --url and --token, --profile NAME, or set COORD_URL and COORD_TOKEN")
    return profile


def _call(profile: Profile, fn):
    async def main():
        async with CoordClient(profile.url, profile.token) as client:
            return await fn(client)
    try:
        return asyncio.run(main())
    except ApiError as exc:
        _fail(EXIT_REFUSED, f"{exc.message} (HTTP {exc.status})")
    except ConnectionFailed as exc:
        _fail(EXIT_UNREACHABLE, str(exc))


def _jsonable(value):
    if dataclasses.is_dataclass(value):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return value


@cli.callback(invoke_without_command=True)
def main_options(ctx: typer.Context,
                 url: Optional[str] = typer.Option(None, "--url", help="Server base URL (else COORD_URL)."),
                 token: Optional[str] = typer.Option(None, "--token", help="API token (else COORD_TOKEN)."),
                 profile: Optional[str] = typer.Option(None, "--profile", help="A saved connection profile."),
                 serve: bool = typer.Option(False, "--serve", help="Run the bundled server in-process and connect to it."),
                 data: Optional[Path] = typer.Option(None, "--data", help="Data directory for --serve."),
                 bell: bool = typer.Option(False, "--bell", help="Ring the terminal bell on urgent wake items."),
                 notify: bool = typer.Option(False, "--notify", help="Desktop notifications through the terminal "
                                             "(OSC 9 and OSC 777) for new mail, chat and urgent items.")) -> None:
    ctx.obj = Options(url, token, profile, serve, data, bell, notify)
    if ctx.invoked_subcommand is not None:
        return
    if data and not serve:
        _fail(EXIT_USAGE, "--data needs --serve")
    run_tui(ctx.obj)


def run_tui(options: Options) -> None:
    from .app import CoordApp
    if options.serve:
        from .embedded import EmbeddedServer
        server = EmbeddedServer(options.data)
        try:
            server.start()
        except Exception as exc:  # surfaced as a configuration error: the data dir or port is unusable
            _fail(EXIT_USAGE, f"cannot start the bundled server: {exc}")
        try:
            CoordApp(Profile("local", server.url, server.token), bell=options.bell, notify=options.notify,
                     embedded=server).run()
        finally:
            server.stop()
        return
    try:
        profile = resolve(options)
    except ConfigError as exc:
        _fail(EXIT_USAGE, str(exc))
    CoordApp(profile, bell=options.bell, notify=options.notify).run()


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
    profile = _connection(ctx)
    message = _call(profile, lambda client: client.send(recipient, title, body, urgent))
    if as_json:
        typer.echo(json.dumps(_jsonable(message), indent=2))
    else:
        typer.echo(f"sent message {message.id} to {message.recipient}")


@cli.command()
def inbox(ctx: typer.Context, as_json: bool = typer.Option(False, "--json"),
          all_messages: bool = typer.Option(False, "--all", help="Read messages too, not only unread.")) -> None:
    """List your unread mail (or all with --all)."""
    profile = _connection(ctx)
    messages = _call(profile, lambda client: client.inbox_all(None if all_messages else "unread"))
    if as_json:
        typer.echo(json.dumps(_jsonable(messages), indent=2))
        return
    if not messages:
        typer.echo("No messages." if all_messages else "No unread messages.")
    for message in messages:
        flag = "!" if message.urgent else ("*" if message.unread else " ")
        typer.echo(f"{flag} {message.id:>6}  {message.sender:12} {message.title}")


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
