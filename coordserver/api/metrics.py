"""GET /api/metrics (Prometheus text), and the request counting of every route served through Quart.

The ASGI hot paths (hotpaths.py) count their own requests with the same `observe_request`.
"""
from __future__ import annotations

import hmac
from time import perf_counter

from quart import Blueprint, Quart, Response, current_app, g, request
from werkzeug.exceptions import MethodNotAllowed

from ..auth import parse_bearer
from ..context import coord
from ..errors import NotFound, Unauthorized
from ..metrics import CONTENT_TYPE, OTHER_ROUTE, process_metrics
from .meta import route_template
from .common import accepts

bp = Blueprint("metrics", __name__, url_prefix="/api")


@bp.get("/metrics")
@accepts(media="text/plain")
async def scrape():
    """Prometheus text exposition of this deployment's metrics."""
    c = coord()
    if not c.settings.metrics_enabled:
        raise NotFound("Not found")
    secret = c.settings.metrics_token
    if secret is not None:
        given = parse_bearer(request.headers.get("Authorization", "")) or ""
        if not hmac.compare_digest(given.encode(), secret.encode()):
            raise Unauthorized("Metrics token required (Authorization: Bearer <COORD_METRICS_TOKEN>)")
    body = await c.services.metrics.scrape()
    return Response(body, status=200, headers={"Content-Type": CONTENT_TYPE})


def instrument(app: Quart) -> None:
    """Count and time every request Quart serves. Call before other before_request hooks, so the
    timer starts first and the count (an after_request hook, run last) sees the final status."""
    metrics = process_metrics()

    @app.before_request
    async def start_timer() -> None:
        g.metrics_started = perf_counter()

    @app.after_request
    async def count_request(response):
        started = g.get("metrics_started")
        metrics.observe_request(request.method, _route(), response.status_code,
                                perf_counter() - started if started is not None else None)
        return response


def _route() -> str:
    """The route template of this request; for a 405, of the route its path matched."""
    rule = request.url_rule
    if rule is not None:
        return route_template(rule.rule)
    error = request.routing_exception
    if isinstance(error, MethodNotAllowed) and error.valid_methods:
        try:
            matched, _args = current_app.url_map.bind("coord").match(
                request.path, method=sorted(error.valid_methods)[0], return_rule=True)
            return route_template(matched.rule)
        except Exception:
            return OTHER_ROUTE
    return OTHER_ROUTE
