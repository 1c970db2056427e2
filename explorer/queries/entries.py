"""Entries as a page shows them: loading rows of a route, parsed and with secrets masked
for the reader, the whole-path and context-path loads, and the raw bytes of a path.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connection
from django.db.models import OuterRef, QuerySet, Subquery

from explorer import codex_context, conf
from explorer.analysis.recorded import RECORDED
from explorer.models import Entry, SecretFinding, Session
from explorer.queries.keep import allowed_fingerprints, cached
from explorer.queries.routes import BY_PARENT_COLS, LightEntry, light_path
from explorer.secrets import redact_entry, redact_line
from explorer.session import jsonfmt

# ---------------------------------------------------------------------------------------------
# The masking edge: every entry a page, partial, JSON response, live frame or search shows is
# parsed by `shown_entry` (or `shown_raw` for the raw line), which masks each secret except
# those marked false positive. The engine's own reads (`path_bytes`, storage) stay raw.


def shown_entry(data: Any, allow: frozenset[str] = frozenset()) -> Any:
    """An entry as the pages may show it: every secret masked but those in ``allow``."""
    return redact_entry(data, allow=allow, key=conf.secrets_key())


def shown_raw(raw: str, allow: frozenset[str] = frozenset()) -> str:
    """The raw JSON line as the entry panel may show it (masked, else unchanged)."""
    line = raw.encode("utf-8", "surrogatepass")
    masked = redact_line(line, allow=allow, key=conf.secrets_key())
    return raw if masked is line else masked.decode("utf-8", "surrogatepass")


def shown_row(row: Entry, allow: frozenset[str] | None = None) -> dict:
    """``row.data()`` masked; ``allow`` defaults to the session's false positives (read only
    when the entry holds a secret, so a row without one costs no query)."""
    data = row.data()
    if allow is not None:
        return shown_entry(data, allow)
    masked = shown_entry(data)
    if masked is data:
        return data
    return shown_entry(data, allowed_fingerprints(row.session_id))


def load_entries(session: Session, ids: Iterable[str], *, recorded: bool = True) -> dict[str, dict]:
    """Parsed entries for the given ids (chunked IN queries), secrets masked. ``recorded``:
    a Codex compaction carries its recorded context (False: the line alone, for a write
    path, which must not read the session's file before the import has stored it)."""
    wanted = list(dict.fromkeys(i for i in ids if i))
    out: dict[str, dict] = {}
    if not wanted:
        return out
    allow = allowed_fingerprints(session)
    holding = entries_with_secrets(session)
    for k in range(0, len(wanted), 500):
        chunk = wanted[k : k + 500]
        # No ORDER BY: the model's default ordering joins the session table and makes the
        # planner walk the session by position instead of looking the ids up.
        rows = Entry.objects.filter(session=session, entry_id__in=chunk).order_by()
        for eid, raw in rows.values_list("entry_id", "raw"):
            _parse_into(out, eid, raw, holding, allow)
    return _with_recorded_context(session, out) if recorded else out


def _with_recorded_context(session: Session, entries: dict[str, dict]) -> dict[str, dict]:
    """``entries`` (loaded, masked) with each Codex compaction's recorded context
    (``codex_context.recorded_histories``) attached to a copy of its entry, masked like the
    entry: what the model saw after that compaction. Anything else is returned unchanged."""
    if session.agent != "codex" or not session.compaction_count:
        return entries
    wanted = [eid for eid, e in entries.items() if e.get("type") == "compaction"]
    if not wanted:
        return entries
    histories = codex_context.recorded_histories(session)
    if not histories:
        return entries
    allow = allowed_fingerprints(session)
    for eid in wanted:
        recorded = histories.get(eid)
        if recorded is not None:
            entries[eid] = shown_entry({**entries[eid], RECORDED: recorded}, allow)
    return entries


def _parse_into(out: dict[str, dict], eid: str, raw: str, holding: Any, allow: Any) -> None:
    """One stored line parsed into ``out[eid]``, masked when it holds a secret (the one
    parse-and-mask step of :func:`load_entries` and :func:`full_path`)."""
    try:
        data = jsonfmt.loads(raw)
    except ValueError:
        return
    if isinstance(data, dict):
        out[eid] = data if eid not in holding else shown_entry(data, allow)


def _load_by_pk(session: Session, light: Sequence[LightEntry]) -> dict[str, dict]:
    """:func:`load_entries` for rows whose primary keys are known (a route's index rows).

    The rows are looked up by primary key alone, which SQLite answers from the table
    itself: a thousand entries of a long route in about a third of the time the
    (session, entry id) index takes, and adding the session to the WHERE clause makes the
    planner walk the whole session instead. The session and entry id of every row are
    checked here; an entry whose row does not match (or without a key) is read by id."""
    out: dict[str, dict] = {}
    if not light:
        return out
    allow = allowed_fingerprints(session)
    holding = entries_with_secrets(session)
    expected = {e.pk: e.entry_id for e in light if e.pk}
    pks = list(expected)
    table = Entry._meta.db_table
    found: set[str] = set()
    session_pk = session.pk  # a property: read once, not per row
    with connection.cursor() as cur:
        for k in range(0, len(pks), 500):
            chunk = pks[k : k + 500]
            marks = ",".join(["%s"] * len(chunk))
            cur.execute(
                f"SELECT id, session_id, entry_id, raw FROM {table} WHERE id IN ({marks})", chunk
            )
            for pk, session_id, eid, raw in cur.fetchall():
                if session_id == session_pk and expected.get(pk) == eid:
                    found.add(eid)
                    _parse_into(out, eid, raw, holding, allow)
    missing = [e.entry_id for e in light if e.entry_id not in found]
    if missing:
        out.update(load_entries(session, missing))
    return _with_recorded_context(session, out)


class _Everything:
    """Stands for "every entry may hold a secret" when the findings cannot be trusted."""

    def __contains__(self, item: object) -> bool:
        return True


def entries_with_secrets(session: Session) -> Any:
    """The ids of the entries the scanner found a secret in (a set), or a stand-in that
    holds every id when the session's findings predate the current rules.

    The findings are made by the same scanner the masking runs, over every entry at import
    and at each append, so an entry without a finding has nothing to mask: masking only the
    others keeps the read of a long route from scanning every string of it again. Until a
    rules change has been rescanned, every entry is masked, as before."""
    from explorer.secrets import RULES_VERSION

    if getattr(session, "secrets_rules", None) != RULES_VERSION:
        return _Everything()
    return cached(
        session,
        f"secret-entries:{RULES_VERSION}",
        lambda: frozenset(
            SecretFinding.objects.filter(session=session).values_list("entry_id", flat=True)
        ),
    )


def full_path(session: Session, light: Sequence[LightEntry]) -> list[dict]:
    """The parsed entries of ``light`` in its order (those that parse to an object)."""
    data = _load_by_pk(session, light)
    return [data[e.entry_id] for e in light if e.entry_id in data]


def context_path(session: Session, light: Sequence[LightEntry]) -> tuple[list[dict], int]:
    """The part of a path that can still reach the model, parsed; and its start on the path.

    Everything before the newest compaction's first kept entry is folded into that
    compaction: only settings entries there still matter (the newest of each kind is kept,
    since settings are restored over the whole path). Returns (entries, index of the first
    entry of the live range in `light`).
    """
    chosen, start = context_light(session, light)
    return full_path(session, chosen), start


def context_light(session: Session, light: Sequence[LightEntry]) -> tuple[list[LightEntry], int]:
    """:func:`context_path`'s entries before they are parsed, and its start: for a caller
    that parses them together with others (Compare: two routes and their live ranges)."""
    comp = next((i for i in range(len(light) - 1, -1, -1) if light[i].type == "compaction"), -1)
    if comp < 0:
        return list(light), 0
    comp_entry = load_entries(session, [light[comp].entry_id]).get(light[comp].entry_id, {})
    fk = comp_entry.get("firstKeptEntryId")
    start = next((i for i in range(comp) if light[i].entry_id == fk), comp)
    # Settings are restored over the whole path: keep the newest thinking-level change and
    # the newest model-setting entry (a model change, or an assistant reply, which overrides
    # it) before the live range. Only the assistant search needs roles, so only it queries.
    head = light[:start]
    thinking = next((e for e in reversed(head) if e.type == "thinking_level_change"), None)
    model_change_i = next(
        (i for i in range(len(head) - 1, -1, -1) if head[i].type == "model_change"), -1
    )
    settings_ids: list[str] = [thinking.entry_id] if thinking else []
    assistant_id = None
    messages = [i for i in range(len(head) - 1, model_change_i, -1) if head[i].type == "message"]
    for k in range(0, len(messages), 16):
        chunk = [head[i].entry_id for i in messages[k : k + 16]]
        # A column the covering skeleton index does not hold (``BY_PARENT_COLS``): else
        # SQLite, without table statistics, walks the whole session with that index to
        # find 16 ids (20 ms on 50,000 entries) instead of looking each one up.
        found = {
            eid
            for eid, *_ in Entry.objects.filter(
                session=session, entry_id__in=chunk, role="assistant"
            )
            .order_by()
            .values_list("entry_id", *BY_PARENT_COLS)
        }
        assistant_id = next((c for c in chunk if c in found), None)
        if assistant_id:
            break
    if assistant_id:
        settings_ids.append(assistant_id)
    elif model_change_i >= 0:
        settings_ids.append(head[model_change_i].entry_id)
    chosen = [e for e in light[:start] if e.entry_id in settings_ids] + list(light[start:])
    return chosen, start


# ---------------------------------------------------------------------------------------------
# Paths as the engine reads them


def path_pks(session: Session, entry_id: str | None) -> list[int]:
    """Primary keys root → ``entry_id`` (the route query, cycle-safe)."""
    return [e.pk for e in light_path(session, entry_id)]


def path_rows(session: Session, entry_id: str | None, *, light: bool = False) -> list[Entry]:
    """``Entry`` rows root → ``entry_id``; ``light`` skips the raw payload."""
    pks = path_pks(session, entry_id)
    if not pks:
        return []
    qs = Entry.objects.filter(pk__in=pks)
    if light:
        qs = qs.light()
    by_pk = {e.pk: e for e in qs}
    return [by_pk[pk] for pk in pks]


def path_to(session: Session, entry_id: str | None) -> list[dict]:
    """Parsed entries root → ``entry_id`` (the engine's ``get_branch`` of a stored session);
    ``[]`` for None or an unknown id."""
    return [row.data() for row in path_rows(session, entry_id)]


def header_line(session: Session) -> bytes:
    return session.header_raw.encode("utf-8", errors="surrogatepass") + b"\n"


def path_bytes(session: Session, entry_id: str | None, extra_ids: Iterable[str] = ()) -> bytes:
    """A session file holding the header, one path and a few more entries (e.g. the target
    of an edit), in file order: what a manager needs to append at ``entry_id`` without
    reading the whole session."""
    pks = set(path_pks(session, entry_id))
    extra = [e for e in extra_ids if isinstance(e, str)]
    if extra:
        pks.update(
            Entry.objects.filter(session=session, entry_id__in=extra)
            .order_by()
            .values_list("pk", flat=True)
        )
    parts = [header_line(session)]
    rows = Entry.objects.filter(pk__in=pks).order_by("position").values_list("raw", flat=True)
    for raw in rows:
        parts.append(raw.encode("utf-8", errors="surrogatepass") + b"\n")
    return b"".join(parts)


def entries_bytes(session: Session, entry_ids: Iterable[str]) -> bytes:
    """A session file holding the header and only these entries, in file order."""
    wanted = {e for e in entry_ids if isinstance(e, str)}
    parts = [header_line(session)]
    if wanted:
        # By the id index, sorted here: ordering by position in SQL makes SQLite walk the
        # session's position index to find a handful of ids.
        rows = sorted(
            Entry.objects.filter(session=session, entry_id__in=wanted)
            .order_by()
            .values_list("position", "raw")
        )
        parts.extend(raw.encode("utf-8", errors="surrogatepass") + b"\n" for _, raw in rows)
    return b"".join(parts)


def _first_user_raw(session_ref: Any) -> QuerySet[Entry]:
    """The raw line of a session's first user message (file order), at most one row."""
    first = Entry.objects.filter(session=session_ref, type="message", role="user")
    return first.order_by("position").values("raw")[:1]


def with_first_message(qs: QuerySet[Session]) -> QuerySet[Session]:
    """Adds `first_message_raw`, so listing many sessions' titles costs no query per row."""
    return qs.annotate(first_message_raw=Subquery(_first_user_raw(OuterRef("pk"))))


def importing_pks() -> list[int]:
    """Sessions whose first import is still committing batches: hidden from every page
    (``models.ReadyManager``), so cross-session reads of their rows leave them out too."""
    return list(Session.every.filter(state=Session.IMPORTING).values_list("pk", flat=True))
