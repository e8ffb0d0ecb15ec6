"""`create_app(config, ...)`: the Falcon app, with its dependencies passed in."""

from __future__ import annotations

from dataclasses import dataclass, field

import falcon

from api import errors, media
from api.auth import Authenticator, FailedCredentials, PeopleCredentials
from api.middleware import DatabaseConnection, Guard, RequestContext
from api.prometheus import Metrics
from api.resources import (
    agents_strip,
    dispatch,
    events,
    health,
    initiatives,
    metrics,
    openapi,
    ops,
    router_dispatch,
    router_evidence,
    router_policy,
    slots,
    tickets,
    wallet,
    writing,
)
from api.web import pages, policy_views, router_right
from domain.board import Board, StageListener
from domain.clock import Clock, system_clock
from domain.config import Config
from domain.dispatch.forge import ForgeWrites
from domain.dispatch.jobs import Dispatch
from domain.health import heartbeat_age
from domain.ops.agents import OpsAgents
from domain.outage import DatabaseOutage
from domain.router import policy_versions
from domain.router.routing import Router
from domain.services import build_services
from domain.writing import WritingAgent
from machines import writing_ticket
from storage import db as storage_db
from storage import migrations

# One entry per area; each module's routes(services) returns (path, resource) pairs.
ROUTE_MODULES = (
    health,
    openapi,
    tickets,
    initiatives,
    slots,
    wallet,
    agents_strip,
    writing,
    ops,
    events,
    router_evidence,
    router_policy,
    router_dispatch,
    dispatch,
    pages,
    router_right,
    policy_views,
    metrics,
)


@dataclass
class Services:
    """What resources are built from: configuration, the clock, and the units of work."""

    config: Config
    clock: Clock
    board: Board
    router: Router
    routes: list[tuple[str, object]] = field(default_factory=list)
    writing: WritingAgent | None = None
    ops: OpsAgents | None = None
    metrics: Metrics | None = None
    dispatch: Dispatch | None = None
    forge_writes: ForgeWrites | None = None
    outage: DatabaseOutage = field(default_factory=DatabaseOutage)


def create_app(
    config: Config,
    *,
    clock: Clock = system_clock,
    database=None,
    migrate: bool = True,
    failures: FailedCredentials | None = None,
    people: PeopleCredentials | None = None,
    stage_listeners: tuple[StageListener, ...] = (),
    outage: DatabaseOutage | None = None,
) -> falcon.App:
    """Build the app. `database` defaults to the one `config.database_url` names; its schema is migrated.

    `stage_listeners` hear every stage change inside its transaction (the router adds its own). `outage` is what
    this process knows of a database outage (a fresh one by default), which /healthz and the board read.
    With `migrate`, a database without a router policy gets its first one (`policy_versions.seed`).
    The config must carry its secrets already (see `Config.with_generated_credentials`): an app without a
    CI secret or basic credentials refuses those endpoints rather than running open.
    """
    if database is None:
        database = storage_db.open_database(config.database_url, max_connections=config.threads + 4)
    storage_db.bind(database)
    if migrate:
        migrations.migrate()
        policy_versions.seed(config, clock)
    writing_ticket.transitions()  # derived from the machine now, not on the first notify

    # One board with its listeners, and the services on it, as the jobs process builds them (`build_services`).
    domain = build_services(config, clock, stage_listeners=stage_listeners, outage=outage)
    services = Services(
        config=config,
        clock=clock,
        board=domain.board,
        router=domain.router,
        writing=domain.writing,
        ops=domain.ops,
        dispatch=domain.dispatch,
        forge_writes=domain.forge_writes,
        outage=domain.outage,
    )
    services.metrics = Metrics(clock, heartbeat_age=heartbeat_age)
    authenticator = Authenticator(config, failures or FailedCredentials(), people)
    app = falcon.App(
        middleware=[
            RequestContext(observers=[services.metrics.requests]),
            Guard(authenticator, config.max_body_bytes),
            DatabaseConnection(services.outage),
        ],
    )
    app.req_options.strip_url_path_trailing_slash = True
    app.req_options.auto_parse_qs_csv = False
    app.resp_options.secure_cookies_by_default = True
    media.register(app)
    errors.register(app, services.outage)

    for module in ROUTE_MODULES:
        for path, resource in module.routes(services):
            app.add_route(path, resource)
            services.routes.append((path, resource))
    return app
