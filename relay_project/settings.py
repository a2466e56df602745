"""Settings for Brass Relay.

No environment means the embedded profile: a SQLite file under ``var/``, a local-memory cache
and Celery on kombu's filesystem transport, so the relay, a worker and beat run with nothing
else installed. ``DATABASE_URL`` switches the database to PostgreSQL and ``REDIS_URL`` switches
the cache and the Celery broker to Redis: that is the production profile.
"""

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(environ.Env().str("RELAY_VAR_DIR", default=str(BASE_DIR / "var")))
# The embedded profile keeps its database and its Celery queue here.
(VAR_DIR / "celery" / "queue").mkdir(parents=True, exist_ok=True)
(VAR_DIR / "celery" / "processed").mkdir(parents=True, exist_ok=True)
(VAR_DIR / "celery" / "control").mkdir(parents=True, exist_ok=True)
(VAR_DIR / "static").mkdir(parents=True, exist_ok=True)

env = environ.Env(
    DJANGO_DEBUG=(bool, False),
    DJANGO_ALLOWED_HOSTS=(list, ["127.0.0.1", "localhost", "[::1]", "testserver"]),
    RELAY_ALLOW_PRIVATE_URLS=(bool, False),
    RELAY_REGISTRY_PUBLIC=(bool, True),
)

# The development key only signs sessions of a local relay; system check relay.W001 warns when
# it is used with DEBUG off.
DEVELOPMENT_SECRET_KEY = "brass-relay-development-key-not-for-production"
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default=DEVELOPMENT_SECRET_KEY)
DEBUG = env("DJANGO_DEBUG")
ALLOWED_HOSTS = env("DJANGO_ALLOWED_HOSTS")
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "django_celery_beat",
    "registry",
    "tasks_app",
    "routing",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "registry.middleware.CatalogLinkMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "relay_project.urls"
ASGI_APPLICATION = "relay_project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
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

# --- Database -------------------------------------------------------------------------------
SQLITE_PATH = VAR_DIR / "relay.sqlite3"
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{SQLITE_PATH}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # IMMEDIATE transactions take the write lock up front, so concurrent writers queue on the
    # busy timeout instead of failing with "database is locked" halfway through.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
    # A2A calls do their database work in asgiref's one database thread, whose connection
    # lives across calls (an open costs more than the call's queries). Closed at this age, or
    # after an error, by Channels' database_sync_to_async around each piece of work.
    DATABASES["default"].setdefault("CONN_MAX_AGE", 600)
    # Tests run on a database file set up as the embedded profile's is (WAL, writers wait on
    # the busy timeout), not on Django's shared-cache memory database, where a write fails at
    # once ("table is locked") while another thread reads.
    DATABASES["default"].setdefault("TEST", {}).setdefault("NAME", str(VAR_DIR / "test.sqlite3"))
else:
    DATABASES["default"].setdefault("CONN_MAX_AGE", 60)
    DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", True)
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        # Parameters travel apart from the statement (psycopg's server-side binding): measured,
        # 2 to 5% less CPU per A2A call than quoting every value into the SQL text.
        options = DATABASES["default"].setdefault("OPTIONS", {})
        options.setdefault(
            "server_side_binding", env.bool("RELAY_DATABASE_SERVER_SIDE_BINDING", default=True)
        )
        # A statement a connection runs for the fifth time is prepared (psycopg's threshold):
        # the server no longer parses and plans an A2A call's two writes each time, 0.98 ms of
        # its time per call before, 0.34 ms after. Django turns it off by default for poolers
        # in transaction mode; PgBouncer 1.21+ keeps them working (max_prepared_statements).
        if env.bool("RELAY_DATABASE_PREPARED_STATEMENTS", default=True):
            options.setdefault("prepare_threshold", 5)
