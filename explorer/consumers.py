"""The websocket of a session page: one Channels group per session.

Every viewer gets every entry exactly once and in file order, whatever happens on the way:
the consumer remembers the last position it delivered, drops repeats, and reads any gap
(a missed group message, a reconnect, a message the layer dropped when a viewer fell behind)
back from the database. A client says where it stands with
``{"type": "resume", "after": <position or entry id>, "tip": <entry id>, "follow": bool}``;
nothing is delivered before that (or before ``?after=`` in the URL), so the first entries
never overtake the resumed ones.

Two wire formats: HTML for the htmx ``ws`` extension (out-of-band swaps, the default) and
JSON (``?format=json``) for programs, tests and benchmarks.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import parse_qs

import orjson
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from explorer import broadcast, html, items, live_frames, params
from explorer.models import Session
from explorer.session import jsonfmt

logger = logging.getLogger(__name__)
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
# Most entries sent in one resume / gap fill; the rest follow in further batches.
RESUME_BATCH = 500
# A viewer further behind than this gets a "reload" notice instead of the entries.
MAX_GAP = 5000


# ---------------------------------------------------------------------------------------------
# Database side (synchronous; called through database_sync_to_async)


def _load_session(user, pk: int):
    from explorer.models import Session
    from explorer.permissions import VIEWER, has_role

    if not has_role(user, VIEWER):
        return "forbidden"
    return Session.objects.filter(pk=pk).first()


def _max_position(session_pk: int) -> int:
    from explorer.models import Entry

    # The last row of the (session, position) index, not an aggregate over the session.
    last = (
        Entry.objects.filter(session_id=session_pk)
        .order_by("-position")
        .values_list("position", flat=True)
        .first()
    )
    return last or 0


def _position_of(session_pk: int, after: Any) -> int | None:
    """A client's ``after``: a position, or an entry id (its position)."""
    from explorer.models import Entry

    number = params.parse_int(after)
    if number is not None:
        return max(0, min(number, 2**62))  # a position column holds nothing outside this
    if isinstance(after, str):
        row = Entry.objects.filter(session_id=session_pk, entry_id=after).values("position").first()
        return row["position"] if row else None
    return None


def _fragments_between(session_pk: int, after: int, before: int | None, limit: int) -> list[dict]:
    from explorer.models import Entry

    qs = Entry.objects.filter(session_id=session_pk, position__gt=after)
    if before is not None:
        qs = qs.filter(position__lt=before)
    rows = list(qs.order_by("position")[:limit])
    return items.entry_fragments(rows, Session.objects.get(pk=session_pk)) if rows else []


def _count_between(session_pk: int, after: int, before: int | None) -> tuple[int, int]:
    """How many entries lie in the gap, and the newest position in it."""
    from django.db.models import Count, Max

    from explorer.models import Entry

    qs = Entry.objects.filter(session_id=session_pk, position__gt=after)
    if before is not None:
        qs = qs.filter(position__lt=before)
    agg = qs.aggregate(n=Count("pk"), m=Max("position"))
    return agg["n"], agg["m"] or after


def _window_swap(session_pk: int, leaf_id: str | None) -> tuple[str, str | None]:
    """The Live tab's transcript window for the route root → ``leaf_id`` (a branch switch)."""
    from explorer.views.live import window_swap

    return window_swap(Session.objects.get(pk=session_pk), leaf_id)


def _tree_refresh_url(session_pk: int) -> str:
    from django.urls import reverse

    return reverse("explorer:live", args=[session_pk]) + "?partial=tree-panel"


# ---------------------------------------------------------------------------------------------


class SessionLiveConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        self.session_pk = int(self.scope["url_route"]["kwargs"]["pk"])
        self.group = f"session-{self.session_pk}"
        self.user = self.scope.get("user")
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        self.json_mode = query.get("format", [""])[0] == "json"
        self.ready = False
        self.last_position: int | None = None
        self.tip: str | None = None
        self.follow = True
        self.tree_arrived = 0  # entries delivered since this viewer's text tree was drawn
        self.off_branch = 0  # entries delivered on branches other than the one shown
        self.off_newest = ""
        self.turn_offset: int | None = None  # characters of the running turn delivered
        self.joined = False
        broadcast.remember_loop(asyncio.get_running_loop())
        # Accept first, then close with a code: a refused handshake reaches the browser as
        # 1006, which the htmx extension retries forever; 44xx tells it to stop.
        await self.accept()
        if self.user is None or not self.user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        session = await database_sync_to_async(_load_session)(self.user, self.session_pk)
        if session == "forbidden":
            await self.close(code=CLOSE_FORBIDDEN)
            return
        if session is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        await self.channel_layer.group_add(self.group, self.channel_name)
        self.joined = True
        if "after" in query:
            await self.resume(query["after"][0], tip=None, follow=True)

    async def disconnect(self, code: int) -> None:
        if getattr(self, "joined", False):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    # -- from the client -------------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not self.joined:
            return
        try:
            message = jsonfmt.loads(text_data or bytes_data or b"")
        except (ValueError, RecursionError):  # not JSON, or nested too deep: ignored
            return
        if not isinstance(message, dict):
            return
        kind = message.get("type")
        if kind == "resume":
            follow = message.get("follow", self.follow)
            await self.resume(
                message.get("after"),
                tip=message.get("tip") or None,
                follow=follow not in (False, "0", "false", "off", ""),
            )
        elif kind == "sync":
            # Cheap catch-up: anything after what was delivered (a dropped last message).
            if self.ready:
                await self.send_entries([], sync=True)
        elif kind == "tree_seen":  # the viewer redrew its text tree
            self.tree_arrived = 0
        elif kind == "switch" and self.ready and not self.json_mode:
            await self.switch_branch(message.get("to"))
        elif kind == "follow":
            self.follow = message.get("on") not in (False, "0", "false", "off", "", None)
            await self.send_state()

    async def resume(self, after: Any, *, tip: str | None, follow: bool) -> None:
        position = await database_sync_to_async(_position_of)(self.session_pk, after)
        newest = await database_sync_to_async(_max_position)(self.session_pk)
        if position is None:
            # Nothing given: everything; an id we do not know: from now on.
            position = 0 if after in (None, "", 0) else newest
        # A client cannot be ahead of the session (a stale page of a re-created database).
        position = min(position, newest)
        self.follow = follow
        self.tip = tip
        if self.last_position is None or position > self.last_position or not self.ready:
            self.last_position = position
        self.ready = True
        await self.send_entries([], sync=True)
        if self.json_mode:
            await self.send_json({"type": "resumed", "lastPosition": self.last_position})
        await self.send_running_turn()

    # -- to the client ---------------------------------------------------------------------

    async def send_text(self, text: str) -> None:
        # A frame is UTF-8: a lone surrogate or NUL from a session shows as U+FFFD.
        await self.send(text_data=jsonfmt.visible(text))

    async def send_json(self, value: dict) -> None:
        # orjson: these frames are for programs, byte-exact JavaScript output is not needed,
        # and with a hundred viewers the encoder runs a hundred times per entry.
        try:
            text = orjson.dumps(value).decode()
        except orjson.JSONEncodeError:  # a lone surrogate: send the visible form
            text = ""
        if not text or "\\u0000" in text:  # NUL (or a text naming it): the same
            text = orjson.dumps(jsonfmt.visible_data(value)).decode()
        await self.send(text_data=text)

    async def send_state(self) -> None:
        if not self.json_mode:
            await self.send_text(html.live_state(self.last_position, self.tip, self.follow))

    async def send_entries(self, fragments: list[dict], *, sync: bool = False) -> None:
        """Deliver ``fragments`` (new, in position order) after whatever is missing before
        them; with ``sync`` also everything after the last delivered position."""
        if not self.ready:
            return
        batch: list[dict] = []
        first = fragments[0]["position"] if fragments else None
        if sync or (first is not None and first > self.last_position + 1):
            missing, newest = await database_sync_to_async(_count_between)(
                self.session_pk, self.last_position, first
            )
            if missing > MAX_GAP:
                # Too far behind to stream (a long disconnect, a big import): skip ahead.
                await self.live_reset({"count": missing, "last_position": newest})
                fragments = [f for f in fragments if f["position"] > newest]
                if not fragments:
                    return
                first = fragments[0]["position"]
            # Read the gap back from the database, in batches.
            cursor = self.last_position
            while True:
                rows = await database_sync_to_async(_fragments_between)(
                    self.session_pk, cursor, first, RESUME_BATCH
                )
                batch.extend(rows)
                if len(rows) < RESUME_BATCH:
                    break
                cursor = rows[-1]["position"]
                if len(batch) >= RESUME_BATCH:
                    await self._deliver(batch)
                    batch = []
        batch.extend(f for f in fragments if f["position"] > self.last_position)
        # Fragments from the gap fill and the message itself may overlap; keep order, once.
        seen: set[int] = set()
        ordered = []
        for f in sorted(batch, key=lambda f: f["position"]):
            if f["position"] > self.last_position and f["position"] not in seen:
                seen.add(f["position"])
                ordered.append(f)
        if ordered or sync:
            await self._deliver(ordered)

    async def _deliver(self, fragments: list[dict]) -> None:
        fragments = [f for f in fragments if f["position"] > self.last_position]
        if fragments:
            self.last_position = fragments[-1]["position"]
        if self.json_mode:
            if fragments:
                await self.send_json(
                    {
                        "type": "entries",
                        "entries": [
                            {
                                "id": f["id"],
                                "parentId": f["parent_id"],
                                "position": f["position"],
                                "type": f["type"],
                                "role": f["role"],
                            }
                            for f in fragments
                        ],
                    }
                )
            return
        parts = []
        off = 0
        for f in fragments:
            if self.tip is None or f["parent_id"] == self.tip:
                if f["item"]:
                    parts.append(html.oob_append("transcript", html.trusted(f["item"])))
                self.tip = f["id"]
            else:
                off += 1
                self.off_newest = f["id"]
        await self._send_frame(parts, len(fragments), off)

    async def _send_frame(self, rows: list, arrived: int, off: int) -> None:
        """``rows`` (rendered once for all) and this viewer's small notices: what arrived in
        the tree, what arrived on other branches, where it stands. The rows go in frames of
        bounded size (``live_frames``), the notices with the last of them."""
        notices = []
        if arrived:
            self.tree_arrived += arrived
            url = _tree_refresh_url(self.session_pk)
            notices.append(html.tree_arrivals(self.tree_arrived, url))
        if off:
            self.off_branch += off
            notices.append(html.branch_arrivals(self.off_branch, self.off_newest))
        notices.append(html.live_state(self.last_position, self.tip, self.follow))
        limit = live_frames.FRAME_BYTES - live_frames.NOTICE_BYTES
        frames = live_frames.pack((str(p) for p in rows), limit) or [""]
        frames[-1] += "".join(str(n) for n in notices)
        for frame in frames:
            await self.send_text(frame)

    async def switch_branch(self, to: Any) -> None:
        """The viewer asked to see another branch (the notice's button): its transcript
        window, drawn for this viewer only, on request."""
        target = to if isinstance(to, str) and to else self.off_newest
        if not target:
            return
        window, tip = await database_sync_to_async(_window_swap)(self.session_pk, target)
        self.tip = tip
        self.off_branch = 0
        await self.send_text(
            html.join(
                [
                    html.trusted(window),
                    html.branch_arrivals(0, ""),
                    html.live_state(self.last_position, self.tip, self.follow),
                ]
            )
        )

    async def send_running_turn(self) -> None:
        from explorer import turns

        running = turns.running_turn(self.session_pk)
        if running is None:
            self.turn_offset = None
            return
        text = running.text
        self.turn_offset = len(text)
        await self._send_turn({"event": "start", **running.describe()})
        for offset, piece in live_frames.text_pieces(text) if text else []:
            await self._send_turn(
                {"event": "delta", "text": piece, "offset": offset, "turn_id": running.turn_id}
            )

    # -- from the group --------------------------------------------------------------------

    async def live_entries(self, event: dict) -> None:
        fragments = event["entries"]
        if (
            not self.json_mode
            and self.ready
            and fragments
            and fragments[0]["position"] == self.last_position + 1
        ):
            # The common case, no gap: the frame of the chain at this viewer's tip goes out as
            # rendered once in the broadcast; the other entries are only counted.
            chain = self._chain_at_tip(event.get("chains") or [])
            if chain is not None:
                mine = set(chain["ids"])
                off = [f for f in fragments if f["id"] not in mine]
                if off:
                    self.off_newest = off[-1]["id"]
                self.last_position = fragments[-1]["position"]
                self.tip = chain["ids"][-1]
                frames = [html.trusted(frame) for frame in chain["frames"]]
                await self._send_frame(frames, len(fragments), len(off))
                return
        await self.send_entries(fragments)

    def _chain_at_tip(self, chains: list[dict]) -> dict | None:
        for chain in chains:
            if chain["from"] == self.tip or (self.tip is None and chain["from"] is None):
                return chain
        return None

    async def live_projection(self, event: dict) -> None:
        """The live meter, computed once for all viewers (``broadcast``)."""
        if not self.ready:
            return
        if self.json_mode:
            await self.send_json({"type": "projection", **event["summary"]})
        else:
            await self.send_text(event["html"])

    async def live_reset(self, event: dict) -> None:
        # Too many entries to stream (an import): say so, and skip them.
        if not self.ready:
            return
        self.last_position = max(self.last_position, event["last_position"])
        if self.json_mode:
            await self.send_json(
                {"type": "reset", "count": event["count"], "lastPosition": event["last_position"]}
            )
        else:
            await self.send_text(
                html.join(
                    [
                        html.reset_notice(event["count"]),
                        html.live_state(self.last_position, self.tip, self.follow),
                    ]
                )
            )

    async def live_cursor(self, event: dict) -> None:
        mine = self.user is not None and event.get("user_id") == self.user.pk
        if self.json_mode:
            await self.send_json(
                {
                    "type": "cursor",
                    "leafName": event["leaf_name"],
                    "entryId": event["entry_id"],
                    "mine": mine,
                }
            )
            return
        parts = [html.cursor_status(event, mine=mine)]
        if mine and not self.follow and self.ready:
            # A branch switch: show the transcript of the branch the cursor moved to.
            window, tip = await database_sync_to_async(_window_swap)(
                self.session_pk, event["entry_id"]
            )
            parts.append(html.trusted(window))
            self.tip = tip
            parts.append(html.live_state(self.last_position, self.tip, self.follow))
        await self.send_text("".join(parts))

    async def live_follow_stopped(self, event: dict) -> None:
        # The followed file was truncated or rewritten: nothing more will arrive from it.
        if self.json_mode:
            await self.send_json({"type": "followStopped", "message": event["message"]})
            return
        await self.send_text(html.follow_stopped(event["message"]))

    async def live_turn(self, event: dict) -> None:
        event = {k: v for k, v in event.items() if k != "type"}
        if event["event"] == "delta":
            offset = event.get("offset", 0)
            text = event.get("text", "")
            if self.turn_offset is None:
                self.turn_offset = offset
            if offset > self.turn_offset:
                # A delta was lost on the way (the layer drops when a viewer falls behind):
                # take the missing text from the running turn when it runs in this process.
                from explorer import turns

                running = turns.running_turn(self.session_pk)
                if running is not None and len(running.text) >= offset:
                    text = running.text[self.turn_offset : offset] + text
                    offset = self.turn_offset
            if offset + len(text) <= self.turn_offset:
                return
            text = text[self.turn_offset - offset :] if offset < self.turn_offset else text
            event["offset"] = self.turn_offset
            event["text"] = text
            self.turn_offset += len(text)
        elif event["event"] == "start":
            self.turn_offset = 0
        elif event["event"] in ("end", "error"):
            self.turn_offset = None
        await self._send_turn(event)

    async def _send_turn(self, event: dict) -> None:
        if self.json_mode:
            await self.send_json({"type": "turn", **event})
            return
        await self.send_text(html.turn_swap(event))
