"""The reads of many survival checks at once: an import's end checks every compaction and
branch summary of the file (``explorer.survival_writer.write_checks``).

One check at a time walks its route up the stored parent links (a recursive query, as
long as the route: thousands of rows each on a big session) and reads its lines. A file's
checks share most of that: their routes share their top, their replaced entries and the
compactions above them overlap. So :class:`SessionReads` reads the session's index rows
(id, parent, type, position, key: a covering index, no line) once into arrays, walks each
route in memory, and keeps the lines it parsed for the next check (a bounded number of
characters). The answers are the database's (``queries.compactions.database_reads``): the
same route, cycle and dangling parent rules as ``light_path``, the same parse and masking
as ``load_entries``; a test checks every compaction of generated sessions both ways.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from django.db import connection

from explorer.models import Entry, SecretFinding, Session
from explorer.queries.compactions import CheckReads
from explorer.queries.entries import _Everything, _parse_into
from explorer.queries.keep import allowed_fingerprints
from explorer.queries.routes import LightEntry
from explorer.session import jsonfmt

# Characters of parsed lines kept between checks (a line longer than a quarter of it is
# parsed for its check only): the checks of one branch read the same compactions and
# overlapping replaced entries, and the import's memory stays bounded.
KEPT_CHARS = 8 * 1024 * 1024

ROUTES_KEPT = 8  # routes walked, kept for the walks below them (a list of rows each)
_NONE = -1  # no parent, or one that is not stored: the route stops there


class SessionReads:
    """:class:`~explorer.queries.compactions.CheckReads` over one read of the session's
    index rows. ``scanned``: every entry of the session was scanned for secrets by the
    current rules and its findings are stored (a new session's import, before its commit),
    so an entry without a finding is parsed without the masking pass, as the pages do once
    the session's rules are recorded."""

    def __init__(self, session: Session, *, scanned: bool = False) -> None:
        from explorer.secrets import RULES_VERSION

        self.session = session
        self.ids: list[str] = []
        self.index: dict[str, int] = {}
        self.types: list[str] = []  # one string per type, shared
        self.type_at = array("B")
        self.position = array("q")
        self.pk = array("q")
        parents: list[str | None] = []
        kinds: dict[str, int] = {}
        table = connection.ops.quote_name(Entry._meta.db_table)
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT entry_id, parent_id, type, position, id FROM {table} "
                "WHERE session_id = %s",
                [session.pk],
            )
            while rows := cur.fetchmany(5000):
                for entry_id, parent_id, kind, position, pk in rows:
                    self.index[entry_id] = len(self.ids)
                    self.ids.append(entry_id)
                    parents.append(parent_id)
                    code = kinds.get(kind)
                    if code is None:
                        code = kinds[kind] = len(self.types)
                        self.types.append(kind)
                    self.type_at.append(code)
                    self.position.append(position)
                    self.pk.append(pk)
        self.parent = array(
            "q", (self.index.get(p, _NONE) if p is not None else _NONE for p in parents)
        )
        # Parents named but not stored (a route stops there, its top row still names them).
        self.dangling = {
            i: p for i, p in enumerate(parents) if p is not None and self.parent[i] == _NONE
        }
        del parents
        self._light: list[LightEntry | None] = [None] * len(self.ids)
        self._routes: OrderedDict[int, list[LightEntry]] = OrderedDict()
        if scanned or getattr(session, "secrets_rules", None) == RULES_VERSION:
            self.holding: Any = frozenset(
                SecretFinding.objects.filter(session=session).values_list("entry_id", flat=True)
            )
        else:
            self.holding = _Everything()
        self.allow = allowed_fingerprints(session)
        self._kept: OrderedDict[str, tuple[dict | None, int]] = OrderedDict()
        self._kept_chars = 0

    def reads(self) -> CheckReads:
        return CheckReads(lines=self.lines, route=self.route, exists=self.exists)

    def exists(self, entry_id: str) -> bool:
        """``queries.routes.entry_exists``."""
        return bool(entry_id) and entry_id in self.index

    def route(self, entry_id: str) -> list[LightEntry]:
        """``queries.routes.light_path``: root→entry, up the parent links from the entry,
        stopping at a missing parent or at the first entry seen twice (a cycle). A walk
        stops early at an entry whose route it walked before (the previous compaction of
        the branch, say) and continues that route's copy."""
        at = self.index.get(jsonfmt.visible(entry_id), _NONE) if entry_id else _NONE
        parent, routes = self.parent, self._routes
        walked: list[int] = []
        above: list[LightEntry] = []
        longest = len(self.ids)
        while at != _NONE:
            known = routes.get(at)
            if known is not None:  # a route that ends at a root: no cycle below it
                routes.move_to_end(at)
                above = known
                break
            walked.append(at)
            if len(walked) > longest:  # a cycle: keep the walk up to its first repetition
                walked = _up_to_repetition(walked)
                break
            at = parent[at]
        light = self._light
        out = list(above)
        for i in reversed(walked):
            entry = light[i]
            if entry is None:
                entry = light[i] = self._light_at(i)
            out.append(entry)
        if walked and (at == _NONE or above):  # it reached a root: no cycle cut it short
            routes[walked[0]] = out
            while len(routes) > ROUTES_KEPT:
                routes.popitem(last=False)
        return list(out)

    def _light_at(self, i: int) -> LightEntry:
        parent = self.parent[i]
        return LightEntry(
            self.ids[i],
            self.ids[parent] if parent != _NONE else self.dangling.get(i),
            self.types[self.type_at[i]],
            "",
            self.position[i],
            0,
            0,
            "",
            self.pk[i],
        )

    def lines(self, ids: Iterable[str]) -> dict[str, dict]:
        """``queries.entries.load_entries(..., recorded=False)``: the parsed lines of the
        stored ``ids``, each masked when it may hold a secret; read by primary key."""
        out: dict[str, dict] = {}
        wanted: list[int] = []
        for entry_id in dict.fromkeys(i for i in ids if i):
            kept = self._kept.get(entry_id)
            if kept is not None:
                self._kept.move_to_end(entry_id)
                if kept[0] is not None:
                    out[entry_id] = kept[0]
                continue
            i = self.index.get(entry_id)
            if i is not None:
                wanted.append(i)
        table = connection.ops.quote_name(Entry._meta.db_table)
        with connection.cursor() as cur:
            for k in range(0, len(wanted), 500):
                chunk = wanted[k : k + 500]
                marks = ", ".join(["%s"] * len(chunk))
                cur.execute(
                    f"SELECT id, entry_id, raw FROM {table} WHERE id IN ({marks})",
                    [self.pk[i] for i in chunk],
                )
                for _pk, entry_id, raw in cur.fetchall():
                    parsed: dict[str, dict] = {}
                    _parse_into(parsed, entry_id, raw, self.holding, self.allow)
                    value = parsed.get(entry_id)
                    if value is not None:
                        out[entry_id] = value
                    self._keep(entry_id, value, len(raw))
        return out

    def _keep(self, entry_id: str, value: dict | None, chars: int) -> None:
        if chars > KEPT_CHARS // 4:
            return
        self._kept[entry_id] = (value, chars)
        self._kept_chars += chars
        while self._kept_chars > KEPT_CHARS:
            _old, (_value, size) = self._kept.popitem(last=False)
            self._kept_chars -= size


def _up_to_repetition(walked: list[int]) -> list[int]:
    seen: set[int] = set()
    out: list[int] = []
    for i in walked:
        if i in seen:
            break
        seen.add(i)
        out.append(i)
    return out
