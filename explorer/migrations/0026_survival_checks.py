"""The survival check of each compaction and branch summary, stored with the entry
(``explorer.models.SurvivalCheck``), and filled for the sessions stored before.

The fill reads the historical table with raw SQL: per session, the id, parent and type of
every entry (no line), each checked entry's route walked up in memory, then the lines the
check reads (the newest replaced entries, the summary), and computes the report with the
analysis the pages use (``explorer.analysis.compactions``), as ``explorer.queries.compactions``
does from a route, every line masked as a page reads it: the same rows an import writes
today. An entry it cannot check (a branch
summary whose ``fromId`` is not stored) gets no row and is checked on the page, as before.
"""

import django.db.models.deletion
from django.db import connection, migrations, models

CHECKED = ("compaction", "branch_summary")
SHOWN = 150  # explorer.queries.compactions.REPLACED_SHOWN when this was written


def _route(at, rows):
    """Root→``at`` (entry id, type) walked up the stored parents, stopping on a repetition
    or a dangling parent (as ``light_path`` does)."""
    out, seen = [], set()
    while at is not None and at in rows and at not in seen:
        seen.add(at)
        out.append(at)
        at = rows[at][0]
    out.reverse()
    return out


def _lines(cur, session_pk, ids, allow):
    """The parsed lines of ``ids`` masked as a page reads them (every secret but the
    ``allow``-ed fingerprints; a line without a secret comes back as it is)."""
    from explorer import conf
    from explorer.secrets import redact_entry
    from explorer.session import jsonfmt

    out = {}
    ids = list(dict.fromkeys(ids))
    for k in range(0, len(ids), 500):
        chunk = ids[k : k + 500]
        marks = ", ".join(["%s"] * len(chunk))
        cur.execute(
            f"SELECT entry_id, raw FROM explorer_entry WHERE session_id = %s "
            f"AND entry_id IN ({marks})",
            [session_pk, *chunk],
        )
        for entry_id, raw in cur.fetchall():
            try:
                value = jsonfmt.loads(raw)
            except ValueError:
                value = {}
            if isinstance(value, dict):
                out[entry_id] = redact_entry(value, allow=allow, key=conf.secrets_key())
    return out


def _compaction(cur, session_pk, route, rows, allow):
    from explorer.analysis.compactions import (
        extend_compaction_ranges,
        replaced_indices,
        survival_of,
    )

    types = [rows[i][1] for i in route]
    comps = [k for k, t in enumerate(types) if t == "compaction"]
    data = _lines(cur, session_pk, [route[k] for k in comps], allow)
    index = {entry_id: k for k, entry_id in enumerate(route)}
    fks = [(k, data.get(route[k], {}).get("firstKeptEntryId")) for k in comps]
    ranges, _start = extend_compaction_ranges(fks, index, 0)
    rng = ranges[-1]
    checked = replaced_indices(types, rng)[-SHOWN:]
    lines = _lines(cur, session_pk, [route[j] for j in checked], allow)
    summary = data.get(route[-1], {}).get("summary")
    entries = [lines[route[j]] for j in checked if route[j] in lines]
    return survival_of(entries, summary if isinstance(summary, str) else "")


def _branch_summary(cur, session_pk, route, rows, allow):
    from explorer.analysis.compactions import survival_of

    entry = _lines(cur, session_pk, [route[-1]], allow).get(route[-1], {})
    summary = entry.get("summary") if isinstance(entry.get("summary"), str) else ""
    from_id = entry.get("fromId") if isinstance(entry.get("fromId"), str) else ""
    if from_id and from_id not in rows:
        return None
    left = _route(from_id, rows) if from_id else []
    on_route = set(route)
    common = max((k for k, e in enumerate(left) if e in on_route), default=-1)
    shown = left[common + 1 :][-SHOWN:]
    lines = _lines(cur, session_pk, shown, allow)
    entries = [lines[e] for e in shown if e in lines]
    return survival_of(entries, summary, left)


def fill(apps, schema_editor):
    from explorer.session import jsonfmt
    from explorer.survival_store import mask_stamp

    with connection.cursor() as cur:
        cur.execute(
            "SELECT DISTINCT session_id FROM explorer_entry WHERE type IN (%s, %s)", list(CHECKED)
        )
        sessions = [r[0] for r in cur.fetchall()]
        for session_pk in sessions:
            cur.execute(
                "SELECT fingerprint FROM explorer_secretfinding "
                "WHERE session_id = %s AND status = %s",
                [session_pk, "false_positive"],
            )
            allow = frozenset(r[0] for r in cur.fetchall())
            mask = mask_stamp(allow)
            cur.execute(
                "SELECT id, entry_id, parent_id, type FROM explorer_entry WHERE session_id = %s",
                [session_pk],
            )
            rows, pks = {}, {}
            for pk, entry_id, parent_id, kind in cur.fetchall():
                rows[entry_id] = (parent_id, kind)
                pks[entry_id] = pk
            out = []
            for entry_id, (_parent, kind) in rows.items():
                if kind not in CHECKED:
                    continue
                route = _route(entry_id, rows)
                if not route or route[-1] != entry_id:
                    continue
                check = _compaction if kind == "compaction" else _branch_summary
                report = check(cur, session_pk, route, rows, allow)
                if report is None:
                    continue
                items = [[i.kind, i.value, i.survived, i.partial] for i in report.items]
                out.append((pks[entry_id], session_pk, jsonfmt.dumps(items), mask))
            for k in range(0, len(out), 500):
                cur.executemany(
                    "INSERT INTO explorer_survivalcheck (entry_id, session_id, report, mask) "
                    "VALUES (%s, %s, %s, %s)",
                    out[k : k + 500],
                )


class Migration(migrations.Migration):
    dependencies = [("explorer", "0025_session_cost_sum")]

    operations = [
        migrations.CreateModel(
            name="SurvivalCheck",
            fields=[
                (
                    "entry",
                    models.OneToOneField(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        primary_key=True,
                        related_name="survival_check",
                        serialize=False,
                        to="explorer.entry",
                    ),
                ),
                (
                    "report",
                    models.TextField(
                        help_text="The report's items as JSON: [kind, value, kept, partial]"
                    ),
                ),
                (
                    "mask",
                    models.CharField(
                        help_text="The masking it was read with (survival_store.mask_stamp): "
                        "another one, and the page checks the entry itself",
                        max_length=64,
                    ),
                ),
                (
                    "session",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="explorer.session",
                    ),
                ),
            ],
        ),
        migrations.RunPython(fill, migrations.RunPython.noop, elidable=False),
    ]
