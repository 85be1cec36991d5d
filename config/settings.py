"""Sharewise settings, read from environment variables (django-environ).

Every setting has a default that lets ``manage.py runserver`` on 127.0.0.1 work with no
configuration: a SQLite file ``db.sqlite3`` beside ``manage.py``, no broker (Celery tasks run
in-process), DEBUG off. Production (docker-compose) sets ``DATABASE_URL`` (PostgreSQL),
``REDIS_URL``, ``CACHE_URL``, ``SECRET_KEY`` and ``ALLOWED_HOSTS``; see ``.env.example``.

Numbers, booleans, choices and rates are read by ``config/env_values.py`` (Python's own number
grammar, each setting's bounds); a refused value raises ``ImproperlyConfigured`` naming it, which
the entry points print as one line, exit status 2 (``config/startup.py``).
"""

import sys
import warnings
from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from agent.messages import MAX_REPORT_LATENCY_S as _MAX_REPORT_LATENCY_S
from config import env_values
from scheduling.core.policies import POLICY_NAMES as _POLICY_NAMES
from scheduling.core.types import PLACEMENTS as _PLACEMENTS
from scheduling.core.types import RECLAIM_MODES as _RECLAIM_MODES
from scheduling.core.types import TIRESIAS_DEMOTED as _TIRESIAS_DEMOTED
from scheduling.core.types import TIRESIAS_SERVICE_UNITS as _TIRESIAS_SERVICE_UNITS

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
# A local .env (never committed) is read when present; real environment variables win.
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env_values.boolean("DEBUG", default=False)
# "production" (the Procfile's and docker-compose's web, worker and beat set it) refuses to start
# with the development SECRET_KEY or with DEBUG on; "development" (runserver, the demo, the tests)
# allows both.
SHAREWISE_ENV = env_values.choice("SHAREWISE_ENV", "development", ("development", "production"))
# The default key is public, good for a laptop only.
DEVELOPMENT_SECRET_KEY = "django-insecure-sharewise-local-development-only-change-me"
SECRET_KEY = env("SECRET_KEY", default=DEVELOPMENT_SECRET_KEY)
# Django's own deployment check asks for 50 characters or more.
MIN_SECRET_KEY_LENGTH = 50
if SHAREWISE_ENV == "production":
    if SECRET_KEY == DEVELOPMENT_SECRET_KEY or SECRET_KEY.startswith("django-insecure"):
        raise ImproperlyConfigured(
            "SHAREWISE_ENV=production needs a SECRET_KEY of its own (the development default is public); "
            'generate one with: python -c "import secrets; print(secrets.token_urlsafe(50))"'
        )
    if len(SECRET_KEY) < MIN_SECRET_KEY_LENGTH:
        raise ImproperlyConfigured(
            f"SECRET_KEY must be at least {MIN_SECRET_KEY_LENGTH} characters in production; "
            'generate one with: python -c "import secrets; print(secrets.token_urlsafe(50))"'
        )
    if DEBUG:
        raise ImproperlyConfigured(
            "DEBUG must be off with SHAREWISE_ENV=production (it shows code and settings)"
        )
# Session and CSRF cookies sent over HTTPS only (Django's `check --deploy` W012/W016): on in
# production, off in development; SHAREWISE_SECURE_COOKIES=0 for a production deployment reached
# over plain HTTP (no TLS in front), where a browser would never send them back and logins fail.
SHAREWISE_SECURE_COOKIES = env_values.boolean(
    "SHAREWISE_SECURE_COOKIES", default=SHAREWISE_ENV == "production"
)
SESSION_COOKIE_SECURE = SHAREWISE_SECURE_COOKIES
CSRF_COOKIE_SECURE = SHAREWISE_SECURE_COOKIES
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
# a failed check on a dashboard JSON path answers JSON, Django's page elsewhere
CSRF_FAILURE_VIEW = "frontend.errors.csrf_failure"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    # Swagger UI and ReDoc served from our own static files, so /api/docs/ works offline (no CDN)
    "drf_spectacular_sidecar",
    # login throttling of the dashboard and the admin (failed attempts per address, in the database)
    "axes",
    "cluster",
    "scheduling",
    "frontend",
    # the live demo (`manage.py demo`): a driver of the service, like Celery and run_scheduler
    "demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # last, as django-axes asks: turns a locked-out login into its 429 answer
    "axes.middleware.AxesMiddleware",
]

