"""Compare's "files read and modified" for Claude Code and Codex sessions.

Each Claude Code and Codex example is imported (its Pi form, ``explorer.agent_import``) and
Compare is asked for routes that together cover every entry: the files it lists equal what
a reader finds in the original file, read here from its records without the app's code
(Claude Code's ``tool_use`` blocks by tool name and ``file_path``; the file headers of
Codex's ``apply_patch`` texts), and the examples that do edit files list the concrete paths.
The stored rows (``FileUse``) equal the parse for every entry, the page, its htmx partial
and its JSON list the files, and migration 0029 re-fills the rows of foreign sessions
stored before it (and puts back 0028's when undone).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.urls import reverse

from explorer import agent_import, queries
from explorer.models import Entry, Session
from tests.conftest import FIXTURES_DIR
from tests.web.migration_states import migration_states
from tests.web.test_file_uses import assert_uses_stored

pytestmark = pytest.mark.django_db


def _agent_files() -> list[Path]:
    found = sorted((FIXTURES_DIR / "claude-code").rglob("*.jsonl"))
    found += sorted((FIXTURES_DIR / "codex").rglob("*.jsonl"))
    return found or [FIXTURES_DIR / "missing.jsonl"]


# What a reader of the original file counts (the formats' own words, not the app's tables).
CLAUDE_READ = {"Read": "file_path", "NotebookRead": "notebook_path"}
CLAUDE_MODIFIED = {"Edit": "file_path", "MultiEdit": "file_path", "Write": "file_path",
                   "NotebookEdit": "notebook_path"}  # fmt: skip
PATCH_HEADER = re.compile(r"^\*\*\* (?:Add File|Update File|Delete File|Move to): (.+)$", re.M)


def _records(path: Path) -> list[dict]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def _read_in_file(path: Path) -> tuple[set[str], set[str]]:
    """(read, modified) as the original records name them."""
    read: set[str] = set()
    modified: set[str] = set()
    for record in _records(path):
        message = record.get("message")
        for block in message.get("content", []) if isinstance(message, dict) else []:
            if not isinstance(block, dict) or block.get("type") != "tool_use":
                continue
            given = block.get("input") if isinstance(block.get("input"), dict) else {}
            name = block.get("name")
            if name in CLAUDE_READ and isinstance(given.get(CLAUDE_READ[name]), str):
                read.add(given[CLAUDE_READ[name]])
            if name in CLAUDE_MODIFIED and isinstance(given.get(CLAUDE_MODIFIED[name]), str):
                modified.add(given[CLAUDE_MODIFIED[name]])
        payload = record.get("payload")
        if isinstance(payload, dict) and payload.get("name") == "apply_patch":
            patch = payload.get("input")
            if payload.get("type") == "function_call":
                patch = json.loads(payload.get("arguments") or "{}").get("input")
            modified.update(m.strip() for m in PATCH_HEADER.findall(patch or ""))
    return read - modified, modified


def _import(path: Path) -> list[Session]:
    result = agent_import.import_agent_file(str(path))
    sessions = list(Session.objects.exclude(agent="pi"))
    assert sessions, result
    return sessions


def _leaves(session: Session) -> list[str]:
    """Every entry no other entry follows."""
    rows = Entry.objects.filter(session=session)
    parents = set(rows.exclude(parent_id=None).values_list("parent_id", flat=True))
    return [i for i in rows.values_list("entry_id", flat=True) if i not in parents]


def _files_on_compare(session: Session) -> tuple[set[str], set[str]]:
    """The files Compare lists over pairs of routes that cover every entry: each leaf
    against a leaf under another root (its whole route), or else against its own root
    (all but the root)."""
    leaves = _leaves(session)
    roots = {leaf: queries.light_path(session, leaf)[0].entry_id for leaf in leaves}
    read: set[str] = set()
    modified: set[str] = set()
    for leaf in leaves:
        other = next((x for x in leaves if roots[x] != roots[leaf]), roots[leaf])
        stats = queries.compare_routes(session, leaf, other, leaf)["stats_a"]
        read.update(stats["files_read"])
        modified.update(stats["files_modified"])
    return read - modified, modified


@pytest.mark.agent_fixtures
@pytest.mark.parametrize(
    "path", _agent_files(), ids=lambda p: str(p.relative_to(FIXTURES_DIR)).replace("/", ":")
)
def test_compare_lists_the_files_the_original_file_names(path: Path):
    sessions = _import(path)
    read: set[str] = set()
    modified: set[str] = set()
    for session in sessions:
        assert_uses_stored(session)
        r, m = _files_on_compare(session)
        read |= r
        modified |= m
    want_read, want_modified = set(), set()
    for session in sessions:  # a file imported with its sub-agents' files
        source = Path(session.source_path) if session.source_path else path
        r, m = _read_in_file(source if source.is_file() else path)
        want_read |= r
        want_modified |= m
    assert (read, modified) == (want_read - want_modified, want_modified)


@pytest.mark.agent_fixtures
@pytest.mark.parametrize(
    ("relative", "modified"),
    [
        ("claude-code/claude-code-log/representative_messages.jsonl", ["/tmp/decorator_example.py"]),
        ("claude-code/claude-code-log/edge_cases.jsonl", ["/tmp/complex_example.py"]),
        ("codex/claude-code-log/sessions/2026/01/02/"
         "rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl", ["gamma.txt"]),
    ],
)  # fmt: skip
def test_the_examples_that_edit_files_list_them(relative: str, modified: list[str]):
    (session,) = _import(FIXTURES_DIR / relative)
    assert _files_on_compare(session) == (set(), set(modified))


def _pair_listing(session: Session, wanted: str) -> tuple[str, str]:
    """A leaf whose route modifies ``wanted``, and a route to compare it with."""
    leaves = _leaves(session)
    roots = {leaf: queries.light_path(session, leaf)[0].entry_id for leaf in leaves}
    for leaf in leaves:
        other = next((x for x in leaves if roots[x] != roots[leaf]), roots[leaf])
        if (
            wanted
            in queries.compare_routes(session, leaf, other, leaf)["stats_a"]["files_modified"]
        ):
            return leaf, other
    raise AssertionError(f"no route modifies {wanted}")


@pytest.mark.agent_fixtures
@pytest.mark.parametrize(
    ("relative", "wanted"),
    [
        ("claude-code/claude-code-log/representative_messages.jsonl", "/tmp/decorator_example.py"),
        ("codex/claude-code-log/sessions/2026/01/02/"
         "rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl", "gamma.txt"),
    ],
)  # fmt: skip
def test_page_partial_and_json_list_the_files(relative: str, wanted: str, viewer_client):
    (session,) = _import(FIXTURES_DIR / relative)
    a, b = _pair_listing(session, wanted)
    url = reverse("explorer:compare", args=[session.pk])
    page = viewer_client.get(url, {"a": a, "b": b, "leaf": a})
    part = viewer_client.get(url, {"a": a, "b": b, "leaf": a}, HTTP_HX_REQUEST="true")
    body = viewer_client.get(url, {"a": a, "b": b, "leaf": a, "format": "json"})
    assert page.status_code == part.status_code == body.status_code == 200
    assert wanted in page.content.decode() and wanted in part.content.decode()
    assert wanted in body.json()["result"]["stats_a"]["files_modified"]


# ---------------------------------------------------------------------------------------------
# Migration 0029


def _claude_line(uuid: str, parent: str | None, content: Any, role: str = "assistant") -> dict:
    """A stored Claude Code entry in its Pi form (what ``formats.claude_code`` writes)."""
    return {"type": "message", "id": uuid, "parentId": parent,
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": {"role": role, "content": content, "stopReason": "toolUse"}}  # fmt: skip


@pytest.mark.django_db(transaction=True)
def test_migration_0029_refills_foreign_sessions_and_goes_back():
    """A Claude Code session and a Pi one with the same lines, stored at 0020, with the rows
    0028 wrote by Pi's rule alone: 0029 gives the Claude Code session its Read/Edit/Write uses (and
    none for Grep) and leaves the Pi session's rows alone; going back puts 0028's back."""
    call = lambda n, a: {"type": "toolCall", "id": n, "name": n, "arguments": a}  # noqa: E731
    values = [
        _claude_line("u1", None, "go", role="user"),
        _claude_line("a1", "u1", [call("Read", {"file_path": "/w/a.py"}),
                                  call("Grep", {"pattern": "x"})]),
        _claude_line("a2", "a1", [call("Edit", {"file_path": "/w/a.py"}),
                                  call("read", {"path": "pi-named.md"})]),
        _claude_line("a3", "a2", [call("Write", {"file_path": "/w/b.py"})]),
    ]  # fmt: skip
    old = {3: [["read", "pi-named.md"]]}  # 0028's rule: Pi's tools only
    new = {2: [["read", "/w/a.py"]], 3: [["modified", "/w/a.py"], ["read", "pi-named.md"]],
           4: [["modified", "/w/b.py"]]}  # fmt: skip

    def stored_rows(pk: int) -> dict[int, list]:
        # Raw SQL: today's code may expect later tables.
        with connection.cursor() as cur:
            cur.execute("SELECT position, uses FROM explorer_fileuse WHERE session_id = %s", [pk])
            return {p: json.loads(u) for p, u in cur.fetchall()}

    with migration_states() as migrate:
        apps = migrate([("explorer", "0020_session_agent")])
        OldSession = apps.get_model("explorer", "Session")
        OldEntry = apps.get_model("explorer", "Entry")
        foreign = OldSession.objects.create(
            session_id="claude-code:s-0029", header_raw="{}", agent="claude-code"
        )
        pi = OldSession.objects.create(session_id="s-0029-pi", header_raw="{}", agent="pi")
        for session in (foreign, pi):
            OldEntry.objects.bulk_create(
                OldEntry(session=session, entry_id=v["id"], parent_id=v.get("parentId"),
                         type=v["type"], position=k + 1, line_no=k + 2, raw=json.dumps(v))
                for k, v in enumerate(values)
            )  # fmt: skip
        migrate([("explorer", "0028_file_uses")])  # the route figures, the rows
        # The rows as 0028 wrote them before the engine knew these tools (0028 runs
        # today's ``file_uses``, so a database migrated now has the new ones already).
        with connection.cursor() as cur:
            cur.execute("DELETE FROM explorer_fileuse")
            for session in (foreign, pi):
                cur.execute(
                    "INSERT INTO explorer_fileuse (session_id, position, uses) VALUES (%s, %s, %s)",
                    [session.pk, 3, json.dumps(old[3])],
                )
        migrate([("explorer", "0029_agent_file_uses")])
        assert stored_rows(foreign.pk) == new
        assert stored_rows(pi.pk) == old  # a Pi session keeps its rows
        migrate([("explorer", "0028_file_uses")])
        assert stored_rows(foreign.pk) == old == stored_rows(pi.pk)
        migrate()
        assert assert_uses_stored(Session.objects.get(pk=foreign.pk)) == 3


# ---------------------------------------------------------------------------------------------
# The Transcript and the entry panel show the files a call names


def _calling_entry(session: Session, name: str) -> str:
    """The id of the stored reply that calls ``name``."""
    for entry_id, raw in Entry.objects.filter(session=session).values_list("entry_id", "raw"):
        value = json.loads(raw)
        message = value.get("message") if isinstance(value, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "toolCall" and b.get("name") == name
            for b in content
        ):
            return entry_id
    raise AssertionError(f"no call of {name}")


def _shown_files(html: str) -> list[str]:
    return re.findall(r'<span class="tool-file small"><span class="muted">(\w+)</span> '
                      r"<code>([^<]*)</code></span>", html)  # fmt: skip


@pytest.mark.agent_fixtures
@pytest.mark.parametrize(
    ("relative", "tool", "shown"),
    [
        ("claude-code/claude-code-log/representative_messages.jsonl", "Edit",
         [("modified", "/tmp/decorator_example.py")]),
        ("claude-code/claude-code-log/edge_cases.jsonl", "MultiEdit",
         [("modified", "/tmp/complex_example.py")]),
        ("codex/claude-code-log/sessions/2026/01/02/"
         "rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl", "apply_patch",
         [("modified", "gamma.txt")]),
    ],
)  # fmt: skip
def test_transcript_and_entry_panel_show_the_files_of_a_call(
    relative: str, tool: str, shown: list[tuple[str, str]], viewer_client
):
    (session,) = _import(FIXTURES_DIR / relative)
    entry_id = _calling_entry(session, tool)
    panel = viewer_client.get(reverse("explorer:entry", args=[session.pk]), {"id": entry_id})
    assert panel.status_code == 200
    assert _shown_files(panel.content.decode()) == shown
    transcript = viewer_client.get(
        reverse("explorer:transcript", args=[session.pk]), {"leaf": entry_id}
    )
    assert transcript.status_code == 200
    assert _shown_files(transcript.content.decode()) == shown
    # A result's panel names its call's files too, beside "Result of".
    results = [
        entry_id
        for entry_id, raw in Entry.objects.filter(session=session).values_list("entry_id", "raw")
        if json.loads(raw).get("message", {}).get("role") == "toolResult"
        and json.loads(raw)["message"].get("toolName") == tool
    ]
    for result in results:
        html = viewer_client.get(reverse("explorer:entry", args=[session.pk]), {"id": result})
        html = html.content.decode()
        # "Result of" names the call found in the result's parent entry (only there).
        assert _shown_files(html) == (shown if "Result of" in html else [])
        # Codex's output follows its call (the Claude Code examples' results do not).
        assert "Result of" in html or tool != "apply_patch"
    assert results or tool != "apply_patch"


@pytest.mark.django_db
def test_a_path_holding_a_secret_is_shown_masked(viewer_client):
    """The files beside a call come from the masked line, as its arguments do."""
    from explorer import services
    from tests.web.test_file_uses import HEADER, _lines, _reply

    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    lines = [_reply("r1", None, [("read", f"/tmp/{token}/key.txt"), ("edit", "plain.py")])]
    session = services.import_bytes(HEADER + _lines(lines)).session
    for url, params in (
        (reverse("explorer:entry", args=[session.pk]), {"id": "r1"}),
        (reverse("explorer:transcript", args=[session.pk]), {"leaf": "r1"}),
    ):
        html = viewer_client.get(url, params).content.decode()
        files = _shown_files(html)
        assert token not in html
        assert [kind for kind, _ in files] == ["read", "modified"], url
        assert files[0][1].startswith("/tmp/") and files[1][1] == "plain.py"


@pytest.mark.agent_fixtures
def test_the_html_export_names_a_patch_s_files(viewer_client):
    """A Codex patch has no path argument; its folded header in the HTML export names the
    files it touches."""
    relative = ("codex/claude-code-log/sessions/2026/01/02/"
                "rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl")  # fmt: skip
    (session,) = _import(FIXTURES_DIR / relative)
    r = viewer_client.get(reverse("explorer:export_html", args=[session.pk]))
    body = b"".join(r.streaming_content).decode() if r.streaming else r.content.decode()
    assert r.status_code == 200
    # The cards travel as JSON in the page: the header's tags are escaped there.
    assert re.search(r't-hint\\?"(?:>|\\u003e)gamma\.txt', body), "no hint names the patch's file"
