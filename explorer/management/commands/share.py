"""``manage.py share create|list|revoke``: the share links from the shell (explorer.shares)."""

from __future__ import annotations

import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from explorer import shares
from explorer.models import Session, ShareLink


def _session(ident: str) -> Session:
    """A session by its header id (what ``export_session`` takes), or by its number."""
    session = Session.objects.filter(session_id=ident).first()
    if session is None and ident.isdigit():
        session = Session.objects.filter(pk=int(ident)).first()
    if session is None:
        raise CommandError(f"No session with id {ident!r}")
    return session


class Command(BaseCommand):
    help = "Create, list or revoke read-only share links (the token is printed once)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="make a link and print its URL")
        create.add_argument("session_id", help="the session's header id (or its number)")
        create.add_argument("--leaf", default=None, help="share only the route to this entry")
        create.add_argument("--expires", default="7d", help="7d, 12h, 30m (default 7d)")
        create.add_argument("--with-reviews", action="store_true", help="include review threads")
        create.add_argument("--base-url", default=None, help="default SESSIONS_SHARE_BASE_URL")
        create.add_argument("--json", action="store_true", help="print one JSON object")
        listing = sub.add_parser("list", help="every link, newest first")
        listing.add_argument("--json", action="store_true", help="print a JSON array")
        revoke = sub.add_parser("revoke", help="revoke a link at once")
        revoke.add_argument("id", type=int, help="the link's id (from share list)")

    def handle(self, *args, **options) -> None:
        action = options["action"]
        if action == "create":
            self._create(options)
        elif action == "list":
            self._list(options["json"])
        else:
            link = ShareLink.objects.filter(pk=options["id"]).first()
            if link is None:
                raise CommandError(f"No share link {options['id']}")
            done = shares.revoke(link)
            self.stdout.write(f"revoked {link.pk}" if done else f"{link.pk} was already revoked")

    def _create(self, options) -> None:
        session = _session(options["session_id"])
        try:
            new = shares.create(
                session,
                leaf_id=options["leaf"],
                with_reviews=options["with_reviews"],
                expires_in=shares.parse_expiry(options["expires"]),
            )
        except shares.ShareError as exc:
            raise CommandError(str(exc)) from exc
        base = (options["base_url"] or settings.SESSIONS_SHARE_BASE_URL).rstrip("/")
        url = base + new.path
        if options["json"]:
            self.stdout.write(json.dumps({**shares.describe(new.link), "url": url}))
        else:
            self.stdout.write(url)

    def _list(self, as_json: bool) -> None:
        links = ShareLink.objects.select_related("session", "created_by")
        rows = [shares.describe(link) for link in links]
        if as_json:
            self.stdout.write(json.dumps(rows))
            return
        for r in rows:
            scope = f"route to {r['leaf']}" if r["leaf"] else "session"
            self.stdout.write(
                f"{r['id']}\t{r['state']}\t{r['session']}\t{scope}\t{r['creator'] or '-'}\t"
                f"created {r['created']}\texpires {r['expires']}\tviews {r['views']}\t"
                f"last {r['last_viewed'] or 'never'}"
            )
