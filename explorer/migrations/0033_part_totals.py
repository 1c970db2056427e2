"""What a part of a route adds up to, as the difference of two route figure rows: the exact
sum of the costs (``exactsum`` partials), the entries of type "message" and the entries
naming a file (``RouteFigure.cost_partials``, ``message_entries``, ``file_use_entries``).
Compare then reads a route's part after the common ancestor from two rows instead of its
tens of thousands of entry rows.

Filled for stored sessions without parsing a line: each entry's stored cost and type (the
covering skeleton index) and whether it has a ``FileUse`` row are folded down the routes
with the engine's own step (``route_figures.totals_after``), parents placed as the figure
writer places them (a parent stored later waits for it, a parent never stored or a loop
makes a root). Reversible: going back drops the columns.
"""

from django.db import connection, migrations, models


def _totals(rows, naming):
    """(cost partials text, message entries, file-use entries, entry pk) of each entry of
    ``rows`` (pk, id, parent id, type, cost, position; in file order)."""
    from explorer.route_store import partials_text
    from explorer.session.route_figures import totals_after

    stored = {r[1] for r in rows}
    done: dict[str, tuple] = {}
    out: list[tuple] = []

    def settle(row, parent):
        pk, entry_id, _parent_id, kind, cost, position = row
        mine = totals_after(parent, cost or 0.0, kind, position in naming)
        done[entry_id] = mine
        out.append((partials_text(mine[0]), mine[1], mine[2], pk))

    waiting = []
    for row in rows:
        parent_id = row[2]
        if parent_id is None:
            settle(row, None)
        elif parent_id in done:
            settle(row, done[parent_id])
        else:
            waiting.append(row)
    while waiting:  # as ``FigureWriter.finish``: in file order, until nothing moves
        later, moved = [], False
        for row in waiting:
            parent_id = row[2]
            if parent_id in done:
                settle(row, done[parent_id])
            elif parent_id in stored:
                later.append(row)
                continue
            else:
                settle(row, None)  # a parent never stored: the route starts here
            moved = True
        if not moved:  # a loop of parents (and what hangs below it): roots
            for row in later:
                settle(row, None)
            break
        waiting = later
    return out


def fill(apps, schema_editor):
    Session = apps.get_model("explorer", "Session")
    q = schema_editor.quote_name
    mark = "?" if connection.vendor == "sqlite" else "%s"
    update = (
        f"UPDATE {q('explorer_routefigure')} SET cost_partials = {mark}, "
        f"message_entries = {mark}, file_use_entries = {mark} WHERE entry_id = {mark}"
    )
    for session_pk in Session.objects.order_by("pk").values_list("pk", flat=True):
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT id, entry_id, parent_id, type, cost, position FROM {q('explorer_entry')} "
                "WHERE session_id = %s ORDER BY position",
                [session_pk],
            )
            rows = cur.fetchall()
            cur.execute(
                f"SELECT position FROM {q('explorer_fileuse')} WHERE session_id = %s", [session_pk]
            )
            naming = {r[0] for r in cur.fetchall()}
        out = _totals(rows, naming)
        connection.ensure_connection()
        raw = connection.connection.cursor()
        try:
            raw.executemany(update, out)
        finally:
            raw.close()


class Migration(migrations.Migration):
    dependencies = [("explorer", "0032_previous_summary")]

    operations = [
        migrations.AddField(
            model_name="routefigure",
            name="cost_partials",
            field=models.TextField(
                blank=True,
                help_text="Exact sum of the route's costs (exactsum partials, JSON); NULL: not exact",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="routefigure",
            name="file_use_entries",
            field=models.IntegerField(
                default=0, help_text="Entries naming a file (with a FileUse row)"
            ),
        ),
        migrations.AddField(
            model_name="routefigure",
            name="message_entries",
            field=models.IntegerField(default=0, help_text="Entries of type message"),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop, elidable=False),
    ]
