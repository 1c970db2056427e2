"""The Raw vs projected tab: the aligned raw and projected context of a route, with the
alignments each process keeps to extend on a later visit.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from explorer.analysis.projection import AlignedRow, AlignedView
from explorer.line_text_store import stored_texts
from explorer.models import Session
from explorer.queries.entries import _load_by_pk, context_light, full_path, load_entries
from explorer.queries.keep import _identity_key, _stamped_list, cached, mask_key
from explorer.queries.omitted import omitted_entries
from explorer.queries.routes import LightEntry, light_path
from explorer.session.tokens import OmittedMessage

# ---------------------------------------------------------------------------------------------
# Raw versus projected


def context_summary(
    session: Session, cursor: str | None, window: int, reserve: int
) -> dict[str, Any]:
    """Raw versus projected at ``cursor``: rows and every figure, cached per session version.

    The one builder behind the page, its htmx partial and its JSON, so they cannot disagree.
    Rows cover the live range (from the newest compaction's kept entries on); the history
    folded before it is only counted here and listed page by page on request. After an
    append at the tip, the new version's summary goes on from the alignment this process
    kept for the route before it (:class:`_KeptAlignment`), so its cost is the new entries'
    and not the live range's, and its figures are still the ones a fresh build gives.
    """
    return cached(
        session,
        f"ctx:{cursor or ''}:{window}:{reserve}",
        lambda: _context_summary(session, cursor, window, reserve),
    )


def _context_summary(
    session: Session, cursor: str | None, window: int, reserve: int
) -> dict[str, Any]:
    from explorer.analysis.projection import align_projection, summarize_view
    from explorer.session.tokens import CompactionSettings

    light = light_path(session, cursor)
    kept = _session_alignments(session)
    base = _kept_alignment(kept, light)
    if base is not None:  # the kept route plus the entries appended below it
        path, start = base.path + full_path(session, light[base.fed :]), base.start
    else:
        path, start = _live_path(session, light)
    view = align_projection(
        path,
        context_window=window,
        settings=CompactionSettings(reserve_tokens=reserve),
        reuse=base.view if base is not None else None,
    )
    settings_only = len(path) - (len(light) - start)  # settings entries kept from the folded part
    shown = view.rows[settings_only:]
    summary = summarize_view(view, shown, (base.shown, base.rows) if base is not None else None)
    for row, aligned in zip(summary["rows"], shown, strict=True):
        if OMITTED not in row and isinstance(aligned.entry.get("message"), OmittedMessage):
            row[OMITTED] = True  # its texts are read when a window shows it: shown_rows
    summary["folded_count"] = start
    summary["path_length"] = len(light)
    summary["leaf_id"] = cursor
    if light and len(path) <= ALIGNMENT_MAX_PATH:
        item = _KeptAlignment(
            len(light), light[-1].entry_id, start, path, view, shown, summary["rows"]
        )
        with _ALIGNMENTS_LOCK:
            if base is not None and base in kept:
                kept.remove(base)  # the route it was made for is this one's prefix
            kept.append(item)
            del kept[:-ALIGNMENTS_KEPT]
    return summary


# A row whose entry was stood in for (``queries.omitted``): its title and preview are empty
# until :func:`shown_rows` reads the line, for the window that shows it.
OMITTED = "omitted_line"


def _live_path(session: Session, light: Sequence[LightEntry]) -> tuple[list[dict], int]:
    """:func:`~explorer.queries.entries.context_path` with the multi-MB user and tool-result
    lines stood in for by their stored estimates (``queries.omitted``): the alignment and
    every figure need only their role and estimate, and a window of rows shows their text
    (:func:`shown_rows`). The live range of the benchmark's 441 MB session held a hundred
    3.7 MB tool results, parsed on every cold request whichever rows it showed."""
    live, start = context_light(session, light)
    omitted = omitted_entries(session, live, ())
    if not omitted:
        return full_path(session, live), start
    data = _load_by_pk(session, [e for e in live if e.entry_id not in omitted])
    path: list[dict] = []
    for e in live:  # in route order, as full_path gives them (unparsed lines left out)
        entry = omitted.get(e.entry_id)
        if entry is None:
            entry = data.get(e.entry_id)
        if entry is not None:
            path.append(entry)
    return path, start


def shown_rows(session: Session, rows: Sequence[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """``rows`` (a window of :func:`context_summary`'s, named ``key``: its cursor, window,
    reserve and rows) as :func:`summary_row` makes them from the real entries: a stood-in
    row gets the title and previews of its line. Kept per session version like the summary,
    so only the first request of a window reads its lines."""
    if not any(r.get(OMITTED) for r in rows):
        return list(rows)
    return cached(session, f"ctx-rows:{key}", lambda: _read_texts(session, rows))


def _read_texts(session: Session, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each stood-in row of ``rows`` with the texts of its line: those stored with it
    (``line_text_store``), else read from the line now. Such an entry is a user or
    tool-result message no edit targets, so the messages it gives the model, when it gives
    any, are its own (``session_entry_to_context_messages``)."""
    from explorer.analysis.projection import entry_texts, summary_row_texts

    stood = [r["id"] for r in rows if r.get(OMITTED)]
    known = {eid: texts.context for eid, texts in stored_texts(session, stood).items()}
    wanted = [eid for eid in stood if eid not in known]
    for eid, entry in load_entries(session, wanted).items():
        known[eid] = entry_texts(entry)
    out = []
    for r in rows:
        if not r.get(OMITTED):
            out.append(r)
            continue
        row = {k: v for k, v in r.items() if k != OMITTED}
        texts = known.get(r["id"], entry_texts({}))
        row.update(summary_row_texts(texts, [o for o, *_ in r["projected"]]))
        out.append(row)
    return out


ALIGNMENTS_KEPT = 4  # routes whose alignment a process keeps per session
# A live range longer than this is not kept: its parsed entries (a session never compacted)
# could hold hundreds of megabytes per route, and its page is rebuilt per version as before.
ALIGNMENT_MAX_PATH = 6000


@dataclass(frozen=True, eq=False)
class _KeptAlignment:
    """A Raw vs projected alignment this process made, for the next version's request.

    After an append at the tip, the route is this one plus the new entries: its live range
    is ``path`` plus them (no compaction among them, so the fold has not moved), and the
    engine-side alignment keeps ``view``'s rows when the new entries cannot change them
    (``align_projection``'s ``reuse``). Only the new entries are then read, parsed, aligned
    and estimated: one entry, where the benchmark's 50,000-entry session has five hundred in
    its live range. Never changed once made: requests of other threads may be reading it.
    """

    fed: int  # entries of the route it was made for
    last_id: str  # the route's last entry, which determines the route
    start: int  # the live range's first index on the route (``context_path``)
    path: list[dict]  # ``context_path``'s entries, the objects ``view`` was aligned on
    view: AlignedView
    shown: list[AlignedRow]  # the rows the summary lists
    rows: list[dict[str, Any]]  # their dicts in the summary


_ALIGNMENTS: OrderedDict[str, tuple[str, list]] = OrderedDict()
_ALIGNMENTS_LOCK = threading.Lock()


def _session_alignments(session: Session) -> list[_KeptAlignment]:
    # Tied to a stamp in the shared cache like the routes: a cleared cache forgets them too;
    # the mask is in the key, since the kept entries are masked (a status change is new text).
    key = _identity_key(session, f"alignment|{mask_key(session)}")
    return _stamped_list(_ALIGNMENTS, _ALIGNMENTS_LOCK, key)


def _kept_alignment(
    kept: list[_KeptAlignment], light: Sequence[LightEntry]
) -> _KeptAlignment | None:
    """The kept alignment of the longest prefix of the route ``light`` that no compaction
    follows on it, or None. A route is determined by its last entry, so a kept route whose
    last entry sits at the same index here is this route's prefix."""
    with _ALIGNMENTS_LOCK:
        candidates = list(kept)
    best: _KeptAlignment | None = None
    for item in candidates:
        if not 0 < item.fed <= len(light) or light[item.fed - 1].entry_id != item.last_id:
            continue
        if best is None or item.fed > best.fed:
            best = item
    if best is None or any(e.type == "compaction" for e in light[best.fed :]):
        return None
    return best
