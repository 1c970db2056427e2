"""Importing Claude Code and Codex files: stored as the Pi file the engine writes for them.

Every page reads stored Pi entries, so a foreign session is stored as its Pi form
(`explorer.session.formats.pi_form`), through the same import as Pi files: idempotent (same
file, same Pi form, nothing added) and incremental (a grown file adds its new entries). The
original bytes are kept on the session (`source_original`) and are what the session's
original export returns, byte for byte; the stored id starts with the agent's name
(and `Session.agent` says whose file it is), and the problems the format's reading rules found are stored with the
original file's line numbers.
"""

from __future__ import annotations

import os

from django.db.models import QuerySet

from explorer import codex_forks, files, services
from explorer.files.imports import ImportResult
from explorer.files.scan import Problem
from explorer.files.store import _save_problems, _update_warning_count
from explorer.models import Entry, ImportProblem, Session
from explorer.queries.recorded import recorded_checks
from explorer.session.formats import (
    ForeignSession,
    detect_bytes,
    detect_format,
    load_foreign,
    load_foreign_bytes,
)
from explorer.session.formats.codex import CodexSession, first_typed_turn
from explorer.session.formats.pi_form import pi_bytes, split_records, stored_session_id

__all__ = [
    "continuations",
    "continued_from",
    "filter_by_agent",
    "import_agent_bytes",
    "import_agent_file",
    "is_agent_file",
    "reading_rule_sections",
]

# The reading rules' findings the Integrity tab lists, per agent: (key, title, help, codes).
# They are found when the file is read (its tree as the agent wrote it), so the engine's
# checks of the stored Pi form, where they are already resolved, never see them.
_RULE_SECTIONS: dict[str, tuple[tuple[str, str, str, frozenset[str]], ...]] = {
    "claude-code": (
        (
            "cc-duplicates",
            "Duplicate uuids",
            "Records repeating an earlier uuid; the first copy is read (R2). /branch on a"
            " compacted session and repeated /compact copy the pre-compaction messages this way.",
            frozenset({"duplicate-id"}),
        ),
        (
            "cc-dangling",
            "Dangling parents in the file",
            "parentUuid names no record of the file; read as a root (R4).",
            frozenset({"dangling-parent"}),
        ),
        (
            "cc-cycles",
            "Cycles in the file",
            "parentUuid links that loop; the member first in the file is read as a root (R5).",
            frozenset({"cycle"}),
        ),
        (
            "cc-compactions",
            "Compactions not linked",
            "A compact boundary without its logical parent or its summary record (R6).",
            frozenset({"compaction-unlinked", "compaction-no-summary"}),
        ),
    ),
    "codex": (
        (
            "codex-compaction-history",
            "Compaction history against the route",
            "Each compaction's recorded replacement history checked against the route it"
            " ends: a kept user message not typed earlier on the route.",
            frozenset({"compaction-history"}),
        ),
        (
            "codex-rollbacks",
            "Rollbacks past the start",
            "A rollback asks for more turns than the route holds (X4).",
            frozenset({"rollback-too-far"}),
        ),
        (
            "codex-orphans",
            "Tool outputs without their call",
            "A function call output whose call id no earlier call carries.",
            frozenset({"orphan-output"}),
        ),
    ),
}


def filter_by_agent(sessions: QuerySet, agent: str) -> QuerySet:
    """The sessions of one agent ("pi", "claude-code", "codex"; anything else: all), by the
    `Session.agent` column."""
    if agent in ("pi", "claude-code", "codex"):
        return sessions.filter(agent=agent)
    return sessions


def is_agent_file(path: str) -> bool:
    """True for a Claude Code or Codex file (by content)."""
    return detect_format(path) in ("claude-code", "codex")


def import_agent_file(
    path: str, *, user=None, source_path: str | None = None, source: str = "import"
) -> ImportResult:
    """Import one Claude Code or Codex file; the result is the Pi import's, with the reading
    rules' findings added as warnings (they never block: R1/X1 read around damage)."""
    shown = source_path or os.path.abspath(path)
    fmt = detect_format(path)
    if fmt not in ("claude-code", "codex"):
        return files.refused("not-agent-file", f"{shown}: not a Claude Code or Codex session")
    try:
        foreign = load_foreign(path, fmt)
    except OSError as exc:
        return files.refused("unreadable", f"Cannot read {shown}: {exc}")
    return _import_foreign(foreign, shown, user, source)


def import_agent_bytes(
    data: bytes,
    *,
    name: str,
    user=None,
    source: str = "import",
    full_path: str | None = None,
) -> ImportResult:
    """Import an uploaded Claude Code or Codex file (`name`: its file name, which tells a
    Claude Code sub-agent file, `agent-<id>.jsonl`, from its main session). `full_path`: the
    file on disk these bytes were read from (a followed file), whose neighbours (sub-agent
    meta files) are then read too."""
    fmt = detect_bytes(data[: 1024 * 1024])
    if fmt not in ("claude-code", "codex"):
        return files.refused("not-agent-file", f"{name}: not a Claude Code or Codex session")
    path = os.path.abspath(full_path) if full_path else os.path.basename(name)
    foreign = load_foreign_bytes(data, fmt, path)
    return _import_foreign(foreign, name, user, source)


