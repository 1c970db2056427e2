"""ASGI guards that run before Django reads a request body.

Django reads the whole body into a temporary file before the first middleware runs, and the
CSRF check then parses a multipart body before anyone is authenticated, so without a guard
any anonymous client can make every worker read, store and parse gigabytes. The guard here
answers at once, before the application reads a byte:

- a body larger than the path's limit, by its ``Content-Length`` or (chunked, or a length
  that lies) by the bytes as they stream: 413 Content Too Large;
- a body for the import from anyone who may not import: 403 (the import is the one path
  with a large limit, so only admins may send that much).

Every path but the import has a small limit (``SESSIONS_MAX_REQUEST_BYTES``, default 8 MiB:
forms and htmx posts); the import has the configured upload limit
(``SESSIONS_MAX_UPLOAD_BYTES``, default 4 GiB) plus room for the multipart envelope.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.urls import reverse

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# The multipart boundary, headers and form fields around the uploaded file itself.
MULTIPART_ENVELOPE = 64 * 1024


def import_path() -> str:
    """The one path that takes large bodies."""
    return reverse("explorer:import")


def body_limit(path: str) -> int:
    """Largest body accepted for ``path``, in bytes."""
    if path == import_path():
        return int(settings.SESSIONS_MAX_UPLOAD_BYTES) + MULTIPART_ENVELOPE
    return int(settings.SESSIONS_MAX_REQUEST_BYTES)


def declared_length(scope: Scope) -> int | None:
    """The ``Content-Length`` header as a number; None when absent. A malformed header
    counts as larger than anything (the request is refused, never guessed)."""
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-length":
            text = value.strip()
            if not text.isdigit() or not text.isascii() or len(text) > 19:
                return 1 << 63
            return int(text)
    return None


def _has_body(scope: Scope) -> bool:
    if declared_length(scope) not in (None, 0):
        return True
    return any(name.lower() == b"transfer-encoding" for name, _value in scope.get("headers", ()))


def may_import(scope: Scope) -> bool:
    """Whether the session cookie of ``scope`` belongs to an admin (synchronous: DB)."""
    from django.contrib.auth import get_user
    from django.http import HttpRequest
    from django.http.cookie import parse_cookie
    from django.utils.module_loading import import_string

    from explorer.permissions import can_admin

    cookie = b"; ".join(v for n, v in scope.get("headers", ()) if n.lower() == b"cookie")
    request = HttpRequest()
    request.COOKIES = parse_cookie(cookie.decode("latin-1"))
    key = request.COOKIES.get(settings.SESSION_COOKIE_NAME)
    if not key:
        return False
    engine = import_string(settings.SESSION_ENGINE + ".SessionStore")
    request.session = engine(key)
    return can_admin(get_user(request))


async def _answer(send: Send, status: int, text: str) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _too_large_text(limit: int, path: str) -> str:
    setting = "SESSIONS_MAX_UPLOAD_BYTES" if path == import_path() else "SESSIONS_MAX_REQUEST_BYTES"
    return (
        f"Request body too large: the limit for this address is {limit:,} bytes "
        f"(setting {setting}). Nothing was read.\n"
    )


class RequestSizeGuard:
    """Refuse oversized bodies (and import bodies from non-admins) before they are read."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        limit = body_limit(path)
        length = declared_length(scope)
        if length is not None and length > limit:
            await _answer(send, 413, _too_large_text(limit, path))
            return
        if (
            path == import_path()
            and _has_body(scope)
            and not await sync_to_async(may_import, thread_sensitive=True)(scope)
        ):
            await _answer(send, 403, "Only admins may import sessions.\n")
            return
        state = {"seen": 0, "refused": False}

        async def guarded_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                state["seen"] += len(message.get("body", b""))
                if state["seen"] > limit:
                    # Tell the application the client left (it answers nothing), then
                    # answer for it.
                    state["refused"] = True
                    await _answer(send, 413, _too_large_text(limit, path))
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if not state["refused"]:
                await send(message)

        await self.app(scope, guarded_receive, guarded_send)