# django-axes first: it refuses a locked-out address before the password is even checked.
AUTHENTICATION_BACKENDS = [
    "cluster.login_throttle.AxesRequestBackend",
    # Django's ModelBackend, a session's user read in one plain statement (a session recorded
    # with django.contrib.auth.backends.ModelBackend, before this one, must log in again)
    "cluster.user_backend.UserBackend",
]
# Django's database sessions, loaded in one plain statement (cluster/session_store.py)
SESSION_ENGINE = "cluster.session_store"
# Dashboard and admin logins: this many failed passwords in a row from one address lock it out...
AXES_FAILURE_LIMIT = env_values.whole("SHAREWISE_LOGIN_FAILURE_LIMIT", 5, minimum=1)
# ...for this many seconds (answered 429 meanwhile); a successful login clears the count.
SHAREWISE_LOGIN_LOCKOUT_S = env_values.seconds("SHAREWISE_LOGIN_LOCKOUT_S", 900.0, above=0)
AXES_COOLOFF_TIME = timedelta(seconds=SHAREWISE_LOGIN_LOCKOUT_S)
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_PARAMETERS = ["ip_address"]
# Behind a reverse proxy, the client's address comes from this header (e.g. HTTP_X_FORWARDED_FOR);
# empty: REMOTE_ADDR. Set it only when a proxy you run sets the header.
SHAREWISE_CLIENT_IP_HEADER = env("SHAREWISE_CLIENT_IP_HEADER", default="")
AXES_CLIENT_IP_CALLABLE = "cluster.login_throttle.client_ip"

ROOT_URLCONF = "config.urls"
LOGIN_URL = "frontend:login"
LOGIN_REDIRECT_URL = "frontend:dashboard"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

#: How a database URL looks (what DATABASE_URL's refusals say).
DATABASE_URL_SHAPES = "postgres://USER:PASSWORD@HOST:5432/NAME or sqlite:///PATH"
_DATABASE_SCHEME = env.str("DATABASE_URL", default="sqlite:").partition(":")[0]
with warnings.catch_warnings():
    # django-environ warns of an unknown scheme with the whole parsed URL, password included;
    # refused just below instead
    warnings.filterwarnings("ignore", message="Engine not recognized")
    try:
        DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
    except ValueError:
        # urllib's port or IPv6 host refusal (postgres://u@h:notaport/db) was a traceback; its
        # message is not echoed: a URL without its @ (postgres://USER:PASSWORD/NAME) reads the
        # password as the port
        raise ImproperlyConfigured(
            f"DATABASE_URL must be a database URL such as {DATABASE_URL_SHAPES}; got one of scheme "
            f"{_DATABASE_SCHEME!r} whose host or port does not parse (HOST:PORT, the port a whole "
            "number from 0 to 65535, an IPv6 host in [brackets])"
        ) from None
#: The databases Sharewise runs on and is tested against (PostgreSQL, and SQLite as the embedded
#: default); django-environ knows more schemes (mysql://, oracle://, ...), whose engines failed at
#: the first query with a long traceback (mysql://: "Error loading MySQLdb module").
SUPPORTED_ENGINES = ("django.db.backends.postgresql", "django.db.backends.sqlite3")
if DATABASES["default"].get("ENGINE") not in SUPPORTED_ENGINES:
    # the URL is not echoed (a password)
    if _DATABASE_SCHEME in environ.Env.DB_SCHEMES:
        # a database django-environ knows and Sharewise does not run on: say so, not "a URL such as"
        raise ImproperlyConfigured(
            f"DATABASE_URL must be a database URL such as {DATABASE_URL_SHAPES}; got one of scheme "
            f"{_DATABASE_SCHEME!r}, a database engine Sharewise does not support (it runs on "
            "PostgreSQL and SQLite only)"
        )
    # a scheme django-environ does not know (its engine none, or the scheme itself): Django would
    # fail later with a traceback
    raise ImproperlyConfigured(
        f"DATABASE_URL must be a database URL such as {DATABASE_URL_SHAPES}; got one of scheme "
        f"{_DATABASE_SCHEME!r}"
    )
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The embedded default runs web, run_scheduler and the agents' long polls as separate
    # processes on one file: WAL lets readers go on beside the writer; IMMEDIATE takes the write
    # lock when a transaction begins, so a writer waits (up to "timeout" s) instead of failing
    # with "database is locked" when its read turns into a write.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": env_values.seconds("SQLITE_TIMEOUT_S", 20.0, minimum=0),
            "init_command": "PRAGMA journal_mode=WAL;",
        }
    )
