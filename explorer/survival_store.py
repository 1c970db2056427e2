"""The stored survival checks of compactions and branch summaries
(:class:`explorer.models.SurvivalCheck`).

A check depends only on what lies above its entry (the entries it replaced and its summary;
for a branch summary, the route it summarised), so it is computed once, when the entry is
stored (``explorer.survival_writer.write_checks``, from an import's end and from an
append), and read by every Compactions page after (:func:`stored_report`). The values are the masked ones a page
shows, so a row holds the masking it was read with (:func:`mask_stamp`). Nothing here
writes from a page: an entry without a row, or with one read under another masking (a
finding marked a false positive since), is checked on the page, with the same figures.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from explorer import conf
from explorer.analysis.compactions import SurvivalItem, SurvivalReport
from explorer.session import jsonfmt

CHECKED_TYPES = ("compaction", "branch_summary")


def encode(report: SurvivalReport) -> str:
    return jsonfmt.dumps(_items(report))


def decode(text: str) -> SurvivalReport:
    return _report(jsonfmt.loads(text))


def _items(report: SurvivalReport) -> list[list[Any]]:
    """A report as stored: its items as [kind, value, kept, partial]."""
    return [[i.kind, i.value, i.survived, i.partial] for i in report.items]


def _report(items: list[list[Any]]) -> SurvivalReport:
    return SurvivalReport([SurvivalItem(str(k), str(v), bool(s), bool(p)) for k, v, s, p in items])


def mask_stamp(allowed: Iterable[str]) -> str:
    """What decides how the check's values were masked: the rules (an entry without a
    finding under them has nothing to mask), the fingerprint key and the fingerprints
    shown in clear (``allowed``: the session's findings marked false positive)."""
    from explorer.secrets import RULES_VERSION

    digest = hashlib.sha256(RULES_VERSION.encode() + b"\n" + conf.secrets_key())
    for fingerprint in sorted(allowed):
        digest.update(b"\n" + fingerprint.encode())
    return digest.hexdigest()[:32]


def stored_report(session: Any, entry_pk: int) -> SurvivalReport | None:
    """The stored check of the entry with primary key ``entry_pk``, read under the masking
    the page has now (None: not stored, or stored under another masking)."""
    row = stored_check(session, entry_pk)
    return None if row is None else row.report


@dataclass(frozen=True)
class StoredCheck:
    """A compaction's or branch summary's stored row as a page reads it: the survival check
    and, for a compaction, its summary beside the previous one (``previous``:
    :func:`decode_previous`'s value, None for none before it; :data:`NOT_STORED` when the
    row does not hold it)."""

    report: SurvivalReport
    previous: dict[str, Any] | None | object


NOT_STORED = object()


def encode_previous(previous: dict[str, Any] | None) -> str:
    """A compaction's comparison with the previous summary (``queries.compactions
    .compare_summaries``: the previous compaction's id, the word diff, the references it
    dropped), or None for none before it, as stored (JSON ``null`` for none)."""
    if previous is None:
        return "null"
    return jsonfmt.dumps(
        {
            "id": previous["id"],
            "diff": [[op, text] for op, text in previous["diff"]],
            "dropped": _items(previous["dropped"]),
        }
    )


def decode_previous(text: str) -> dict[str, Any] | None:
    """What :func:`encode_previous` stored, as the page uses it (with ``lost``: the
    references dropped)."""
    value = jsonfmt.loads(text)
    if value is None:
        return None
    dropped = _report(value["dropped"])
    return {
        "id": str(value["id"]),
        "diff": [(str(op), str(t)) for op, t in value["diff"]],
        "dropped": dropped,
        "lost": [i for i in dropped.items if not i.survived],
    }


def stored_check(session: Any, entry_pk: int) -> StoredCheck | None:
    """The stored row of the entry with primary key ``entry_pk``, read under the masking
    the page has now (None: not stored, or stored under another masking)."""
    from explorer.models import SurvivalCheck
    from explorer.queries.keep import allowed_fingerprints

    if not entry_pk:
        return None
    row = (
        SurvivalCheck.objects.filter(pk=entry_pk).values_list("report", "mask", "previous").first()
    )
    if row is None or row[1] != mask_stamp(allowed_fingerprints(session)):
        return None
    previous = NOT_STORED if row[2] is None else decode_previous(row[2])
    return StoredCheck(decode(row[0]), previous)