# ---------------------------------------------------------------------------------------------
# WebSocket origin

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin_key(scheme: str, netloc: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of ``scheme://netloc``, the default port filled in."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(f"{scheme}://{netloc}")
        port = parts.port
    except ValueError:
        return None
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


def parse_origin(origin: str) -> tuple[str, str, int] | None:
    """An ``Origin`` header as ``(scheme, host, port)``; None for ``null`` or garbage."""
    scheme, sep, rest = origin.strip().partition("://")
    if not sep or "/" in rest:
        return None
    return _origin_key(scheme.lower(), rest)


def own_origin(scope: Scope) -> tuple[str, str, int] | None:
    """The origin the page was served from: the ``Host`` header, with the scheme the browser
    used (``https`` when TLS ends at a proxy that says so, as Django's settings configure)."""
    headers = {
        name.decode("latin-1").lower(): value.decode("latin-1")
        for name, value in scope.get("headers", ())
    }
    host = headers.get("host", "")
    scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        name, value = proxy
        header = name.lower().removeprefix("http_").replace("_", "-")
        if headers.get(header, "").split(",")[0].strip() == value:
            scheme = "https"
    return _origin_key(scheme, host) if host else None


def origin_allowed(scope: Scope) -> bool:
    """Same scheme, host and port as the page, or listed in ``CSRF_TRUSTED_ORIGINS``; the
    host must also be one Django serves (``ALLOWED_HOSTS``)."""
    from django.http.request import validate_host

    origin = next((v for n, v in scope.get("headers", ()) if n.lower() == b"origin"), None)
    if origin is None:
        return False
    wanted = parse_origin(origin.decode("latin-1"))
    if wanted is None:
        return False
    trusted = {parse_origin(o) for o in settings.CSRF_TRUSTED_ORIGINS}
    if wanted in trusted:
        return True
    own = own_origin(scope)
    return own == wanted and validate_host(wanted[1], settings.ALLOWED_HOSTS)


class WebsocketOriginGuard:
    """Refuse a WebSocket handshake from another origin: another page on the same machine
    (another port) must not read sessions live with the viewer's cookie."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and not origin_allowed(scope):
            message = await receive()
            if message["type"] == "websocket.connect":
                await send({"type": "websocket.close", "code": 4403})
            return
        await self.app(scope, receive, send)


# ---------------------------------------------------------------------------------------------
# One read of each per-request figure


class ReadMemoMiddleware:
    """A GET or HEAD reads the session's false positives and newest entry once, however many
    of the page's parts need them (``queries.read_memo``); other methods write, so they read
    fresh each time."""

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        if request.method not in ("GET", "HEAD"):
            return self.get_response(request)
        from explorer import queries

        with queries.read_memo():
            return self.get_response(request)


class DiskFullMiddleware:
    """A write the disk had no room for is told as such: 507 Insufficient Storage with
    "the disk is full" (JSON callers get it as their error, htmx as the text to show),
    never a generic 500. The write ran in one transaction, so nothing of it was stored."""

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        return self.get_response(request)

    def process_exception(self, request: Any, exception: Exception) -> Any:
        from explorer import diskfull

        if not diskfull.refused_for_space(exception):
            return None
        import logging

        from django.http import HttpResponse, JsonResponse
        from django.template.loader import render_to_string

        logging.getLogger(__name__).error("The disk is full: %s %s refused", request.method,
                                          request.path)  # fmt: skip
        if request.GET.get("format") == "json":
            return JsonResponse({"ok": False, "error": diskfull.MESSAGE, "disk_full": True},
                                status=507)  # fmt: skip
        if getattr(request, "htmx", False):
            return HttpResponse(diskfull.MESSAGE, status=507, content_type="text/plain")
        try:
            body = render_to_string("disk_full.html", {"message": diskfull.MESSAGE}, request)
        except Exception:  # noqa: BLE001 - the page must not fail for want of a template
            return HttpResponse(diskfull.MESSAGE, status=507, content_type="text/plain")
        return HttpResponse(body, status=507)


# ---------------------------------------------------------------------------------------------
# Content-Security-Policy


class ContentSecurityPolicyMiddleware:
    """``Content-Security-Policy`` on every HTML page (``settings.CONTENT_SECURITY_POLICY``).

    The pages load scripts and styles from static files only, so the policy allows nothing
    inline: a payload that got past the sanitiser still could not run. A response that set
    its own policy (the graph's SVG) keeps it.
    """

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        response = self.get_response(request)
        content_type = response.get("Content-Type", "")
        if content_type.startswith("text/html") and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = settings.CONTENT_SECURITY_POLICY
        return response


# ---------------------------------------------------------------------------------------------
# daphne: the same limits while the body arrives

_TOO_LARGE = (
    b"HTTP/1.1 413 Content Too Large\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s"
)
_FORBIDDEN = (
    b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s"
)


def _refuse(request: Any, template: bytes, text: str) -> None:
    body = text.encode()
    request._explorer_refused = True
    request.channel.transport.write(template % (len(body), body))
    request.channel.loseConnection()


def install_daphne_guard() -> None:
    """Apply the body limits inside daphne, as the bytes arrive.

    daphne receives a whole request body (into memory or a temporary file) before the ASGI
    application sees the request, and then queues all of it for the application at once, so
    an ASGI middleware alone answers only after the last byte. Here the declared length is
    checked when the headers end and the count with every chunk: an oversized body, or an
    import body without a session cookie, is answered and the connection closed at once.
    Idempotent; a no-op without daphne.
    """
    try:
        from daphne.http_protocol import WebRequest
    except ImportError:
        return
    if getattr(WebRequest, "_explorer_guarded", False):
        return
    from urllib.parse import unquote

    got_length = WebRequest.gotLength
    handle_chunk = WebRequest.handleContentChunk
    process = WebRequest.process

    def guarded_got_length(self: Any, length: int | None) -> None:
        raw = getattr(self.channel, "_path", b"") or b""
        path = unquote(raw.split(b"?", 1)[0].decode("latin-1"))
        self._explorer_path = path
        self._explorer_limit = body_limit(path)
        self._explorer_seen = 0
        self._explorer_refused = False
        # Twisted would also parse a multipart body itself (into ``request.args``, with the
        # e-mail parser: about ten copies of an upload in memory) before daphne passes the
        # raw body on; daphne never reads those arguments, Django parses the body as a stream.
        self._parsePOSTFormSubmission = False
        got_length(self, length)
        if length is not None and length > self._explorer_limit:
            _refuse(self, _TOO_LARGE, _too_large_text(self._explorer_limit, path))
        elif (
            path == import_path()
            and (length or self.requestHeaders.hasHeader(b"transfer-encoding"))
            and settings.SESSION_COOKIE_NAME.encode() not in (self.getHeader(b"cookie") or b"")
        ):
            _refuse(self, _FORBIDDEN, "Only admins may import sessions.\n")

    def guarded_chunk(self: Any, data: bytes) -> None:
        if getattr(self, "_explorer_refused", False):
            return
        self._explorer_seen += len(data)
        if self._explorer_seen > self._explorer_limit:
            _refuse(self, _TOO_LARGE, _too_large_text(self._explorer_limit, self._explorer_path))
            return
        handle_chunk(self, data)

    def guarded_process(self: Any) -> Any:
        if getattr(self, "_explorer_refused", False):
            return None
        return process(self)

    WebRequest.gotLength = guarded_got_length
    WebRequest.handleContentChunk = guarded_chunk
    WebRequest.process = guarded_process
    WebRequest._explorer_guarded = True
    _install_body_spool()


# ---------------------------------------------------------------------------------------------
# daphne: a large body reaches the application from disk, not from memory

SPOOL_MESSAGE_BYTES = 1024 * 1024  # body bytes per message handed to the application


class BodySpool:
    """What daphne puts a request body into, in place of the application's queue.

    daphne keeps an arriving body in a temporary file, then reads all of it and queues every
    8 KiB chunk for the application in one go, before the application has read the first:
    a 2 GB upload sat in the server's memory, once, however the rest streamed. Here each
    chunk is written on to a temporary file instead, and the queue gets a small note per
    :data:`SPOOL_MESSAGE_BYTES` (offset and length); the application's ``receive`` reads the
    bytes back as it goes. A body of one chunk (every form post) passes through untouched.
    Every other message (``http.disconnect``) passes through in order.
    """

    def __init__(self) -> None:
        self.queue: Any = None  # daphne's queue, set once the application exists
        self._file: Any = None
        self._written = 0
        self._noted = 0  # bytes already announced in a note

    def put_nowait(self, message: Message) -> None:
        body = message.get("body", b"") if message.get("type") == "http.request" else None
        if body is None or (self._file is None and not message.get("more_body")):
            self.queue.put_nowait(message)
            return
        if self._file is None:
            import tempfile

            # Closed when the application reads the last message (unlinked from the start).
            self._file = tempfile.TemporaryFile(prefix="explorer-body-")  # noqa: SIM115
        self._file.seek(self._written)
        self._file.write(body)
        self._written += len(body)
        more = bool(message.get("more_body"))
        if self._written - self._noted >= SPOOL_MESSAGE_BYTES or not more:
            start, self._noted = self._noted, self._written
            self.queue.put_nowait(
                {"type": "http.request", "spooled": (start, self._written), "more_body": more}
            )

    def __getattr__(self, name: str) -> Any:
        return getattr(self.queue, name)

    async def receive(self) -> Message:
        message = await self.queue.get()
        span = message.get("spooled")
        if span is None:
            return message
        start, end = span
        self._file.seek(start)
        body = self._file.read(end - start)
        if not message["more_body"]:
            self._file.close()
        return {"type": "http.request", "body": body, "more_body": message["more_body"]}


def _install_body_spool() -> None:
    """Give every HTTP application daphne makes a :class:`BodySpool` in front of its queue:
    daphne's queue is made and bound to the application inside ``create_application``, so
    the application it calls is wrapped for that one call (the reactor's thread makes them
    one at a time)."""
    from daphne.server import Server

    if getattr(Server, "_explorer_spooled", False):
        return
    create_application = Server.create_application

    def spooled_create_application(self: Any, protocol: Any, scope: Scope) -> Any:
        if scope.get("type") != "http":
            return create_application(self, protocol, scope)
        spool = BodySpool()
        application = self.application

        def with_spool(*, scope: Scope, receive: Receive, send: Send) -> Any:
            return application(scope=scope, receive=spool.receive, send=send)

        self.application = with_spool
        try:
            queue = create_application(self, protocol, scope)
        finally:
            self.application = application
        if queue is None:
            return None
        spool.queue = queue
        return spool

    Server.create_application = spooled_create_application
    Server._explorer_spooled = True


# ---------------------------------------------------------------------------------------------
# Request timeout


def request_timeout() -> float:
    """Seconds a page may take before its client gets a 503 (``SESSIONS_REQUEST_TIMEOUT``;
    0 turns the guard off)."""
    return float(getattr(settings, "SESSIONS_REQUEST_TIMEOUT", 0) or 0)


class RequestTimeout:
    """Answer 503 Service Unavailable (with ``Retry-After``) to a request whose response has
    not started within :func:`request_timeout` seconds, instead of leaving the client
    waiting on a busy worker.

    The import is exempt: it reads a body that may take minutes to arrive and shows its own
    progress. The view's thread cannot be stopped from here (Python has no safe way to kill
    a thread); it finishes its work and its late response is dropped, which is what a
    reverse proxy's timeout does too, but the client is told at once and can retry.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        seconds = request_timeout()
        if scope["type"] != "http" or seconds <= 0 or scope.get("path") == import_path():
            await self.app(scope, receive, send)
            return
        import asyncio

        state = {"started": False, "timed_out": False}

        async def tracked(message: Message) -> None:
            if state["timed_out"]:
                return  # the client already has its 503
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        task = asyncio.ensure_future(self.app(scope, receive, tracked))
        done, _pending = await asyncio.wait({task}, timeout=seconds)
        if task in done or state["started"]:
            await task  # finished, or already streaming its answer: let it complete
            return
        state["timed_out"] = True
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # never unretrieved
        task.cancel()
        body = (
            f"The server took longer than {seconds:g} s to answer this page "
            "(setting SESSIONS_REQUEST_TIMEOUT). Please try again in a moment.\n"
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 503,
                "headers": [
                    (b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()),
                    (b"retry-after", b"5"),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
