"""The stored file uses (``explorer.models.FileUse``) of Claude Code and Codex sessions,
filled again now that ``describe.file_uses`` knows their tools (``session.tool_files``).

0028 stored each entry's uses by Pi's rule alone, which names no file for a Claude Code
``Read``/``Edit``/``Write`` or a Codex ``apply_patch``, so Compare listed nothing for those
sessions. For every session whose ``agent`` is not ``pi`` (the column of 0020), this drops
its rows and writes what the engine's ``file_uses`` gives for each line whose route figure
counts more tool calls than its parent's (the tool-calling replies, found as 0028 finds
them), with raw SQL on this state's tables, a page of lines at a time.

0028 runs today's ``file_uses`` too, so a database migrated from before 0028 has these rows
already and this writes the same again; it is for the databases that ran 0028 before.

Pi sessions are left alone: their tools' answer did not change. (A Pi session whose own
extension tools reuse a Claude Code or Codex tool name would be answered by the new rule on
a new import; its rows stored before this keep 0028's answer.)

Going back writes the foreign sessions' rows again by 0028's rule (Pi's read/edit/write
with ``path``, written out below), so the state is the one 0028 left.
"""

import json
from collections.abc import Callable

from django.db import connection, migrations

PAGE = 500  # lines read per query

Rule = Callable[[dict], list]


def _pi_rule(value: dict) -> list:
    """``describe.file_uses`` as it was at 0028 (Pi's tools only), for going back."""
    kinds = {"read": "read", "write": "modified", "edit": "modified"}
    m = value.get("message") if value.get("type") == "message" else None
    if not isinstance(m, dict) or m.get("role") != "assistant":
        return []
    out = []
    for block in m["content"] if isinstance(m.get("content"), list) else []:
        if not isinstance(block, dict) or block.get("type") != "toolCall":
            continue
        kind = kinds.get(block.get("name")) if isinstance(block.get("name"), str) else None
        args = block.get("arguments")
        path = args.get("path") if isinstance(args, dict) else None
        if kind and isinstance(path, str) and path:
            out.append((kind, path))
    return out


def _refill(rule: Rule) -> None:
    from explorer.session import jsonfmt

    calling = (
        "SELECT e.position, e.raw FROM explorer_entry e "
        "JOIN explorer_routefigure f ON f.entry_id = e.id "
        "LEFT JOIN explorer_entry p ON p.session_id = e.session_id AND p.entry_id = e.parent_id "
        "LEFT JOIN explorer_routefigure pf ON pf.entry_id = p.id "
        "WHERE e.session_id = %s AND e.position > %s "
        "AND f.tool_calls > COALESCE(pf.tool_calls, 0) "
        "ORDER BY e.position LIMIT %s"
    )
    insert = "INSERT INTO explorer_fileuse (session_id, position, uses) VALUES (%s, %s, %s)"
    with connection.cursor() as cur:
        cur.execute("SELECT id FROM explorer_session WHERE agent <> 'pi' ORDER BY id")
        sessions = [r[0] for r in cur.fetchall()]
        for session_pk in sessions:
            cur.execute("DELETE FROM explorer_fileuse WHERE session_id = %s", [session_pk])
            after = -1
            while True:
                cur.execute(calling, [session_pk, after, PAGE])
                rows = cur.fetchall()
                if not rows:
                    break
                out = []
                for position, raw in rows:
                    try:
                        value = jsonfmt.loads(raw)
                    except ValueError:
                        continue
                    uses = rule(value) if isinstance(value, dict) else []
                    if uses:
                        out.append((session_pk, position, json.dumps(uses)))
                if out:
                    cur.executemany(insert, out)
                after = rows[-1][0]


def forward(apps, schema_editor):
    from explorer.session.describe import file_uses

    _refill(file_uses)


def backward(apps, schema_editor):
    _refill(_pi_rule)


class Migration(migrations.Migration):
    dependencies = [("explorer", "0028_file_uses")]

    operations = [migrations.RunPython(forward, backward, elidable=False)]