PRODUCTION_DATABASE = "DATABASE_URL" in env.ENVIRON
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: cache, Celery broker ---------------------------------------------
REDIS_URL = env.str("REDIS_URL", default="")
# Every Redis client of the relay (the cache, the Celery broker) is set up alike, by
# relay_project.redis_clients: it connects within RELAY_REDIS_CONNECT_TIMEOUT seconds, so a
# Redis outage fails a call at once (an A2A call gets a 503 protocol error, the APIs a 503);
# it pings a connection left idle longer than RELAY_REDIS_HEALTH_CHECK_SECONDS before using
# it; and it sends a command that failed on a broken connection once more, on a fresh one, so
# pooled connections left stale by a Redis restart are replaced without failing a call.
RELAY_REDIS_CONNECT_TIMEOUT = env.float("RELAY_REDIS_CONNECT_TIMEOUT", default=0.5)
# How long a command may wait for Redis's answer. Cache commands (API keys, rate limits,
# stream slots) never block, so theirs is this. The broker's waits block on purpose (kombu's
# BRPOP 1 s): theirs is this plus 5 s, so a blocking read ends on its own before the socket
# gives up on it.
RELAY_REDIS_SOCKET_TIMEOUT = env.float("RELAY_REDIS_SOCKET_TIMEOUT", default=2.0)
RELAY_REDIS_HEALTH_CHECK_SECONDS = env.int("RELAY_REDIS_HEALTH_CHECK_SECONDS", default=30)
if REDIS_URL:
    from relay_project import redis_clients

    _redis_commands = redis_clients.connection_options(
        connect_timeout=RELAY_REDIS_CONNECT_TIMEOUT,
        socket_timeout=RELAY_REDIS_SOCKET_TIMEOUT,
        health_check_seconds=RELAY_REDIS_HEALTH_CHECK_SECONDS,
    )
    _redis_blocking_reads = {
        **_redis_commands,
        "socket_timeout": redis_clients.BLOCKING_READ_SECONDS + RELAY_REDIS_SOCKET_TIMEOUT,
    }
    # One connection pool per process, whatever number of cache objects Django makes, holding
    # one connection: the cache's commands are short, and the database thread that sends
    # them uses one at a time.
    CACHES = {
        "default": {
            "BACKEND": "relay_project.redis_cache.SharedPoolRedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {
                **_redis_commands,
                "pool_class": "redis.BlockingConnectionPool",
                "max_connections": 1,
                "timeout": RELAY_REDIS_CONNECT_TIMEOUT + RELAY_REDIS_SOCKET_TIMEOUT,
            },
        }
    }
    CELERY_BROKER_URL = REDIS_URL
    # kombu takes no Retry object; retry_on_timeout gives its connections one retry on
    # ConnectionError and TimeoutError, as command_retry does (without the backoff).
    CELERY_BROKER_TRANSPORT_OPTIONS = {**_redis_blocking_reads, "retry_on_timeout": True}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    CELERY_BROKER_URL = "filesystem://"
    _celery_queue_dir = VAR_DIR / "celery" / "queue"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_celery_queue_dir),
        "data_folder_out": str(_celery_queue_dir),
        "processed_folder": str(VAR_DIR / "celery" / "processed"),
        "control_folder": str(VAR_DIR / "celery" / "control"),
        "store_processed": False,
    }

CELERY_TASK_IGNORE_RESULT = True
# Jobs outside the apps' tasks.py modules (which autodiscovery finds).
CELERY_IMPORTS = ["tasks_app.push_delivery"]
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_TIMEZONE = "UTC"

# --- Auth, i18n, static ---------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "admin:login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
# One date format on every page, the admin's included (relay_project/formats).
FORMAT_MODULE_PATH = ["relay_project.formats"]

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "templates" / "static"]
WHITENOISE_USE_FINDERS = True

# --- REST framework -------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "registry.auth.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Every view names its own permission; this default refuses anything that forgets to.
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["relay_project.parsers.BoundedJSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "registry.api.errors.exception_handler",
    # Calls per minute per API key (RELAY_RATE_LIMIT_PER_KEY), shared with the A2A endpoints.
    "DEFAULT_THROTTLE_CLASSES": ["registry.api.throttles.ApiKeyRateThrottle"],
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Brass Relay API",
    "DESCRIPTION": "Registry of A2A agents: register by URL, discover by skill, tag and "
    "extension; teams; the task API. Reads of the registry are public unless "
    "RELAY_REGISTRY_PUBLIC is off; writes and calls need an API key: press Authorize and give "
    "it (`manage.py create_api_key NAME` prints one).",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "COMPONENT_SPLIT_REQUEST": True,
    # The docs page's assets come from the installed sidecar package, not a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # The key given to Authorize survives a reload of the docs page.
    "SWAGGER_UI_SETTINGS": {"persistAuthorization": True},
}