#: Whether this process is Django's development server (``manage.py runserver``, or ``testserver``
#: that runs it); Django takes the command from ``argv[1]``, as here.
DEV_SERVER = sys.argv[1:2] in (["runserver"], ["testserver"])
# Keep connections open between requests (s); 0 closes after each request. Persistent connections
# pay off where a bounded pool of long-lived workers reuses them: gunicorn's threads, the Celery
# worker, run_scheduler's loop, the demo's pooled server (demo/webserver.py). Django's development
# server starts a thread per request and does not close that thread's connection when it ends: each
# stayed open, idle, until the garbage collector freed it (about 50 idle PostgreSQL connections in
# a trial of runserver + run_scheduler). Django's docs say persistent connections are of no use
# there; so it gets 0 whatever the environment or .env says (the value is still checked).
_conn_max_age = env_values.whole("CONN_MAX_AGE", 60, minimum=0)
DATABASES["default"]["CONN_MAX_AGE"] = 0 if DEV_SERVER else _conn_max_age
# A health check costs a round trip per request; without it, a connection broken by a database
# restart fails one request and is then replaced.
DATABASES["default"]["CONN_HEALTH_CHECKS"] = env_values.boolean("CONN_HEALTH_CHECKS", default=False)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

try:
    CACHES = {"default": env.cache("CACHE_URL", default="locmemcache://sharewise")}
except ImproperlyConfigured as exc:  # django-environ's message names neither the setting nor the value
    raise ImproperlyConfigured(
        "CACHE_URL must be a cache URL such as redis://HOST:6379/1 or locmemcache://NAME; "
        f"got one of scheme {env.str('CACHE_URL').partition(':')[0]!r} ({exc})"
    ) from None
# A shared cache (Redis) that stops answering fails a request within this many seconds (the API
# answers 503) instead of holding a web thread; set `?socket_timeout=` on CACHE_URL to override.
CACHE_SOCKET_TIMEOUT_S = env_values.seconds("CACHE_SOCKET_TIMEOUT_S", 2.0, above=0)
if CACHES["default"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache":
    # the same backend with one Redis client per pool, not one per call (config/redis_cache.py)
    CACHES["default"]["BACKEND"] = "config.redis_cache.ReusedClientRedisCache"
if str(CACHES["default"]["BACKEND"]).endswith("RedisCache"):
    _cache_options = CACHES["default"].setdefault("OPTIONS", {})
    _cache_options.setdefault("socket_connect_timeout", CACHE_SOCKET_TIMEOUT_S)
    _cache_options.setdefault("socket_timeout", CACHE_SOCKET_TIMEOUT_S)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    # Plotly.js from the pinned plotly package, so the dashboard never loads a script from a CDN.
    "frontend.staticfiles.PlotlyFinder",
]
STATIC_ROOT = Path(env("STATIC_ROOT", default=str(BASE_DIR / "var" / "static")))
# WhiteNoise serves collectstatic's output from here; an absent folder only earns a warning per request.
try:
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)
except OSError as exc:
    raise ImproperlyConfigured(
        f"STATIC_ROOT must be a folder this process can create; got {str(STATIC_ROOT)!r} ({exc.strerror})"
    ) from None

