"""The texts rows show of multi-MB lines, stored when the line arrives
(:class:`explorer.models.BigLineText`).

A 3.7 MB tool result shown as one row of Compactions, Compare or Raw vs projected shows a
title and a preview or two: a few hundred characters, for which the page parsed the whole
line (a third of a second per ten such lines). A line never changes, so those texts are
computed once, by the write that stores the line (the import's batches, the appends:
:class:`TextWriter`), and filled for stored sessions by migration 0027; a page reads them
(:func:`stored_texts`) instead of the line.

The texts are the masked ones a page shows, so each row holds the masking it was read with
(``survival_store.mask_stamp``: the rules, the fingerprint key, the findings marked false
positive). Under another masking, or for a line without a row (shorter than
:data:`BIG_LINE` when written, a compaction, a line that is not an object), the page parses
the line as before, with the same texts. Nothing here writes from a page.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection

from explorer import conf
from explorer.analysis.line_texts import CompareTexts, ContextTexts, RowFacts, line_texts
from explorer.key_lookups import rows_for_keys
from explorer.session import jsonfmt
from explorer.survival_store import mask_stamp

# Lines at least this long (bytes) get stored texts: the stand-in threshold of the pages
# (``explorer.queries.omitted`` reads it from here). Shorter ones cost less to parse than a
# row costs to store.
BIG_LINE = 256 * 1024
# A compaction's row may carry the context a Codex agent recorded (attached on reading, not
# in the line), so its texts are left to the page; it is a short line anyway.
SKIPPED_TYPES = frozenset(("compaction",))


@dataclass(frozen=True)
class LineTexts:
    """What the rows of the three tabs show of one line (``analysis.line_texts``)."""

    context: ContextTexts
    compare: CompareTexts
    listed: dict[str, Any]
    row: RowFacts

    @property
    def kept(self) -> dict[str, Any]:
        """The Compactions tab's kept row (``analysis.line_texts.kept_row``)."""
        return dict(self.listed)


def encode(entry: dict) -> str:
    """The stored form of ``entry``'s texts (``entry`` parsed and masked as a page reads it)."""
    return jsonfmt.dumps(line_texts(entry))


def decode(text: str) -> LineTexts:
    data = jsonfmt.loads(text)
    title, previews = data["ctx"]
    role, title_a, title_b, preview = data["cmp"]
    own_role, row_role, row_title = data["row"]
    return LineTexts(
        (title, [(r, p) for r, p in previews]),
        (role, title_a, title_b, preview),
        data["list"],
        (own_role, row_role, row_title),
    )


def row_facts_of(session: Any, ids: Iterable[str]) -> dict[str, RowFacts]:
    """:func:`~explorer.analysis.line_texts.row_facts` of each of ``ids``: the stored ones
    of big lines, the others from their parsed (masked) lines; an unknown id's are an
    empty title's. The Tree's drawn entries and the Live and Tree route rows read this."""
    from explorer.analysis.line_texts import row_facts
    from explorer.queries.entries import load_entries

    wanted = list(dict.fromkeys(i for i in ids if i))
    out = {eid: texts.row for eid, texts in stored_texts(session, wanted).items()}
    rest = [i for i in wanted if i not in out]
    data = load_entries(session, rest) if rest else {}
    out.update((i, row_facts(data.get(i, {}))) for i in rest)
    return out


def masked(value: dict, allow: frozenset[str]) -> dict:
    """``value`` as a page reads it: every secret masked but the ``allow``-ed fingerprints
    (``queries.entries.shown_entry``)."""
    from explorer.secrets import redact_entry

    return redact_entry(value, allow=allow, key=conf.secrets_key())


def false_positives(session_pk: int) -> frozenset[str]:
    """The session's fingerprints shown in clear, read fresh (a write path has no memo)."""
    from explorer.models import SecretFinding

    return frozenset(
        SecretFinding.objects.filter(
            session_id=session_pk, status=SecretFinding.FALSE_POSITIVE
        ).values_list("fingerprint", flat=True)
    )


def stored_texts(session: Any, ids: Iterable[str]) -> dict[str, LineTexts]:
    """Entry id → the stored texts of those among ``ids`` that have a row written under the
    masking the page has now (the others: none, the page parses their lines)."""
    from explorer.models import BigLineText, Entry
    from explorer.queries.keep import allowed_fingerprints

    wanted = list(dict.fromkeys(i for i in ids if i))
    if not wanted:
        return {}
    mask = mask_stamp(allowed_fingerprints(session))
    texts, entries = BigLineText._meta.db_table, Entry._meta.db_table
    # The entry's index columns only (its line is the table's last column).
    rows = rows_for_keys(
        f"SELECT e.entry_id, t.texts FROM {entries} e "  # noqa: S608
        f"JOIN {texts} t ON t.entry_id = e.id "
        "WHERE e.session_id = %s AND e.entry_id IN ({keys}) AND t.mask = %s",
        wanted,
        before=[session.pk],
        after=[mask],
    )
    return {entry_id: decode(text) for entry_id, text in rows}


class TextWriter:
    """Collects the texts of the big lines a write stores and inserts them after the lines.

    ``add`` is called with each line as it is stored (parsed, with whether the scanner found
    a secret in it, as the findings say); ``write`` inserts the rows of the lines whose
    entries are in the table by then. The masking is the session's when the first big line
    comes (a new session's: nothing allowed)."""

    def __init__(self, session_pk: int) -> None:
        self.session_pk = session_pk
        self.allow: frozenset[str] | None = None
        self.mask = ""
        self.queued: list[tuple[str, str]] = []  # (entry id as stored, texts)

    def add(self, entry_id: str, value: Any, size: int, *, secret: bool) -> None:
        if size < BIG_LINE or type(value) is not dict or value.get("type") in SKIPPED_TYPES:
            return
        if self.allow is None:
            self.allow = false_positives(self.session_pk)
            self.mask = mask_stamp(self.allow)
        self.queued.append((entry_id, encode(masked(value, self.allow) if secret else value)))

    def write(self, pks: dict[str, int] | None = None) -> int:
        """Insert the queued rows; ``pks`` (entry id → key) when the caller knows them, else
        they are read by id. Returns the rows written."""
        if not self.queued:
            return 0
        queued, self.queued = self.queued, []
        missing = [eid for eid, _ in queued if pks is None or eid not in pks]
        if missing:
            pks = {**(pks or {}), **entry_pks(self.session_pk, missing)}
        assert pks is not None
        rows = [(pks[eid], self.session_pk, text, self.mask) for eid, text in queued if eid in pks]
        insert_rows(rows)
        return len(rows)


def entry_pks(session_pk: int, ids: Sequence[str]) -> dict[str, int]:
    from explorer.models import Entry

    table = Entry._meta.db_table
    sql = f"SELECT entry_id, id FROM {table} WHERE session_id = %s AND entry_id IN ({{keys}})"  # noqa: S608
    return dict(rows_for_keys(sql, ids, before=[session_pk]))


def insert_rows(rows: Sequence[tuple[int, int, str, str]]) -> None:
    """Insert (entry key, session key, texts, mask) rows (the migration's fill too)."""
    if not rows:
        return
    with connection.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO explorer_biglinetext (entry_id, session_id, texts, mask) "
            "VALUES (%s, %s, %s, %s)",
            list(rows),
        )