# --- Relay ----------------------------------------------------------------------------------
# Off by default: the relay refuses to fetch loopback, private, link-local and metadata
# addresses. Turn on for local development and tests where agents run on 127.0.0.1.
RELAY_ALLOW_PRIVATE_URLS = env("RELAY_ALLOW_PRIVATE_URLS")
# Registry reads (API and web pages) are public unless this is off.
RELAY_REGISTRY_PUBLIC = env("RELAY_REGISTRY_PUBLIC")
RELAY_CARD_MAX_BYTES = env.int("RELAY_CARD_MAX_BYTES", default=1024 * 1024)
# Search by meaning (registry.semantic): a sentence-embedding model run in the process. Off,
# skill search and agent selection use words only and say so.
RELAY_EMBEDDINGS = env.bool("RELAY_EMBEDDINGS", default=True)
# The callable behind POST /a2a/select and skill-named sends: (*, request) -> list of
# registry.selection.Selection, best first (see registry.selection).
RELAY_AGENT_SELECTOR = env("RELAY_AGENT_SELECTOR", default="registry.selection.rank_by_meaning")
# Seconds between runs of the job that fills in missing skill embeddings.
RELAY_EMBEDDING_REINDEX_SECONDS = env.int("RELAY_EMBEDDING_REINDEX_SECONDS", default=3600)
# Seconds a client may take to send a request's line and headers before the production server
# (uvicorn with relay_project.http_protocol.HeaderTimeoutProtocol) closes its connection: a
# bound on slowloris clients, which otherwise hold a connection each for as long as they like.
RELAY_HEADER_TIMEOUT_SECONDS = env.float("RELAY_HEADER_TIMEOUT_SECONDS", default=10.0)
# Seconds each connect and each read of an outbound fetch (cards, key sets, catalogs, peer
# registries, webhooks, health probes) may take.
RELAY_FETCH_TIMEOUT = env.float("RELAY_FETCH_TIMEOUT", default=10.0)
# Seconds a whole outbound fetch may take, redirects and body included, so a server trickling
# bytes (each read quick) cannot hold a request for longer.
RELAY_FETCH_DEADLINE = env.float("RELAY_FETCH_DEADLINE", default=30.0)
RELAY_MAX_REDIRECTS = env.int("RELAY_MAX_REDIRECTS", default=3)
# How long a blocking call to an upstream agent may take before the task fails.
RELAY_UPSTREAM_TIMEOUT = env.float("RELAY_UPSTREAM_TIMEOUT", default=60.0)
# How long a relay process may keep using what it read about an agent (its endpoint and
# extensions) after another process changed it; changes made in the process itself apply at
# once. 0 turns the cache off.
RELAY_TARGET_CACHE_SECONDS = env.float("RELAY_TARGET_CACHE_SECONDS", default=5.0)
# How long an API key lookup is kept in Django's cache. Revoking a key clears it at once in
# the process that revoked it and, with Redis, in every process; with the local-memory cache
# of the embedded profile, other processes see the revocation within this time. Expiry is
# checked on every call. 0 turns the cache off.
RELAY_API_KEY_CACHE_SECONDS = env.float("RELAY_API_KEY_CACHE_SECONDS", default=30.0)
# Key for upstream credentials at rest (a Fernet key). Without it, one is derived from
# SECRET_KEY, which is fine for the embedded profile; system check relay.W002 says so.
RELAY_ENCRYPTION_KEY = env.str("RELAY_ENCRYPTION_KEY", default="")
# Where the relay's own A2A endpoint (/a2a/relay/) forwards unless the admin chose otherwise:
# "agent:ID" or "team:ID".
RELAY_DEFAULT_TARGET = env.str("RELAY_DEFAULT_TARGET", default="")
# The public base URL of this relay, used in the cards it serves. Empty: taken from the request.
RELAY_PUBLIC_URL = env.str("RELAY_PUBLIC_URL", default="")

# --- Card signatures, the AI Catalog and peer relays ----------------------------------------
# The relay signs the cards it serves with this private key (PEM text, or the path of a PEM
# file; EC, RSA or Ed25519) and publishes its public half at /.well-known/jwks.json. Empty:
# cards are served unsigned.
RELAY_CARD_SIGNING_KEY = env.str("RELAY_CARD_SIGNING_KEY", default="")
# How long a fetched key set (the jku of a signed card) is trusted before it is fetched again.
RELAY_JWKS_CACHE_SECONDS = env.float("RELAY_JWKS_CACHE_SECONDS", default=300.0)
RELAY_JWKS_MAX_BYTES = env.int("RELAY_JWKS_MAX_BYTES", default=64 * 1024)