# Request bodies larger than this (bytes) are refused with 413 before parsing; a job is < 2 KB.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_values.whole("DATA_UPLOAD_MAX_MEMORY_SIZE", 64 * 1024, minimum=1)
DATA_UPLOAD_MAX_NUMBER_FIELDS = 200

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "cluster.authentication.TenantTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["cluster.parsers.StrictJSONParser"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "cluster.parsers.StrictContentNegotiation",
    "DEFAULT_RENDERER_CLASSES": ["cluster.renderers.SafeJSONRenderer"],
    "DEFAULT_PAGINATION_CLASS": "cluster.pagination.JobPagination",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "cluster.exceptions.api_exception_handler",
    "DEFAULT_THROTTLE_RATES": {
        # Job submissions per tenant, N/s, N/m, N/h or N/d (DRF's rule, checked here rather than
        # at the first submission); the benchmark raises it (e.g. "100000/s").
        "job_submit": env_values.rate("SHAREWISE_SUBMIT_RATE", "600/min"),
    },
}

# /api/schema/ and /api/docs/ need a login (API token or dashboard session) unless this is on.
SHAREWISE_PUBLIC_API_DOCS = env_values.boolean("SHAREWISE_PUBLIC_API_DOCS", default=False)
# /metrics answers a scraper that sends `Authorization: Bearer <this token>`...
SHAREWISE_METRICS_TOKEN = env("SHAREWISE_METRICS_TOKEN", default="")
# ...or that connects from one of these addresses or networks (CIDR), not through a proxy (a request
# carrying X-Forwarded-For or Forwarded needs the token). Default: this machine only.
SHAREWISE_METRICS_ALLOW = env_values.networks("SHAREWISE_METRICS_ALLOW", ["127.0.0.1", "::1"])

SPECTACULAR_SETTINGS = {
    "TITLE": "Sharewise API",
    "DESCRIPTION": "Submit and follow deep-learning training jobs on a shared multi-tenant GPU cluster.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Separate request/response components, so read-only fields never appear in request bodies.
    "COMPONENT_SPLIT_REQUEST": True,
    # Every operation documents the error statuses it may answer (cluster/schema.py).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "cluster.schema.document_errors",
    ],
    "ENUM_NAME_OVERRIDES": {
        "JobStatusEnum": "cluster.models.Job.Status",
        "NodeStatusEnum": "cluster.models.Node.Status",
        "SharingEnum": "cluster.models.Sharing",
        "AgentErrorCodeEnum": "cluster.agent_serializers.AGENT_ERROR_CODES",
    },
}

# --- Celery (read by config/celery.py with namespace="CELERY") ---
REDIS_URL = env("REDIS_URL", default="")
# Redis carries round triggers and per-node placement queues; empty means no broker.
CELERY_BROKER_URL = REDIS_URL or "memory://"
# How placements reach the agents (docs/AGENT.md §1, §1a): "pull" (the database, long-polled by
# the agents; the only way without a broker) or "push" (Celery queues node.<NAME> on the broker).
# Any case; the agents' --transport takes the same two (agent/cli.py TRANSPORTS).
SHAREWISE_AGENT_TRANSPORT = env_values.choice(
    "SHAREWISE_AGENT_TRANSPORT", "push" if REDIS_URL else "pull", ("pull", "push"), fold_case=True
)
# Results are not needed by callers: rounds persist their own outcome in the database.
CELERY_TASK_IGNORE_RESULT = True
# Without a broker (embedded default) tasks run in-process, synchronously.
CELERY_TASK_ALWAYS_EAGER = not REDIS_URL
# Eager tasks re-raise errors so a failing round is seen at once, not swallowed.
CELERY_TASK_EAGER_PROPAGATES = True
# Acknowledge after the task ran, so a worker killed mid-round leaves the message for another.
CELERY_TASK_ACKS_LATE = True
# ...also when the worker process dies (SIGKILL, OOM): a round is safe to redo, it takes a lease.
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# One message at a time per worker process: rounds are long, fairness beats throughput.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# JSON only: never unpickle a payload that came from the broker.
CELERY_ACCEPT_CONTENT = ["json"]
# Send JSON too, so agents and tools in other languages can read the messages.
CELERY_TASK_SERIALIZER = "json"
# Timestamps in UTC, like the database.
CELERY_TIMEZONE = "UTC"
# Rounds are the server's only task: a plain `celery -A config worker` consumes their queue.
CELERY_TASK_DEFAULT_QUEUE = "scheduler"
# Rounds in their own queue, never behind other work (placements go to the node.<name> queues).
CELERY_TASK_ROUTES = {
    "sharewise.run_round": {"queue": "scheduler"},
    "sharewise.check_heartbeats": {"queue": "scheduler"},
    "sharewise.prune_job_events": {"queue": "scheduler"},
}
# Seconds to wait for a broker connection (a send retries a few times): a web process that lost
# Redis fails a send in seconds, logged, rather than hold the request.
CELERY_BROKER_CONNECTION_TIMEOUT = env_values.seconds("CELERY_BROKER_CONNECTION_TIMEOUT_S", 2.0, above=0)
# Redis redelivers a message not acknowledged within this many seconds (a killed worker's round):
# longer than any round, short enough that the lost round is soon redone.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_values.whole("CELERY_VISIBILITY_TIMEOUT_S", 300, minimum=1)
}

