"""The browser onboarding page: a plain HTML form that registers with an invite code, no JavaScript.

Its POST is refused (403) from another origin (CSRF), is rate-limited with /api/auth/register (the
Gate's "register" class) and every page carries the security headers of web/headers.py."""
from __future__ import annotations

from html import escape

from quart import Blueprint, request

from ..context import coord
from ..domain import identities
from ..errors import ApiError
from .headers import origin_of, page_headers, same_origin

bp = Blueprint("onboard", __name__)

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem;color:#1f2933}
label{display:block;margin-top:1rem;font-weight:600}input{width:100%;padding:.5rem;font-size:1rem}
button{margin-top:1.5rem;padding:.6rem 1.2rem;font-size:1rem}.error{color:#b42318;font-weight:600}
code{display:block;padding:1rem;background:#f3f4f6;word-break:break-all;font-size:1.05rem}
"""


def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{escape(title)}</title>"
            f"<meta name=viewport content='width=device-width,initial-scale=1'><style>{_STYLE}</style></head>"
            f"<body><h1>{escape(title)}</h1>{body}</body></html>")


def _form(values: dict, error: str | None = None) -> str:
    def field(name: str, label: str, required: bool = False) -> str:
        return (f"<label for={name}>{label}</label><input id={name} name={name} "
                f"value=\"{escape(values.get(name) or '')}\"{' required' if required else ''}>")
    message = f"<p class=error role=alert>{escape(error)}</p>" if error else ""
    return _page("Join coord", message + "<p>Choose the identity you will use. Lowercase letters, digits, "
                 "'-' and '_', starting with a letter.</p><form method=post action=/onboard>"
                 + field("code", "Invite code", True) + field("identity", "Identity", True)
                 + field("displayName", "Display name") + field("label", "Token label")
                 + "<button type=submit>Register</button></form>")


def _html(content: str, status: int = 200):
    return content, status, page_headers(form_action="'self'")


def _own_origins() -> set[str]:
    """This server's origin as clients reach it: the configured base URL, and the request's own host."""
    return {origin_of(coord().settings.base_url), f"{request.scheme}://{request.host}".lower()}


@bp.get("/onboard")
async def onboard_form():
    return _html(_form({"code": request.args.get("code", "")}))


@bp.post("/onboard")
async def onboard_submit():
    if not same_origin(request.headers.get("Origin"), request.headers.get("Sec-Fetch-Site"), _own_origins()):
        return _html(_form({}, "This form can only be sent from this server's own page"), 403)
    form = await request.form
    values = {k: (form.get(k) or "").strip() for k in ("code", "identity", "displayName", "label")}
    try:
        c = coord()
        result = await c.store.write(identities.register, values["code"], values["identity"], values["label"],
                                     values["displayName"], c.env_identities)
    except ApiError as error:
        return _html(_form(values, error.message), error.status)
    body = (f"<p>You are registered as <strong>{escape(result['identity'])}</strong>"
            f"{' (admin)' if result['isAdmin'] else ''}.</p><p>Your token:</p>"
            f"<code id=token>{escape(result['token'])}</code><p>{escape(result['message'])}</p>")
    return _html(_page("Welcome to coord", body))
