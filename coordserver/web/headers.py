"""Security headers of the HTML pages (/onboard, /api/docs) and the same-origin rule for form posts.

Every page forbids framing (`frame-ancestors 'none'`, `X-Frame-Options: DENY`), MIME sniffing and
referrers (an onboarding URL carries its invite code), and loads nothing from elsewhere: its
Content-Security-Policy allows its own inline style and, for the docs page, its one inline script by
hash plus fetches of this origin (/api/openapi.json).
"""
from __future__ import annotations

import base64
import hashlib
import re
from urllib.parse import urlsplit

_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)
_COMMON = {"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
           "Cache-Control": "no-store"}


def _policy(**directives: str) -> str:
    base = {"default-src": "'none'", "style-src": "'unsafe-inline'", "frame-ancestors": "'none'",
            "base-uri": "'none'", "form-action": "'none'"}
    base.update({name.replace("_", "-"): value for name, value in directives.items()})
    return "; ".join(f"{name} {value}" for name, value in base.items())


def page_headers(**directives: str) -> dict[str, str]:
    """The headers of an HTML page; `directives` widen its policy (form_action="'self'", ...)."""
    return {"Content-Type": "text/html; charset=utf-8", "Content-Security-Policy": _policy(**directives),
            **_COMMON}


def script_hashes(html: str) -> str:
    """The CSP source list allowing exactly the page's inline scripts."""
    return " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(s.encode()).digest()).decode()}'"
                    for s in _SCRIPT.findall(html))


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def same_origin(origin: str | None, fetch_site: str | None, own_origins: set[str]) -> bool:
    """Whether a browser form post comes from one of our own pages. A browser names the page's origin
    (`Origin`, or at least `Sec-Fetch-Site`); a request naming neither is no browser's form post (a
    script, which could call /api/auth/register anyway) and is let through."""
    if origin is not None:
        return origin.lower() in own_origins
    if fetch_site is not None:
        return fetch_site.lower() in ("same-origin", "none")
    return True