# --- Scheduling rounds (scheduling/service/, scheduling/tasks.py) ---
# Policy of every round: a name of the scheduling.core.policies registry.
SHAREWISE_POLICY = env_values.choice("SHAREWISE_POLICY", "sjf-bsbf", _POLICY_NAMES)
# Seconds between periodic rounds (Celery beat's schedule and expiry; `manage.py run_scheduler` by
# default), > 0: beat cannot schedule 0 s, and a job's expected wait counts rounds of this length.
SHAREWISE_ROUND_INTERVAL_S = env_values.seconds("SHAREWISE_ROUND_INTERVAL_S", 10.0, above=0)
# A submission or completion asks for a round this many seconds later; requests meanwhile share it.
SHAREWISE_ROUND_DEBOUNCE_S = env_values.seconds("SHAREWISE_ROUND_DEBOUNCE_S", 2.0, minimum=0)
# A node silent for longer (s) takes no new job: three of the agent's 5 s heartbeats.
SHAREWISE_HEARTBEAT_TIMEOUT_S = env_values.seconds("SHAREWISE_HEARTBEAT_TIMEOUT_S", 15.0, above=0)
# The most (s) of the fleet's report latency that a node's silence may count on top of the timeout
# (docs/AGENT.md §3): a dead node is found within timeout + this (a whole fleet silent at once:
# twice that) however slow the fleet says the service is; a service slower than this marks
# healthy nodes silent again. 0: no allowance. 0 … 3600 (report_latency_s's own bound).
SHAREWISE_SILENCE_ALLOWANCE_MAX_S = env_values.number(
    "SHAREWISE_SILENCE_ALLOWANCE_MAX_S", 60.0, minimum=0.0, maximum=_MAX_REPORT_LATENCY_S, unit="seconds"
)
# Seconds between an agent's heartbeats (the agent's --heartbeat-s): a job missing from two
# heartbeats in a row, placed longer ago than this, was lost by its agent and is requeued.
SHAREWISE_HEARTBEAT_INTERVAL_S = env_values.seconds("SHAREWISE_HEARTBEAT_INTERVAL_S", 5.0, above=0)
# Recorded rounds kept; older ones are deleted as new ones are written (a round's 10,000 wait
# decisions are stored packed, scheduling/round_waits.py: about 100 KB of JSON, 35 KB stored); at
# least 1, the round just written.
SHAREWISE_ROUNDS_KEPT = env_values.whole("SHAREWISE_ROUNDS_KEPT", 5000, minimum=1)
# A round lease whose holder died is free again after this long (s): longer than any round; on
# PostgreSQL the advisory lock frees it at once.
SHAREWISE_ROUND_LEASE_S = env_values.seconds("SHAREWISE_ROUND_LEASE_S", 120.0, above=0)
# Multi-tenancy (docs/FAIRNESS.md): a job pending this long (s) is starving (sjf-bsbf-fair); 48 h.
# This, SHAREWISE_AGING_S and SHAREWISE_BORROW_BOUND_S are > 0, as the core's SchedulerConfig takes them.
SHAREWISE_STARVATION_BOUND_S = env_values.seconds("SHAREWISE_STARVATION_BOUND_S", 172800.0, above=0)
# Aging time constant (s): sjf-bsbf-fair orders pending jobs by P_j / (1 + wait / aging).
SHAREWISE_AGING_S = env_values.seconds("SHAREWISE_AGING_S", 3600.0, above=0)
# How owners get lent GPUs back: preempt (borrowed jobs), bound (short borrowers only) or both.
SHAREWISE_RECLAIM = env_values.choice("SHAREWISE_RECLAIM", "preempt", _RECLAIM_MODES)
# Most remaining exclusive time (s) of a job that borrows GPUs under reclaim bound/both.
SHAREWISE_BORROW_BOUND_S = env_values.seconds("SHAREWISE_BORROW_BOUND_S", 3600.0, above=0)
# sjf-bsbf-fair's switches (docs/FAIRNESS.md §5): quota use by the normalised split of a shared GPU;
# refuse a co-location that takes another tenant below its guarantee while it waits; reclaim jobs
# co-located on an under-guarantee tenant's GPUs; higher priority preempts lower borrowed work.
SHAREWISE_SPLIT_CHARGE = env_values.boolean("SHAREWISE_SPLIT_CHARGE", default=True)
SHAREWISE_COLOCATION_GUARD = env_values.boolean("SHAREWISE_COLOCATION_GUARD", default=True)
SHAREWISE_RECLAIM_COLOCATED = env_values.boolean("SHAREWISE_RECLAIM_COLOCATED", default=True)
SHAREWISE_PRIORITY_PREEMPTION = env_values.boolean("SHAREWISE_PRIORITY_PREEMPTION", default=True)
# Most pending jobs one tenant may have at once; a submission beyond it is 429 (checked at each
# submission: concurrent ones may pass it by a few).
SHAREWISE_MAX_PENDING_PER_TENANT = env_values.whole("SHAREWISE_MAX_PENDING_PER_TENANT", 10_000, minimum=0)
# Seconds a tenant API token's row stays in the shared cache (cluster/token_cache.py); unset: 60
# with a Redis cache, 0 (off) with the process-local default; a change of the token, user,
# membership or tenant deletes it at once.
SHAREWISE_TOKEN_CACHE_S = env_values.number("SHAREWISE_TOKEN_CACHE_S", None, minimum=0, unit="seconds")
# Seconds the cluster's bounds a submission is checked against stay cached (cluster/cluster_facts.py);
# forgotten at once on a node or GPU change; 0 reads them for every submission.
SHAREWISE_CLUSTER_FACTS_CACHE_S = env_values.seconds("SHAREWISE_CLUSTER_FACTS_CACHE_S", 5.0, minimum=0)
# Seconds a web process keeps a model's learned classes for the estimate in a submission's answer
# (scheduling/service/knowledge.py); a class the process learns is forgotten at once, one learned
# in another process is seen within this; 0 reads them for every submission.
SHAREWISE_CLASS_CACHE_S = env_values.seconds("SHAREWISE_CLASS_CACHE_S", 1.0, minimum=0)
# Single job submissions answered by a plain Django view where it answers as DRF's view would
# (cluster/fast_submit.py); false sends every submission through DRF.
SHAREWISE_FAST_SUBMIT = env_values.boolean("SHAREWISE_FAST_SUBMIT", default=True)
# Job events (history) of jobs that ended longer ago than this many days are deleted by the hourly
# task sharewise.prune_job_events; the jobs themselves stay. 0 keeps them forever.
SHAREWISE_JOB_EVENT_RETENTION_DAYS = env_values.number(
    "SHAREWISE_JOB_EVENT_RETENTION_DAYS", 30.0, minimum=0, unit="days"
)
# Closed-loop sharing (docs/LEARNING.md, "In the service"). A job of unknown memory, or a pair
# whose slowdown nobody measured or can predict, runs alone until something is measured: a wrong
# guess costs an out-of-memory crash or a slow pair. True lets them share on the guesses.
SHAREWISE_SHARE_UNKNOWN = env_values.boolean("SHAREWISE_SHARE_UNKNOWN", default=False)
# A co-located job that runs out of GPU memory goes back to the queue this many times (its pair
# is marked incompatible each time) before it fails: bounded, so a job that ran out of memory
# for another reason does not cycle for ever.
SHAREWISE_OOM_RETRIES = env_values.whole("SHAREWISE_OOM_RETRIES", 3, minimum=0)
# Measured-vs-predicted slowdown records kept for the dashboard (one per co-location segment of a
# job); older ones are deleted as new ones come. The learned summaries themselves are never cut.
SHAREWISE_OBSERVATIONS_KEPT = env_values.whole("SHAREWISE_OBSERVATIONS_KEPT", 10000, minimum=1)
# Jobs' output kept per job (characters; older output is dropped, the end kept): cluster.joblogs.
SHAREWISE_JOB_LOG_MAX_CHARS = env_values.whole("SHAREWISE_JOB_LOG_MAX_CHARS", 1_000_000, minimum=1)
# Longest a log read waits for new output (s; GET /api/v1/jobs/{id}/logs/?wait=S, the client's
# `logs --follow`): each waiting reader holds a web worker thread that long.
SHAREWISE_LOG_WAIT_MAX_S = env_values.seconds("SHAREWISE_LOG_WAIT_MAX_S", 20.0, minimum=0)
# Baselines (docs/FIDELITY.md): where FIFO, SJF, SRTF and Tiresias put a gang on idle GPUs:
# spread (one node if possible, else the fewest nodes) or consolidated (the peers' yarn rule).
SHAREWISE_PLACEMENT = env_values.choice("SHAREWISE_PLACEMENT", "spread", _PLACEMENTS)
# Tiresias: queue thresholds (comma-separated; n thresholds, n + 1 queues), in GPU-s (gpu_s) or
# executed seconds (wall_s); the starvation guard and its factor; where a demoted job goes
# (ahead: before the lower queue's pending jobs; back: the peers' queue lists, kept by the worker).
SHAREWISE_TIRESIAS_THRESHOLDS = env_values.numbers("SHAREWISE_TIRESIAS_THRESHOLDS", [3200.0], above=0)
if any(
    b <= a for a, b in zip(SHAREWISE_TIRESIAS_THRESHOLDS, SHAREWISE_TIRESIAS_THRESHOLDS[1:], strict=False)
):
    # the core's TiresiasConfig rule, checked at start rather than at the first round
    raise ImproperlyConfigured(
        "SHAREWISE_TIRESIAS_THRESHOLDS must be increasing; "
        f"got {env.str('SHAREWISE_TIRESIAS_THRESHOLDS', default='')!r}"
    )
