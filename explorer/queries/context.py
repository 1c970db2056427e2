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
from explorer.models import Session
from explorer.queries.entries import context_path, full_path
from explorer.queries.keep import _identity_key, _stamped_list, cached, mask_key
from explorer.queries.routes import LightEntry, light_path

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
        path, start = context_path(session, light)
    view = align_projection(
        path,
        context_window=window,
        settings=CompactionSettings(reserve_tokens=reserve),
        reuse=base.view if base is not None else None,
    )
    settings_only = len(path) - (len(light) - start)  # settings entries kept from the folded part
    shown = view.rows[settings_only:]
    summary = summarize_view(view, shown, (base.shown, base.rows) if base is not None else None)
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
