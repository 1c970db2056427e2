"""One settings file driven by the environment.

Defaults suit a laptop: SQLite file, in-memory channel layer, DEBUG on. A deployment sets
``DEBUG=false``, ``SECRET_KEY``, ``ALLOWED_HOSTS``, and optionally ``DATABASE_URL``
(PostgreSQL) and ``REDIS_URL`` (shared channel layer for several daphne workers).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from datetime import timedelta
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from explorer.session.tokens import DEFAULT_COMPACTION_SETTINGS
from sessions_site.env import (
    envbool,
    envint,
    envlist,
    envstr,
    redis_url_db,
    redis_url_with_db,
)
from sessions_site.fingerprint import code_fingerprint

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(envstr("SESSIONS_VAR_DIR", str(BASE_DIR / "var")))

# ``manage.py serve`` without DEBUG in the environment runs the finished product on this
# machine (SESSIONS_LOCAL_SERVE): no debug pages, the per-install key file, plain HTTP on the
# address it binds. ``runserver`` (or DEBUG=true) is for development.
LOCAL_SERVE = envbool("SESSIONS_LOCAL_SERVE", False)
DEBUG = envbool("DEBUG", not LOCAL_SERVE)

SECRET_KEY = envstr("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG and not LOCAL_SERVE:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is false")
    # Development and local serving only: a per-install key kept next to the database so sessions survive
    # restarts without anyone committing a key.
    _key_file = VAR_DIR / "secret_key"
    try:
        SECRET_KEY = _key_file.read_text().strip()
    except OSError:
        SECRET_KEY = ""
    if not SECRET_KEY:
        SECRET_KEY = secrets.token_urlsafe(50)
        try:
            VAR_DIR.mkdir(parents=True, exist_ok=True)
            _key_file.write_text(SECRET_KEY)
            os.chmod(_key_file, 0o600)
        except OSError:
            pass
elif (
    not DEBUG
    and not LOCAL_SERVE
    and (
        len(SECRET_KEY) < 50
        or len(set(SECRET_KEY)) < 5
        or SECRET_KEY.startswith("django-insecure-")
    )
):
    # The rule of `manage.py check --deploy` (security.W009), enforced at start-up.
    raise ImproperlyConfigured(
        "SECRET_KEY must be at least 50 characters long, with at least 5 different "
        "characters, and not start with 'django-insecure-' (e.g. python -c 'import "
        "secrets; print(secrets.token_urlsafe(50))')"
    )

ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "channels",
    "axes",
    "explorer",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "explorer.middleware.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "explorer.middleware.ReadMemoMiddleware",
    "explorer.middleware.DiskFullMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "sessions_site.urls"
WSGI_APPLICATION = None
ASGI_APPLICATION = "sessions_site.asgi.application"

TEMPLATES = [
    {
        # Django's engine; its pages show lone surrogates and NUL as U+FFFD (see rendering).
        "BACKEND": "explorer.rendering.VisibleTextTemplates",
        "NAME": "django",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "explorer.permissions.role_context",
            ],
            "builtins": ["explorer.rendering"],
        },
    },
]

# --- Database -------------------------------------------------------------------------
DATABASE_URL = envstr("DATABASE_URL")
if DATABASE_URL:
    import dj_database_url

    try:
        # No persistent connections: under ASGI every sync_to_async thread would keep its own
        # connection open forever (tens per worker). PostgreSQL reuses connections through
        # psycopg's pool instead, which Django only allows with CONN_MAX_AGE=0.
        _default_db = dj_database_url.parse(DATABASE_URL, conn_max_age=0)
    except Exception as exc:  # dj-database-url raises several types for bad URLs
        raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from None
    if _default_db["ENGINE"] == "django.db.backends.postgresql" and envbool("DATABASE_POOL", True):
        _pool_min = envint("DATABASE_POOL_MIN_SIZE", 1, minimum=0)
        _pool_max = envint("DATABASE_POOL_MAX_SIZE", 10, minimum=1)
        if _pool_max < _pool_min:
            raise ImproperlyConfigured(
                f"DATABASE_POOL_MAX_SIZE ({_pool_max}) is below DATABASE_POOL_MIN_SIZE ({_pool_min})"
            )
        _default_db.setdefault("OPTIONS", {})["pool"] = {
            "min_size": _pool_min,
            "max_size": _pool_max,
            # Seconds a request waits for a free connection before failing loudly.
            "timeout": envint("DATABASE_POOL_TIMEOUT", 30, minimum=1),
        }
        # A connection killed by a PostgreSQL restart is noticed before it is handed out.
        _default_db["CONN_HEALTH_CHECKS"] = True
    DATABASES = {"default": _default_db}
else:
    SQLITE_PATH = Path(envstr("SQLITE_PATH", str(VAR_DIR / "db.sqlite3")))
    with contextlib.suppress(OSError):
        SQLITE_PATH.parent.mkdir(parents=True, exist_ok=True)  # SQLite does not create it
    DATABASES = {
        "default": {
            # Django's SQLite backend, reading on (read-only) when a full disk refuses the
            # connection's WAL setup (explorer/sqlite_backend/base.py).
            "ENGINE": "explorer.sqlite_backend",
            "NAME": str(SQLITE_PATH),
            "OPTIONS": {
                # WAL lets readers (pages, websockets) proceed while the single writer appends;
                # synchronous=FULL syncs the log at every commit, so a committed import or
                # edit survives a power loss (NORMAL only survives a crash of the process).
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
            },
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Channels -------------------------------------------------------------------------
REDIS_URL = envstr("REDIS_URL")
# Several sites (or test servers) may share one Redis: every key of this one starts with it.
REDIS_PREFIX = envstr("REDIS_PREFIX", "explorer")
if REDIS_URL:
    if not REDIS_URL.startswith(("redis://", "rediss://", "unix://")):
        raise ImproperlyConfigured(
            f"REDIS_URL must start with redis://, rediss:// or unix://, got {REDIS_URL!r}"
        )
    from channels_redis.core import RedisChannelLayer

    # Each consumer waits on Redis in a blocking pop of brpop_timeout seconds; a socket timeout
    # at or below it (redis-py's default is 5 s, the same as the pop) kills every idle viewer's
    # connection with a TimeoutError (channels_redis issue 422). Keep a clear margin.
    REDIS_SOCKET_TIMEOUT = envint(
        "REDIS_SOCKET_TIMEOUT", 30, minimum=RedisChannelLayer.brpop_timeout + 2
    )
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "socket_timeout": REDIS_SOCKET_TIMEOUT,
                        "socket_connect_timeout": 5,
                        "socket_keepalive": True,
                        # Pooled connections idle longer than this are pinged before use, so
                        # one dropped by a firewall or a Redis restart is replaced quietly.
                        "health_check_interval": 15,
                    }
                ],
                "prefix": f"{REDIS_PREFIX}:asgi",
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# --- Cache ----------------------------------------------------------------------------
# Rendered graphs, folded trees and page summaries are cached under keys derived from the
# session's content, so every worker may share them: Redis when configured, else files
# under the var directory (shared by every daphne process on the machine). The test suite
# switches to a per-process memory cache (tests/conftest.py).
SESSIONS_CACHE = envstr("SESSIONS_CACHE", "redis" if REDIS_URL else "file")
# Cached values are named by the code that made them too (sessions_site/fingerprint.py): an
# upgrade never shows what the old code computed for a session that has not changed since.
CODE_FINGERPRINT = code_fingerprint(BASE_DIR)
# Every value the app caches has a lifetime of at most a day; on Redis no key may outlive
# SESSIONS_CACHE_MAX_SECONDS, so the cache is bounded by what is rendered in that window
# (a hard memory bound is Redis's maxmemory, docs/deploy.md).
SESSIONS_CACHE_MAX_SECONDS = envint("SESSIONS_CACHE_MAX_SECONDS", 24 * 3600, minimum=1)
if SESSIONS_CACHE == "redis":
    if not REDIS_URL:
        raise ImproperlyConfigured("SESSIONS_CACHE=redis needs REDIS_URL")
    # Not the channel layer's database: flushing or evicting the cache must never drop a
    # viewer's group membership. Default: the next database number on the same server.
    REDIS_CACHE_URL = envstr("REDIS_CACHE_URL") or redis_url_with_db(
        REDIS_URL, redis_url_db(REDIS_URL) + 1
    )
    CACHES = {
        "default": {
            "BACKEND": "sessions_site.cache.BoundedRedisCache",
            "LOCATION": REDIS_CACHE_URL,
            "KEY_PREFIX": f"{REDIS_PREFIX}:cache:{CODE_FINGERPRINT}",
            "OPTIONS": {
                "MAX_TIMEOUT": SESSIONS_CACHE_MAX_SECONDS,
                # A cache that cannot answer quickly is worse than none.
                "socket_timeout": 5,
                "socket_connect_timeout": 2,
            },
        }
    }
elif SESSIONS_CACHE == "file":
    CACHES = {
        "default": {
            "BACKEND": "sessions_site.cache.QuickFileCache",
            "LOCATION": str(VAR_DIR / "cache"),
            "KEY_PREFIX": CODE_FINGERPRINT,
            "OPTIONS": {"MAX_ENTRIES": 2000},
        }
    }
elif SESSIONS_CACHE == "locmem":
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
else:
    raise ImproperlyConfigured(
        f"SESSIONS_CACHE must be redis, file or locmem, got {SESSIONS_CACHE!r}"
    )

# --- Auth -----------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Login throttling (django-axes): the first backend refuses a login while the account or
# the address is locked out; a successful login clears that account's failures.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "explorer:session_list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# --- Static files ---------------------------------------------------------------------
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(envstr("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
# WhiteNoise warns at every start when the collected directory is missing; in development
# the finders serve files, so an empty directory is enough.
with contextlib.suppress(OSError):
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

# --- Uploads --------------------------------------------------------------------------
# The model and its context, for the token meter, compaction and turns (the engine's defaults
# unless the environment says otherwise). Read through ``explorer.conf``.
SESSIONS_CONTEXT_WINDOW = envint("SESSIONS_CONTEXT_WINDOW", 128000, minimum=1)
SESSIONS_COMPACTION = {
    "enabled": envbool("SESSIONS_COMPACTION_ENABLED", DEFAULT_COMPACTION_SETTINGS.enabled),
    "reserve_tokens": envint(
        "SESSIONS_COMPACTION_RESERVE_TOKENS", DEFAULT_COMPACTION_SETTINGS.reserve_tokens, minimum=0
    ),
    "keep_recent_tokens": envint(
        "SESSIONS_COMPACTION_KEEP_RECENT_TOKENS",
        DEFAULT_COMPACTION_SETTINGS.keep_recent_tokens,
        minimum=0,
    ),
}
# An OpenAI-compatible endpoint for summaries and turns; none means the embedded summarizer.
SESSIONS_LLM = {
    name: envstr(name).strip()
    for name in ("SESSIONS_LLM_BASE_URL", "SESSIONS_LLM_MODEL", "SESSIONS_LLM_API_KEY")
}
SESSIONS_MAX_UPLOAD_BYTES = envint("SESSIONS_MAX_UPLOAD_BYTES", 4 * 1024**3, minimum=1)
# Admins may always show a found secret in clear (audited); editors only when this is true
SESSIONS_EDITORS_MAY_REVEAL = envbool("SESSIONS_EDITORS_MAY_REVEAL", False)
# Files above this go to a temporary file instead of memory while uploading.
FILE_UPLOAD_MAX_MEMORY_SIZE = 8 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = 8 * 1024 * 1024
FILE_UPLOAD_TEMP_DIR = None
# Every uploaded file goes to a temporary file on disk and the importer streams it from
# there: an upload's memory stays a few lines wide, whatever its size.
FILE_UPLOAD_HANDLERS = ["django.core.files.uploadhandler.TemporaryFileUploadHandler"]

# --- Security -------------------------------------------------------------------------
# Largest request body on every path but the import (whose limit is
# SESSIONS_MAX_UPLOAD_BYTES); checked before the body is read (explorer.middleware).
SESSIONS_MAX_REQUEST_BYTES = envint("SESSIONS_MAX_REQUEST_BYTES", 8 * 1024 * 1024, minimum=1024)
# A page whose answer has not started after this many seconds gets 503 + Retry-After instead
# of a client left hanging (explorer.middleware.RequestTimeout; the import is exempt; 0: off).
SESSIONS_REQUEST_TIMEOUT = envint("SESSIONS_REQUEST_TIMEOUT", 30, minimum=0)
# Share links (explorer.shares): the longest expiry an editor may give one, the base of the
# URL the shell prints, and how many unknown tokens one address may try per window before
# it gets 429 (guessing a 256-bit token is hopeless, but trying costs a database read).
SESSIONS_SHARE_MAX_DAYS = envint("SESSIONS_SHARE_MAX_DAYS", 30, minimum=1)
SESSIONS_SHARE_BASE_URL = envstr("SESSIONS_SHARE_BASE_URL", "http://127.0.0.1:8000").rstrip("/")
SESSIONS_SHARE_GUESS_LIMIT = envint("SESSIONS_SHARE_GUESS_LIMIT", 20, minimum=1)
SESSIONS_SHARE_GUESS_WINDOW = envint("SESSIONS_SHARE_GUESS_WINDOW", 600, minimum=1)
# Login throttling (explorer/login_throttle.py): five failures lock one account from one
# address (the pair) for fifteen minutes; an address that keeps failing, whatever accounts
# it tries, waits 2 s, 4 s, 8 s, ... (at most a minute) before each next try. No lock that
# anyone can trigger for an account from anywhere (an admin's included).
AXES_FAILURE_LIMIT = envint("SESSIONS_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=envint("SESSIONS_LOGIN_LOCKOUT_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
SESSIONS_LOGIN_FREE_FAILURES = envint("SESSIONS_LOGIN_FREE_FAILURES", 5, minimum=1)
SESSIONS_LOGIN_DELAY_MAX_SECONDS = envint("SESSIONS_LOGIN_DELAY_MAX_SECONDS", 60, minimum=1)
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_HTTP_RESPONSE_CODE = 429
# The address is the peer's: a client cannot pick one with X-Forwarded-For. Behind a
# reverse proxy run daphne with --proxy-headers, so the peer is the client again.
AXES_IPWARE_META_PRECEDENCE_ORDER = ("REMOTE_ADDR",)
AXES_VERBOSE = False
# Every HTML page: scripts and styles from static files only, nothing inline, no frames or
# plugins; images also as data: URIs (message images, the icon); sockets to this origin.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
if not DEBUG:
    # Served locally over plain HTTP, TLS-only cookies and redirects would lock users out;
    # a deployment (DEBUG=false) gets all of them.
    SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", not LOCAL_SERVE)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = not LOCAL_SERVE
    CSRF_COOKIE_SECURE = not LOCAL_SERVE
    SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 0 if LOCAL_SERVE else 31536000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    # Preloading is a promise to browsers that is slow to undo: only on request.
    SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", False)
    if not SECURE_HSTS_PRELOAD:
        # check --deploy asks for preloading (W021); leaving it off is this project's choice.
        SILENCED_SYSTEM_CHECKS = ["security.W021"]


def _expected_403_in_one_line(record) -> bool:
    """A refused request (PermissionDenied: a viewer posting an edit, a user without a role)
    is expected, not a failure: keep its one log line, drop the traceback that buried the
    real errors."""
    from django.core.exceptions import PermissionDenied

    exc = record.exc_info[0] if record.exc_info else None
    if isinstance(exc, type) and issubclass(exc, PermissionDenied):
        record.exc_info = None
        record.exc_text = None
    return True


LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "expected_403": {
            "()": "django.utils.log.CallbackFilter",
            "callback": _expected_403_in_one_line,
        }
    },
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "WARNING")},
    "loggers": {
        "explorer": {"level": envstr("LOG_LEVEL", "INFO")},
        "django.request": {"filters": ["expected_403"]},
    },
}