# --- Bearer tokens of identity providers ------------------------------------------------------
# OAuth2 / OpenID Connect issuers whose signed JWTs are accepted beside API keys: a JSON list of
# {"issuer", "jwksUrl" or "discovery", "audience", "algorithms", "leeway", "subjectClaim",
# "scopesClaim", "callScope", "readScope", "registerScope", "adminScope", "tokenUrl",
# "exchangeUrl", "introspectionUrl", "clientId", "clientSecret"} (see the identity guide).
# Issuers can also be set in the admin (Token issuers).
RELAY_JWT_ISSUERS = env.str("RELAY_JWT_ISSUERS", default="")
# How long an introspection endpoint's answer about an opaque token (RFC 7662) is kept per
# process (never past the token's exp): a token revoked at its issuer is refused after this.
RELAY_INTROSPECTION_CACHE_SECONDS = env.float("RELAY_INTROSPECTION_CACHE_SECONDS", default=30.0)
# A token signed with a key id the cached key set lacks makes the relay fetch its issuer's key
# set again (rotation), at most once per this many seconds per issuer; an issuer whose keys
# could not be had is asked again after this long too.
RELAY_JWT_REFRESH_SECONDS = env.float("RELAY_JWT_REFRESH_SECONDS", default=10.0)
# The relay's client at the token-exchange endpoints (RFC 8693) of agents in exchange mode,
# sent as HTTP Basic; empty id: the relay sends no client authentication.
RELAY_TOKEN_EXCHANGE_CLIENT_ID = env.str("RELAY_TOKEN_EXCHANGE_CLIENT_ID", default="")
RELAY_TOKEN_EXCHANGE_CLIENT_SECRET = env.str("RELAY_TOKEN_EXCHANGE_CLIENT_SECRET", default="")
# The domain in the urn:air identifiers of /.well-known/ai-catalog.json. Empty: the host of
# RELAY_PUBLIC_URL, else of the request.
RELAY_CATALOG_PUBLISHER = env.str("RELAY_CATALOG_PUBLISHER", default="")
# What an imported catalog (or a peer's registry page) may hold.
RELAY_CATALOG_MAX_BYTES = env.int("RELAY_CATALOG_MAX_BYTES", default=2 * 1024 * 1024)
RELAY_CATALOG_MAX_ENTRIES = env.int("RELAY_CATALOG_MAX_ENTRIES", default=500)
# How often the relay mirrors the registries of the peer relays it follows.
RELAY_PEER_SYNC_SECONDS = env.int("RELAY_PEER_SYNC_SECONDS", default=300)

# --- Execution: who drives each exchange with an agent, and how long agents may be silent ---
# Every task the relay is working on with an agent is owned by one relay process, which holds
# a lease in the database and renews it every third of this many seconds. When a process
# dies, another one takes its tasks over once the lease has run out: it resumes the exchange
# (SubscribeToTask where the agent streams, GetTask polls otherwise) until the task ends.
RELAY_EXCHANGE_LEASE_SECONDS = env.float("RELAY_EXCHANGE_LEASE_SECONDS", default=10.0)
# How long a process keeps retrying a task's writes while the database is unavailable (with
# backoff, and never past the task's expiry) before it gives the task up for takeover: once the
# database is back, a takeover (this process's or another's) asks the agent where it stands.
RELAY_DATABASE_OUTAGE_SECONDS = env.float("RELAY_DATABASE_OUTAGE_SECONDS", default=300.0)
# An agent stream that opened (HTTP 200, text/event-stream) but sent no event within this many
# seconds ends its task failed.
RELAY_STREAM_FIRST_EVENT_SECONDS = env.float("RELAY_STREAM_FIRST_EVENT_SECONDS", default=60.0)
# The longest silence between two events of an agent's stream (each agent may set its own).
# Past it the relay asks the agent for the task: an agent that answers is followed by GetTask
# polls from then on; one that does not ends the task failed. Agents may think for minutes
# between two words, hence ten minutes.
RELAY_STREAM_IDLE_SECONDS = env.float("RELAY_STREAM_IDLE_SECONDS", default=600.0)
# How often a relay process compares the open streams it serves with the events stored for
# them. Wake-ups normally arrive at once (in the process, or from PostgreSQL's NOTIFY); this
# bounds how late an event can be when one is lost.
RELAY_STREAM_POLL_SECONDS = env.float("RELAY_STREAM_POLL_SECONDS", default=1.0)
# On PostgreSQL, a task's end and a state that waits on the client commit durably (the commit
# waits until the database has it, and everything before, on disk). Its creation and the
# events in between (artifact chunks, progress updates) commit without waiting, as SQLite's
# WAL mode commits everything: a crash of the database server (not of a relay) can lose the
# last fraction of a second of them for a task still running. True: every write waits (one
# disk flush each, which a stream of small chunks feels).
RELAY_EVENT_SYNCHRONOUS_COMMIT = env.bool("RELAY_EVENT_SYNCHRONOUS_COMMIT", default=False)
# Whether a task's end writes the call's usage record (docs/concepts/usage.md). Off, the
# relay keeps no usage, reports and metrics show none, and cost quotas see nothing spent.
RELAY_USAGE_RECORDS = env.bool("RELAY_USAGE_RECORDS", default=True)
# The longest pause between two GetTask polls of a task the relay follows without a stream
# (polls start at a second and double up to this).
RELAY_FOLLOW_POLL_MAX_SECONDS = env.float("RELAY_FOLLOW_POLL_MAX_SECONDS", default=30.0)