SHAREWISE_TIRESIAS_SERVICE = env_values.choice("SHAREWISE_TIRESIAS_SERVICE", "gpu_s", _TIRESIAS_SERVICE_UNITS)
SHAREWISE_TIRESIAS_STARVATION_GUARD = env_values.boolean("SHAREWISE_TIRESIAS_STARVATION_GUARD", default=True)
SHAREWISE_TIRESIAS_STARVATION_FACTOR = env_values.number("SHAREWISE_TIRESIAS_STARVATION_FACTOR", 1.0, above=0)
SHAREWISE_TIRESIAS_DEMOTED = env_values.choice("SHAREWISE_TIRESIAS_DEMOTED", "ahead", _TIRESIAS_DEMOTED)
# A round every interval; a tick no worker started within one interval expires (the next one comes).
CELERY_BEAT_SCHEDULE = {
    "scheduling-round": {
        "task": "sharewise.run_round",
        "schedule": SHAREWISE_ROUND_INTERVAL_S,
        "options": {"expires": SHAREWISE_ROUND_INTERVAL_S},
    },
    # Nodes silent for longer than SHAREWISE_HEARTBEAT_TIMEOUT_S: unhealthy, their jobs requeued.
    "heartbeat-timeout": {
        "task": "sharewise.check_heartbeats",
        "schedule": SHAREWISE_HEARTBEAT_INTERVAL_S,
        "options": {"expires": SHAREWISE_HEARTBEAT_INTERVAL_S},
    },
    # Job events past SHAREWISE_JOB_EVENT_RETENTION_DAYS: deleted in batches, once an hour.
    "prune-job-events": {
        "task": "sharewise.prune_job_events",
        "schedule": 3600.0,
        "options": {"expires": 3600.0},
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {
        "handlers": ["console"],
        # any case (logging itself takes upper case only)
        "level": env_values.choice(
            "LOG_LEVEL", "warning", ("debug", "info", "warning", "error", "critical"), fold_case=True
        ).upper(),
    },
}
