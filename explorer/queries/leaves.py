"""The leaf picker's choices: the newest leaves of a session with their labels."""

from __future__ import annotations

from collections.abc import Sequence

from explorer.models import Entry, Session
from explorer.queries.entries import load_entries
from explorer.queries.keep import _last_position, cached, grown, mask_key
from explorer.queries.labels import current_labels
from explorer.session.describe import entry_title

# ---------------------------------------------------------------------------------------------
# The leaf picker (Raw vs projected, Compare)


def leaf_choices(session: Session, limit: int = 200) -> list[dict[str, str]]:
    """The newest leaves and every labelled entry, as choices for a leaf picker.

    One list shared by every picker (raw vs projected, compare) so they offer the same
    routes in the same words; cached per session version (the titles read raw lines)."""
    return cached(session, f"leafchoices:{limit}", lambda: _leaf_choices(session, limit))


LEAVES_KEPT = 400  # newest leaves kept, so the ones later appends end leave enough to list


def _leaf_choices(session: Session, limit: int) -> list[dict[str, str]]:
    complete, leaves = _newest_leaves(session, limit)
    out = [{"id": eid, "title": f"{eid} · {role or kind} · {title}"} for eid, kind, role, title in leaves[:limit]]  # fmt: skip
    out += [
        {"id": t, "title": f"\u2691 {text} ({t})"} for t, text in current_labels(session).items()
    ]
    return out


def _newest_leaves(session: Session, limit: int) -> tuple[bool, list[tuple[str, str, str, str]]]:
    """(all leaves listed, [(id, type, role, title)] newest first), kept current by the
    appended rows (:func:`grown`): an append ends at most its parent's leafhood and adds its
    own, so the list is the kept one less the new rows' parents plus the new childless rows.
    Reading the leaves again would step over every raw line (the child count sits after it).
    """

    def titled(rows: Sequence[tuple[str, str, str]]) -> list[tuple[str, str, str, str]]:
        data = load_entries(session, [r[0] for r in rows])
        return [(r[0], r[1], r[2] or "", entry_title(data.get(r[0], {}), 50)) for r in rows]

    def build(last: int, n: int = 0) -> tuple[bool, list[tuple[str, str, str, str]]]:
        n = max(n, LEAVES_KEPT)
        rows = list(
            Entry.objects.filter(session=session, child_count=0, position__lte=last)
            .order_by("-position")
            .values_list("entry_id", "type", "role")[:n]
        )
        return len(rows) < n, titled(rows)

    def extend(value: tuple, after: int, last: int) -> tuple[bool, list]:
        complete, leaves = value
        new = list(
            Entry.objects.filter(session=session, position__gt=after, position__lte=last)
            .order_by("-position")
            .values_list("entry_id", "parent_id", "type", "role")
        )
        parents = {r[1] for r in new}
        kept = [leaf for leaf in leaves if leaf[0] not in parents]
        out = titled([(r[0], r[2], r[3]) for r in new if r[0] not in parents]) + kept
        if not complete and len(out) < max(limit, LEAVES_KEPT // 2):
            return build(last)  # too few of the kept ones left to be sure of the newest
        if len(out) > LEAVES_KEPT:
            return False, out[:LEAVES_KEPT]
        return complete, out

    complete, leaves = grown(session, f"leaves|{mask_key(session)}", build, extend, stored=True)
    if not complete and len(leaves) < limit:
        return build(_last_position(session), limit)  # more asked for than are kept
    return complete, leaves
