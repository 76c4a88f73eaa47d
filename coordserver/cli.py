"""coordserver: serve, init, migrate, backup, restore, invite, token, mcp-tools."""
from __future__ import annotations

import errno
import logging
import os
from pathlib import Path
from typing import Optional

import typer

from .settings import Settings

cli = typer.Typer(help="coordserver: the coord coordination service.", no_args_is_help=True,
                  add_completion=False)
invite_cli = typer.Typer(help="Manage invites.", no_args_is_help=True)
token_cli = typer.Typer(help="Manage API tokens.", no_args_is_help=True)
cli.add_typer(invite_cli, name="invite")
cli.add_typer(token_cli, name="token")


def _store():
    from .db import Store
    settings = Settings.from_env()
    store = Store(settings.database_url, prepare=settings.pg_prepare)
    store.open()
    return settings, store


@cli.command()
def serve(host: str = typer.Option("127.0.0.1", help="Address to listen on."),
          port: int = typer.Option(8420, help="Port to listen on."),
          workers: int = typer.Option(1, min=1, help="Server processes on the port (PostgreSQL only above 1)."),
          access_log: bool = typer.Option(False, help="Log every request."),
          reuse_port: bool = typer.Option(False, hidden=True, help="Listen with SO_REUSEPORT (one of --workers).")) -> None:
    """Run the server (Hypercorn) until interrupted."""
    if not os.environ.get("COORD_BASE_URL"):
        # the links the server hands out (onboarding, ingest, skill docs) point where it listens, not at the
        # default port; set in the environment so that --workers' processes say the same
        os.environ["COORD_BASE_URL"] = f"http://{url_host(host)}:{port}"
    settings = Settings.from_env()
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in ("hypercorn.error", "hypercorn.access"):  # Hypercorn logs through its own handlers
        logging.getLogger(name).propagate = False
    if workers > 1:
        if not settings.database_url.startswith(("postgres://", "postgresql://")):
            typer.echo(f"--workers {workers} needs PostgreSQL: SQLite is one process. Set COORD_DATABASE_URL="
                       "postgresql://... or run one worker.", err=True)
            raise typer.Exit(2)
        from .supervisor import Supervisor
        raise typer.Exit(Supervisor(settings, host, port, workers, access_log).run())
    from .server import run
    try:
        run(settings, host, port, access_log, reuse_port)
    except OSError as error:
        if error.errno != errno.EADDRINUSE or reuse_port:
            raise
        from .lifeline import listener_pids, port_holders_message
        typer.echo(port_holders_message(port, listener_pids(port)), err=True)
        raise typer.Exit(3)


def url_host(host: str) -> str:
    """The host of the server's own links: loopback when it listens on every address (which one a client
    reaches it by is unknown here: COORD_BASE_URL says it), IPv6 addresses in brackets."""
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


@cli.command("mcp-tools")
def mcp_tools(markdown: bool = typer.Option(False, "--markdown", help="The table README.md shows.")) -> None:
    """The tools /mcp lists: their JSON (as tools/list gives them), or a markdown table."""
    import json

    from .mcp import tools
    if markdown:
        typer.echo(tools.markdown_table())
        return
    import tempfile

    from .app import create_app
    with tempfile.TemporaryDirectory() as scratch:  # the app is built to read its routes, never started
        app = create_app(Settings.from_env({"COORD_DATABASE_URL": f"sqlite:///{scratch}/unused.db"}))
        listed = app.extensions["coord"].services.mcp_endpoint.catalog.tools
    typer.echo(json.dumps([t.model_dump(by_alias=True, exclude_none=True) for t in listed], indent=2))


@cli.command()
def migrate() -> None:
    """Create the database or upgrade its schema, then exit."""
    from .db import Store
    settings = Settings.from_env()
    store = Store(settings.database_url)
    found, now = store.open()
    store.close()
    before = "new database" if found is None else f"version {found}"
    typer.echo(f"{settings.database_url}: {before} -> schema version {now}")


