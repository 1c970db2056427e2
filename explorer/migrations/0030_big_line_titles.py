"""The stored row texts (``explorer.models.BigLineText``) of multi-MB replies of thinking
alone, titled again by the rule the pages use now.

0027 stored, for each line of 256 KB or more, the titles its rows show, by
``describe.entry_title`` as it was then: a reply holding only thinking (a Claude Code thinking
record, a Codex reasoning item) was titled by its stop reason ("stop"). The rule now titles
it "(thinking) <the start of its thinking>", and a page reads the stored row instead of the
line (``line_text_store.stored_texts`` checks only the masking), so on a database that stored
such a row before the rule changed the Tree, Live, Compare, Compactions and Raw vs projected
rows of that reply kept "stop" while the line's own panel said "(thinking) …".

This re-derives the titles of those rows (the five places ``analysis.line_texts.line_texts``
puts ``entry_title``: ``ctx`` at 220 characters, ``cmp`` at 110 and 100, ``list`` at 140,
``row`` at 60) with the rule written out below as it is at this migration, from the entry's
line parsed and masked as a page reads it (every secret but the session's false positives,
0027's masking); the previews and every other text of the row are left as stored. Only rows
of assistant replies are read (the entry's ``role`` column), a few lines at a time. A row
stored under another masking than the session's now is deleted when its line is such a
reply (a page ignores it anyway and parses the line; the rules it was masked with are not
known here, so its titles cannot be re-derived under them).

Going back titles those rows by the earlier rule again (their stop reason or error), so the
state is the one 0029 left, less the deleted rows (a page parses their lines).
"""

from collections.abc import Callable
from typing import Any

from django.db import connection, migrations

READ = 16  # lines read at once: a few MB each
LIMITS = {"ctx": 220, "cmp1": 110, "cmp2": 100, "list": 140, "row": 60}

Rule = Callable[[dict, int], str]


def _one_line(text: str, limit: int) -> str:
    """``describe.one_line`` at this migration: whitespace runs made one space, ends
    trimmed, cut to ``limit`` with "…" last."""
    reach = 2 * limit + 64
    while True:
        head = " ".join(text[:reach].split())
        if reach >= len(text):
            return head if len(head) <= limit else head[: limit - 1] + "…"
        if len(head) > limit:
            return head[: limit - 1] + "…"
        reach *= 2


def _thinking_only(entry: dict) -> dict | None:
    """The message of a reply holding thinking and no text, call or error (the only replies
    whose title the rule changed), else None."""
    m = entry.get("message") if entry.get("type") == "message" else None
    if not isinstance(m, dict) or m.get("role") != "assistant" or m.get("errorMessage"):
        return None
    content = m["content"] if isinstance(m.get("content"), list) else []
    blocks = [b for b in content if isinstance(b, dict)]
    if any(b.get("type") == "toolCall" for b in blocks):
        return None
    texts = [b.get("text") for b in blocks if b.get("type") == "text"]
    if any(isinstance(t, str) and t.strip() for t in texts):
        return None
    if not any(b.get("type") == "thinking" for b in blocks):
        return None
    return m


def _thinking_title(entry: dict, limit: int) -> str:
    """``describe.entry_title`` of such a reply at this migration."""
    m = _thinking_only(entry)
    assert m is not None
    thoughts = [
        b.get("thinking")
        for b in m["content"]
        if isinstance(b, dict)
        and b.get("type") == "thinking"
        and isinstance(b.get("thinking"), str)
    ]
    cut = [str(t)[: limit * 4].strip() for t in thoughts]
    return _one_line(" ".join(["(thinking)", *(t for t in cut if t)]), limit)


def _stop_title(entry: dict, limit: int) -> str:
    """``describe.entry_title`` of such a reply before the rule changed (0027's)."""
    m = _thinking_only(entry)
    assert m is not None
    return _one_line(str(m.get("errorMessage") or m.get("stopReason") or ""), limit)


def retitled(texts: dict[str, Any], entry: dict, rule: Rule) -> dict[str, Any]:
    """``texts`` (a row's stored JSON) with its five titles by ``rule``."""
    out = dict(texts)
    ctx = list(out["ctx"])
    ctx[0] = rule(entry, LIMITS["ctx"])
    cmp = list(out["cmp"])
    cmp[1], cmp[2] = rule(entry, LIMITS["cmp1"]), rule(entry, LIMITS["cmp2"])
    listed = dict(out["list"], title=rule(entry, LIMITS["list"]))
    row = list(out["row"])
    row[2] = rule(entry, LIMITS["row"])
    out.update(ctx=ctx, cmp=cmp, list=listed, row=row)
    return out


def _rederive(rule: Rule, *, drop_other_masking: bool) -> None:
    from explorer import conf
    from explorer.secrets import redact_entry
    from explorer.session import jsonfmt
    from explorer.survival_store import mask_stamp

    replies = (
        "FROM explorer_biglinetext t JOIN explorer_entry e ON e.id = t.entry_id "
        "WHERE e.type = 'message' AND e.role = 'assistant'"
    )
    with connection.cursor() as cur:
        cur.execute(f"SELECT DISTINCT t.session_id {replies} ORDER BY t.session_id")  # noqa: S608
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
                f"SELECT t.entry_id {replies} AND t.session_id = %s ORDER BY e.position",  # noqa: S608
                [session_pk],
            )
            pks = [r[0] for r in cur.fetchall()]
            for k in range(0, len(pks), READ):
                chunk = pks[k : k + READ]
                marks = ", ".join(["%s"] * len(chunk))
                cur.execute(
                    "SELECT e.id, e.raw, t.texts, t.mask FROM explorer_entry e "  # noqa: S608
                    "JOIN explorer_biglinetext t ON t.entry_id = e.id "
                    f"WHERE e.id IN ({marks})",
                    chunk,
                )
                updates, drops = [], []
                for pk, raw, stored, row_mask in cur.fetchall():
                    try:
                        value = jsonfmt.loads(raw)
                        texts = jsonfmt.loads(stored)
                    except ValueError:
                        continue
                    if not isinstance(value, dict) or not isinstance(texts, dict):
                        continue
                    shown = redact_entry(value, allow=allow, key=conf.secrets_key())
                    if _thinking_only(shown) is None:
                        continue
                    if row_mask != mask:
                        if drop_other_masking:
                            drops.append((pk,))
                        continue
                    new = jsonfmt.dumps(retitled(texts, shown, rule))
                    if new != stored:
                        updates.append((new, pk))
                if updates:
                    cur.executemany(
                        "UPDATE explorer_biglinetext SET texts = %s WHERE entry_id = %s", updates
                    )
                if drops:
                    cur.executemany("DELETE FROM explorer_biglinetext WHERE entry_id = %s", drops)


def forward(apps, schema_editor):
    _rederive(_thinking_title, drop_other_masking=True)


def backward(apps, schema_editor):
    _rederive(_stop_title, drop_other_masking=False)


class Migration(migrations.Migration):
    dependencies = [("explorer", "0029_agent_file_uses")]

    operations = [migrations.RunPython(forward, backward, elidable=False)]
