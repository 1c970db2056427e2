"""The labels of a session as the reader sees them (masked), kept per session version."""

from __future__ import annotations

from explorer.models import Entry, Session
from explorer.queries.entries import shown_entry
from explorer.queries.keep import allowed_fingerprints, grown, mask_key
from explorer.session import jsonfmt


def current_labels(session: Session) -> dict[str, str]:
    """Target id → label text, the newest label entry per target winning (file order).

    Labels change only by appending, so the map is kept as the session grows
    (:func:`grown`): after an append only the new label entries are read. Callers get a
    copy they may change."""
    mask = mask_key(session)

    def extend(labels: dict[str, str], after: int, upto: int) -> dict[str, str]:
        return _read_labels(session, dict(labels), after, upto)

    kept = grown(
        session,
        f"labels|{mask}",
        lambda last: _read_labels(session, {}, -1, last),
        extend,
        stored=True,
    )
    return dict(kept)


def _read_labels(session: Session, labels: dict[str, str], after: int, upto: int) -> dict[str, str]:
    allow = allowed_fingerprints(session)
    for raw in (
        Entry.objects.filter(session=session, type="label", position__gt=after, position__lte=upto)
        .order_by("position")
        .values_list("raw", flat=True)
    ):
        try:
            d = shown_entry(jsonfmt.loads(raw), allow)
        except ValueError:
            continue
        if not isinstance(d, dict):
            continue
        target, text = d.get("targetId"), d.get("label")
        if not isinstance(target, str):
            continue
        if isinstance(text, str) and text:
            labels[target] = text
        else:
            labels.pop(target, None)
    return labels