def _import_foreign(foreign: ForeignSession, shown: str, user, source: str) -> ImportResult:
    # A Codex fork whose parent is stored joins the parent's tree (explorer.codex_forks).
    joined = codex_forks.join_fork(foreign, shown, user, source, _describe)
    if joined is not None:
        return joined
    stored_id = stored_session_id(foreign)
    with services.session_lock(stored_id):
        # A Codex session's stored form: its own Pi form, then the lines of the forks that
        # joined it.
        parts = split_records(foreign)
        merged = _stored_merged(stored_id, parts)
        data = pi_bytes(foreign, split=False if merged else parts) + b"".join(
            codex_forks.joined_lines(stored_id)
        )
        result = files.import_bytes(data, source_path=shown, user=user)
        if result.ok and result.session is not None:
            _describe(result, foreign)
    # Viewers and stored figures hear of it once the agent and name are set.
    services._announce_import(result, source)
    if result.ok:
        codex_forks.adopt_waiting_forks(result, user, source, _describe)
    return result


def _stored_merged(stored_id: str, split: dict[str, str]) -> bool:
    """True when this Claude Code session was stored before multi-result user records were
    split into one entry per result (``pi_form._part_entries``): one of them is stored under
    its uuid without its first part. Such a session keeps being written in that form, so a
    grown file still continues it (in the split form the record's stored line would differ,
    a conflict that refuses the grown import, and its parts would hang beside it as a stray
    branch); deleting it and importing the file again stores the split form. Re-deriving
    stored sessions in a migration would mean running today's whole import (entries, route
    figures, segments, search index, secrets) at an old schema state. ``split``: the
    session's :func:`split_records`."""
    if not split:
        return False
    session = Session.every.filter(session_id=stored_id).first()
    if session is None:
        return False
    pairs = list(split.items())
    for k in range(0, len(pairs), 400):
        chunk = pairs[k : k + 400]
        wanted = [i for pair in chunk for i in pair]
        stored = set(
            Entry.objects.filter(session=session, entry_id__in=wanted).values_list(
                "entry_id", flat=True
            )
        )
        # The first record stored in either form decides: a session is written in one form
        # (this guard keeps it), so one stored record usually answers in one query.
        for uuid, first in chunk:
            if first in stored:
                return False
            if uuid in stored:
                return True
    return False


def _describe(result: ImportResult, foreign: ForeignSession) -> None:
    """The title and the original bytes on the stored session, and the reading
    rules' findings as its warnings (with the original file's line numbers)."""
    session = result.session
    assert session is not None
    original = foreign.original_bytes()
    findings = [
        Problem(p.line, "warning", p.code, f"{foreign.format}: {p.message}", p.entry_id)
        for p in foreign.problems
    ]
    result.problems.extend(findings)
    # The file's title names the session until someone renames it in the app (a session_info
    # entry, site data that a later import must not overwrite).
    renamed = Entry.objects.filter(session=session, type="session_info").exists()
    title = foreign.title
    if title is None and isinstance(foreign, CodexSession):
        # A rollout has no title record: named by its first typed turn, as Codex's own
        # resume list does, rather than by the injected environment context before it.
        title = first_typed_turn(foreign)
    name = session.name if renamed or not title else title
    Session.objects.filter(pk=session.pk).update(name=name, source_original=original)
    if result.created or not result.unchanged:
        ImportProblem.objects.filter(session=session, code__in={p.code for p in findings}).delete()
        _save_problems(session, findings)
        _update_warning_count(session)
    session.refresh_from_db()
    result.session = session


def reading_rule_sections(session: Session) -> list[dict]:
    """The Integrity tab's sections of a Claude Code or Codex session: what the format's reading
    rules found in the original file (stored at import as warnings, with its line numbers), in
    the shape of the engine's sections plus ``agent``; none for a Pi session. A Codex session's
    compaction check also says how many compactions it covered."""
    groups = _RULE_SECTIONS.get(session.agent, ())
    if not groups:
        return []
    codes = set().union(*(g[3] for g in groups))
    found = list(
        ImportProblem.objects.filter(session=session, code__in=codes).values_list(
            "code", "line", "entry_id", "message"
        )[:2000]
    )
    out = []
    for key, title, help_text, wanted in groups:
        items = [
            {"id": entry_id, "line": line, "code": code, "detail": message}
            for code, line, entry_id, message in found
            if code in wanted
        ][:200]
        if key == "codex-compaction-history":
            n = session.compaction_count
            help_text += f" {n} compaction{'s' if n != 1 else ''} checked."
        out.append(
            {"key": key, "title": title, "help": help_text, "items": items, "agent": session.agent}
        )
    recorded = recorded_checks(session)
    if recorded is not None:
        out.append(recorded)
    return out


def _agent_sessions() -> QuerySet:
    return Session.objects.exclude(agent="pi")


def continued_from(session: Session) -> Session | None:
    """The Claude Code or Codex session a Pi session continues (*Continue as a Pi session*
    stores a route with the agent session's file, or ``db:<stored id>``, as its
    ``parentSession``), or None."""
    parent = session.parent_session
    if session.agent != "pi" or not parent:
        return None
    agents = _agent_sessions()
    if parent.startswith("db:"):
        agents = agents.filter(session_id=parent[3:])
    else:
        agents = agents.filter(source_path=parent)
    return agents.order_by("-pk").first()


def continuations(session: Session) -> list[Session]:
    """The Pi sessions made from this Claude Code or Codex session's routes (newest last)."""
    if session.agent == "pi":
        return []
    labels = {f"db:{session.session_id}"} | (
        {session.source_path} if session.source_path else set()
    )
    made = Session.objects.filter(parent_session__in=labels).exclude(pk__in=_agent_sessions())
    return list(made.order_by("pk")[:20])