# --- Task expiry and metrics ----------------------------------------------------------------
# A task that has not ended this many seconds after it was created ends failed with a timeout
# error (the tasks_app.expire_tasks job, every minute). 0: tasks never expire.
RELAY_TASK_TTL_SECONDS = env.int("RELAY_TASK_TTL_SECONDS", default=24 * 60 * 60)
# Safe retries (docs/concepts/retries.md). A send that carries an Idempotency-Key opens at most
# one task per API key and key for this many seconds: a repeat gets that task, and the agent
# is called once. After it, the key opens a new task.
RELAY_IDEMPOTENCY_KEY_SECONDS = env.int("RELAY_IDEMPOTENCY_KEY_SECONDS", default=24 * 60 * 60)
# The same for a send without a key, by its messageId, for this many seconds. 0 (the default):
# message ids are not keys, for clients that reuse them (many do, though A2A says they are
# unique); set it when your callers' message ids are unique.
RELAY_MESSAGE_ID_WINDOW_SECONDS = env.int("RELAY_MESSAGE_ID_WINDOW_SECONDS", default=0)
# GET /metrics (Prometheus) without a key or login: on by default in the embedded profile, off
# in the production profile (DATABASE_URL or REDIS_URL set). Off: staff users and admin API
# keys only.
RELAY_METRICS_PUBLIC = env.bool(
    "RELAY_METRICS_PUBLIC", default=not (PRODUCTION_DATABASE or bool(REDIS_URL))
)

# --- Limits on callers ----------------------------------------------------------------------
# What one A2A request may carry. A request over a limit is refused with the protocol's own
# error naming the limit, and nothing is stored. 0 turns a limit off.
# Request bodies of A2A calls, in bytes (HTTP+JSON answers 413, JSON-RPC -32600).
RELAY_MAX_BODY_BYTES = env.int("RELAY_MAX_BODY_BYTES", default=1024 * 1024)
# The same bound for every other request (registry, team and task API, admin): 413 in the API's
# own error body.
DATA_UPLOAD_MAX_MEMORY_SIZE = RELAY_MAX_BODY_BYTES or None
# How deep arrays and objects may nest in a request body.
RELAY_MAX_JSON_DEPTH = env.int("RELAY_MAX_JSON_DEPTH", default=64)
# Parts in one message.
RELAY_MAX_PARTS = env.int("RELAY_MAX_PARTS", default=100)
# Each metadata object of a request (of the request, the message, a part): its size as
# compact JSON, in bytes, and how deep it nests.
RELAY_MAX_METADATA_BYTES = env.int("RELAY_MAX_METADATA_BYTES", default=16 * 1024)
RELAY_MAX_METADATA_DEPTH = env.int("RELAY_MAX_METADATA_DEPTH", default=16)
# The largest historyLength a caller may ask for.
RELAY_MAX_HISTORY_LENGTH = env.int("RELAY_MAX_HISTORY_LENGTH", default=1000)
# The gRPC binding (``manage.py run_grpc``, ``tasks_app.grpc``): the port its server listens on
# (0: no gRPC, and no card lists it), the address it binds, and the URL cards give
# clients (default: http:// and the card's host with RELAY_GRPC_PORT).
RELAY_GRPC_PORT = env.int("RELAY_GRPC_PORT", default=0)
RELAY_GRPC_BIND = env.str("RELAY_GRPC_BIND", default="127.0.0.1")
RELAY_GRPC_PUBLIC_ADDRESS = env.str("RELAY_GRPC_PUBLIC_ADDRESS", default="")
# The gRPC process's own Prometheus metrics (its call counters) over HTTP on this port of
# RELAY_GRPC_BIND at /metrics (0: not served).
RELAY_GRPC_METRICS_PORT = env.int("RELAY_GRPC_METRICS_PORT", default=0)
# Calls per minute (fixed one-minute windows, counted in Django's cache: Redis in the production
# profile, so every process shares the count) per API key, and per agent over all keys. A key's
# own rate_limit_per_minute replaces the per-key default (0 there: no limit for that key).
# Over the limit: HTTP 429 with Retry-After, in the binding's error envelope.
RELAY_RATE_LIMIT_PER_KEY = env.int("RELAY_RATE_LIMIT_PER_KEY", default=600)
RELAY_RATE_LIMIT_PER_AGENT = env.int("RELAY_RATE_LIMIT_PER_AGENT", default=0)
# Streams (SSE) one API key may have open at once; one more is refused with 429. A stream's
# slot is given back when it ends or its client leaves; the count of a key expires this many
# seconds after its last stream opened, so a crashed process cannot hold slots for ever.
RELAY_MAX_STREAMS_PER_KEY = env.int("RELAY_MAX_STREAMS_PER_KEY", default=20)
RELAY_STREAM_SLOT_SECONDS = env.int("RELAY_STREAM_SLOT_SECONDS", default=3600)