@cli.command()
def backup(path: Path = typer.Argument(..., help="A new file to write the copy to.")) -> None:
    """Copy the SQLite database to PATH, safe while the server runs (PostgreSQL: pg_dump)."""
    from .backup import BackupError, backup as run_backup
    settings = Settings.from_env()
    try:
        written = run_backup(settings.database_url, path)
    except BackupError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2)
    typer.echo(f"Backed up {settings.database_url} to {written}")


@cli.command()
def restore(path: Path = typer.Argument(..., help="A file written by coordserver backup.")) -> None:
    """Replace the SQLite database with the backup at PATH. Stop the server first (PostgreSQL: pg_restore)."""
    from .backup import BackupError, restore as run_restore
    settings = Settings.from_env()
    try:
        kept = run_restore(settings.database_url, path)
    except BackupError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(2)
    typer.echo(f"Restored {settings.database_url} from {path}"
               + (f"; the database it replaced is kept as {kept}" if kept else ""))
    typer.echo("Start the server again. Clients resuming from before the restore get `resync` and re-read their state.")


@cli.command()
def init(identity: str = typer.Option("admin", help="Identity of the first admin.")) -> None:
    """Create the database and print a first admin token (once; refuses if tokens exist)."""
    from .domain import identities
    from .models import Token
    settings, store = _store()
    try:
        if store.run_sync(lambda: Token.select().exists()):
            typer.echo("This database already has tokens; use 'coordserver token create' instead.", err=True)
            raise typer.Exit(1)
        name = identities.valid_identity(identity)
        _, plaintext = store.run_sync(identities.issue_token, name, True, "Created by coordserver init", "init")
    finally:
        store.close()
    typer.echo(f"Database ready: {settings.database_url}")
    typer.echo(f"Admin identity: {name}")
    typer.echo(f"Admin token (shown once, store it now): {plaintext}")


@invite_cli.command("create")
def invite_create(identity_hint: Optional[str] = typer.Option(None, "--identity", help="Only this identity may use it."),
                  admin: bool = typer.Option(False, "--admin", help="Registrations become admins."),
                  max_uses: int = typer.Option(1, min=1), expires_in_hours: float = typer.Option(72.0, min=0.01),
                  agent: Optional[bool] = typer.Option(None, "--agent/--human",
                                                       help="Registrations are agents (or humans); unsaid: as each "
                                                            "registrant says, human by default.")) -> None:
    """Create an invite and print its onboarding URL."""
    from .domain import identities
    settings, store = _store()
    try:
        hint = identities.valid_identity(identity_hint) if identity_hint else None
        invite = store.run_sync(identities.create_invite, "operator", hint, admin, max_uses, expires_in_hours, agent)
    finally:
        store.close()
    typer.echo(f"Invite code: {invite['code']}")
    typer.echo(f"Onboarding URL: {settings.base_url}/onboard?code={invite['code']}")


@token_cli.command("create")
def token_create(identity: str = typer.Option(..., help="Identity the token acts as."),
                 admin: bool = typer.Option(False, "--admin", help="Grant admin rights."),
                 label: str = typer.Option("Created by operator", help="A note to recognise it by."),
                 agent: Optional[bool] = typer.Option(None, "--agent/--human",
                                                      help="The identity is an agent (or a human); unsaid: unchanged, "
                                                           "human for a new identity.")) -> None:
    """Issue a database token and print it (once)."""
    from .domain import identities
    settings, store = _store()
    try:
        name = identities.valid_identity(identity)
        token, plaintext = store.run_sync(identities.issue_token, name, admin, label, "operator", None, agent)
    finally:
        store.close()
    typer.echo(f"Token #{token.id} for {name}{' (admin)' if admin else ''} (shown once): {plaintext}")


def main() -> None:
    from .errors import ApiError
    try:
        cli()
    except ApiError as error:
        typer.echo(f"error: {error.message}", err=True)
        raise SystemExit(2)


if __name__ == "__main__":
    main()
