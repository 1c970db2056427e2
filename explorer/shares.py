"""Share links: a read-only link to a session or one route for readers without an account.

The token is 32 random bytes (256 bits) in URL-safe base64; the database holds only its
SHA-256, so the token is shown once, to its creator, and a copy of the database opens
nothing. A link is found by hashing what the reader sent; a revoked or expired link is
told apart from an unknown one (410, not 404), and unknown tokens are counted per address so
guessing hits a limit (429) long before it could succeed. Every read through a link is
logged (``ShareView``). The web pages (``views.share``) and the shell (``manage.py share``)
both call this module, so they cannot disagree.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from explorer import queries
from explorer.models import Session, ShareLink, ShareView

TOKEN_BYTES = 32
DEFAULT_EXPIRY = timedelta(days=7)
_DURATION = re.compile(r"^\s*(\d{1,6})\s*([dhm])\s*$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


class ShareError(ValueError):
    """Bad input for a share link (the message says what and is shown as is)."""


@dataclass(frozen=True)
class NewShare:
    """A link just made: the only moment its token (and so its URL) is known."""

    link: ShareLink
    token: str

    @property
    def path(self) -> str:
        return share_path(self.token)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def share_path(token: str) -> str:
    return reverse("explorer:share", args=[token])


def max_expiry() -> timedelta:
    return timedelta(days=int(settings.SESSIONS_SHARE_MAX_DAYS))


def parse_expiry(text: str | None) -> timedelta:
    """``7d``, ``12h`` or ``30m`` (default 7 days), refused above the configured cap so a
    link never outlives what the site allows."""
    if text is None or not str(text).strip():
        wanted = DEFAULT_EXPIRY
    else:
        m = _DURATION.match(str(text))
        if not m:
            raise ShareError(f"Expiry {str(text)[:40]!r} is not like 7d, 12h or 30m.")
        wanted = timedelta(**{_UNITS[m.group(2)]: int(m.group(1))})
        if wanted <= timedelta(0):
            raise ShareError("The expiry must be longer than zero.")
    if wanted > max_expiry():
        raise ShareError(
            f"The expiry may be at most {settings.SESSIONS_SHARE_MAX_DAYS} days "
            "(SESSIONS_SHARE_MAX_DAYS)."
        )
    return wanted


def create(
    session: Session,
    *,
    user=None,
    leaf_id: str | None = None,
    with_reviews: bool = False,
    expires_in: timedelta = DEFAULT_EXPIRY,
) -> NewShare:
    """A new link; ``leaf_id`` limits it to the route ending there (it must be an entry of
    the session: a link to nothing is refused, not made)."""
    leaf = (leaf_id or "").strip()
    if leaf and not queries.entry_exists(session, leaf):
        raise ShareError(f"This session has no entry {leaf[:80]!r}.")
    if expires_in > max_expiry():
        raise ShareError(f"The expiry may be at most {settings.SESSIONS_SHARE_MAX_DAYS} days.")
    token = secrets.token_urlsafe(TOKEN_BYTES)
    link = ShareLink.objects.create(
        session=session,
        token_hash=token_hash(token),
        leaf_id=leaf,
        with_reviews=with_reviews,
        created_by=user if user is not None and user.is_authenticated else None,
        expires=timezone.now() + expires_in,
    )
    return NewShare(link, token)


def revoke(link: ShareLink, user=None) -> bool:
    """Revoke at once (the next request through it answers 410). False: it already was."""
    if link.revoked_at is not None:
        return False
    link.revoked_at = timezone.now()
    link.revoked_by = user if user is not None and user.is_authenticated else None
    link.save(update_fields=["revoked_at", "revoked_by"])
    return True


def state(link: ShareLink, now: datetime | None = None) -> str:
    """``active``, ``revoked`` or ``expired``."""
    if link.revoked_at is not None:
        return "revoked"
    if link.expires <= (now or timezone.now()):
        return "expired"
    return "active"


# --- guessing ---------------------------------------------------------------------------------


def _guess_key(address: str) -> str:
    return f"share-guess:{hashlib.sha256(address.encode()).hexdigest()[:32]}"


def guessing_blocked(address: str) -> bool:
    """Whether ``address`` has sent too many unknown tokens in the current window."""
    return int(cache.get(_guess_key(address), 0)) >= int(settings.SESSIONS_SHARE_GUESS_LIMIT)


def count_guess(address: str) -> None:
    """One more unknown token from ``address`` (the window starts at its first miss)."""
    key = _guess_key(address)
    if cache.add(key, 1, timeout=int(settings.SESSIONS_SHARE_GUESS_WINDOW)):
        return
    try:
        cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.add(key, 1, timeout=int(settings.SESSIONS_SHARE_GUESS_WINDOW))


def find(token: str) -> ShareLink | None:
    """The link of ``token`` (any state), or None. Tokens of the wrong shape are not looked
    up at all."""
    if not token or len(token) > 100:
        return None
    return ShareLink.objects.select_related("session").filter(token_hash=token_hash(token)).first()


def record_view(link: ShareLink, *, address: str, path: str, user_agent: str, page: bool) -> None:
    """Log one read; a full page (not an htmx part of one) also counts as a view."""
    with transaction.atomic():
        ShareView.objects.create(
            link=link, address=address[:64], path=path[:300], user_agent=user_agent[:200]
        )
        now = timezone.now()
        if page:
            ShareLink.objects.filter(pk=link.pk).update(views=F("views") + 1, last_viewed=now)
        else:
            ShareLink.objects.filter(pk=link.pk).update(last_viewed=now)


def describe(link: ShareLink) -> dict:
    """One link as the lists and ``share list --json`` show it (never the token)."""
    return {
        "id": link.pk,
        "session": link.session.session_id,
        "session_pk": link.session_id,
        "scope": "route" if link.leaf_id else "session",
        "leaf": link.leaf_id or None,
        "with_reviews": link.with_reviews,
        "creator": link.created_by.get_username() if link.created_by else None,
        "created": link.created.isoformat(),
        "expires": link.expires.isoformat(),
        "revoked": link.revoked_at.isoformat() if link.revoked_at else None,
        "state": state(link),
        "views": link.views,
        "last_viewed": link.last_viewed.isoformat() if link.last_viewed else None,
    }