# --- Delegation -----------------------------------------------------------------------------
# Every call the relay makes to an agent says who asked, in headers the relay sets itself
# (whatever a client sent under those names is dropped):
#   X-Relay-Caller: key=<key prefix>; name=<key name, percent-encoded>; relay=<RELAY_ID>
#   X-Relay-Chain:  the relays the call went through, oldest first, this one last
#   X-Relay-Signature: sha256=<hex HMAC of "caller\nchain" with RELAY_DELEGATION_SECRET>
#                      (only when the secret is set), so agents can check the relay sent them.
# A call arriving with a chain of RELAY_MAX_DELEGATION_DEPTH relays, or one naming this relay
# (a loop), is refused.
# This relay's name in chains; empty: "relay-" and 12 hex digits derived from SECRET_KEY.
RELAY_ID = env.str("RELAY_ID", default="")
RELAY_MAX_DELEGATION_DEPTH = env.int("RELAY_MAX_DELEGATION_DEPTH", default=5)
RELAY_DELEGATION_SECRET = env.str("RELAY_DELEGATION_SECRET", default="")

# --- Health -----------------------------------------------------------------------------------
# Probes run as the Celery job routing.health_sweep, which beat starts every
# RELAY_HEALTH_SWEEP_SECONDS; each run probes the agents whose own interval has passed. The
# schedules are django-celery-beat rows, created with these values at migrate and editable in
# the admin afterwards. With the defaults a stopped agent is unhealthy within about a minute.
RELAY_HEALTH_SWEEP_SECONDS = env.int("RELAY_HEALTH_SWEEP_SECONDS", default=5)
RELAY_HEALTH_INTERVAL_SECONDS = env.int("RELAY_HEALTH_INTERVAL_SECONDS", default=15)
RELAY_HEALTH_TIMEOUT_SECONDS = env.float("RELAY_HEALTH_TIMEOUT_SECONDS", default=5.0)
RELAY_HEALTH_CONCURRENCY = env.int("RELAY_HEALTH_CONCURRENCY", default=50)
RELAY_HEALTH_UNHEALTHY_AFTER = env.int("RELAY_HEALTH_UNHEALTHY_AFTER", default=3)
RELAY_HEALTH_HEALTHY_AFTER = env.int("RELAY_HEALTH_HEALTHY_AFTER", default=2)
RELAY_HEALTH_RETENTION_DAYS = env.int("RELAY_HEALTH_RETENTION_DAYS", default=7)
RELAY_HEALTH_READINESS_TEXT = env.str("RELAY_HEALTH_READINESS_TEXT", default="ping")
# The circuit breaker on real calls: open after this many failures in a row, let one call
# through after the cool-down.
RELAY_BREAKER_FAILURES = env.int("RELAY_BREAKER_FAILURES", default=5)
RELAY_BREAKER_COOLDOWN_SECONDS = env.float("RELAY_BREAKER_COOLDOWN_SECONDS", default=30.0)
# Every agent's card is fetched again this often (the job registry.refresh_all_cards).
RELAY_CARD_SYNC_SECONDS = env.int("RELAY_CARD_SYNC_SECONDS", default=3600)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("RELAY_LOG_LEVEL", default="INFO")},
    "loggers": {"httpx": {"level": "WARNING"}, "httpcore": {"level": "WARNING"}},
}
