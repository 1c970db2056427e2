"""What the explorer pages compute, as plain functions over entry dicts.

The engine answers "what does the model see"; this module answers the reader's questions
about it: which raw entries became which projected messages and why the others did not,
what a compaction kept of the references in the history it replaced, how two routes differ
and what an abandoned route cost. No database access here: views hand in the entries they
loaded (only the ones the page needs), so the same code serves tests and pages.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from explorer.session import jsonfmt
from explorer.session.context import projection_from_path
from explorer.session.messages import content_text, session_entry_to_context_messages
from explorer.session.tokens import (
    CompactionSettings,
    estimate_projected_context,
    estimate_tokens,
    should_compact,
)

# --- small helpers ---------------------------------------------------------------------


def finite(x: Any) -> float:
    """Numbers from JSON may be NaN or absent; pages show 0 rather than failing."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return 0.0
    return 0.0 if math.isnan(x) or math.isinf(x) else float(x)


def tokens_of(messages: Iterable[Any]) -> int:
    return int(sum(finite(estimate_tokens(m)) for m in messages))


def entry_message(entry: dict) -> dict | None:
    m = entry.get("message") if entry.get("type") == "message" else None
    return m if isinstance(m, dict) else None


def entry_role(entry: dict) -> str:
    m = entry_message(entry)
    if m is not None:
        r = m.get("role")
        return r if isinstance(r, str) else ""
    return ""


def entry_text(entry: dict, limit: int | None = None) -> str:
    """The human-readable text of an entry (for snippets, titles and reference scans)."""
    kind = entry.get("type")
    text = ""
    m = entry_message(entry)
    if m is not None:
        role = m.get("role")
        if role == "bashExecution":
            text = f"$ {m.get('command', '')}\n{m.get('output', '')}"
        else:
            content = m.get("content")
            if isinstance(content, str | list):
                parts: list[str] = []
                if isinstance(content, str):
                    parts.append(content)
                else:
                    for block in content:
                        if not isinstance(block, dict):
                            continue
                        t = block.get("type")
                        if t == "text" and isinstance(block.get("text"), str):
                            parts.append(block["text"])
                        elif t == "toolCall":
                            args = block.get("arguments")
                            parts.append(f"{block.get('name', '')} {_compact_json(args)}")
                text = "\n".join(parts)
    elif kind in ("compaction", "branch_summary"):
        text = entry.get("summary") if isinstance(entry.get("summary"), str) else ""
    elif kind == "custom_message":
        c = entry.get("content")
        text = c if isinstance(c, str) else content_text(c) if isinstance(c, list) else ""
    elif kind == "label":
        text = str(entry.get("label") or "")
    elif kind == "session_info":
        text = str(entry.get("name") or "")
    elif kind == "model_change":
        text = f"{entry.get('provider', '')}/{entry.get('modelId', '')}"
    elif kind == "thinking_level_change":
        text = str(entry.get("thinkingLevel", ""))
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    return text


def _compact_json(value: Any) -> str:
    try:
        return jsonfmt.dumps(value)
    except (TypeError, ValueError):
        return ""


def entry_title(entry: dict, limit: int = 80) -> str:
    """One line describing an entry, for tree rows and graph nodes."""
    kind = entry.get("type")
    m = entry_message(entry)
    if m is not None and m.get("role") == "assistant":
        content = m.get("content") if isinstance(m.get("content"), list) else []
        calls = [
            b.get("name") for b in content if isinstance(b, dict) and b.get("type") == "toolCall"
        ]
        texts = [
            b.get("text")
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
        head = " ".join(t.strip() for t in texts if t.strip())
        if calls:
            names = ", ".join(str(c) for c in calls[:3]) + ("…" if len(calls) > 3 else "")
            head = (head + " " if head else "") + f"[{names}]"
        text = head or (m.get("errorMessage") or m.get("stopReason") or "")
    elif kind == "context_edit":
        rep = entry.get("replacement")
        text = f"{'hide' if rep is None else 'replace'} {entry.get('targetId', '')}"
    elif kind == "label":
        lab = entry.get("label")
        text = (
            f"{entry.get('targetId', '')} ← {lab!r}"
            if lab
            else f"clear {entry.get('targetId', '')}"
        )
    elif kind == "usage":
        text = f"{entry.get('kind', '')} {entry.get('model', '')}"
    elif kind == "custom":
        text = str(entry.get("customType", ""))
    else:
        text = entry_text(entry)
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def usage_of(entry: dict) -> dict | None:
    """The spend recorded by an entry: assistant usage, usage entries, summary requests."""
    m = entry_message(entry)
    u = m.get("usage") if m is not None and m.get("role") == "assistant" else None
    if u is None and entry.get("type") in ("usage", "compaction", "branch_summary"):
        u = entry.get("usage")
    return u if isinstance(u, dict) else None


def cost_of(entry: dict) -> float:
    u = usage_of(entry)
    if not u:
        return 0.0
    c = u.get("cost")
    return finite(c.get("total")) if isinstance(c, dict) else 0.0


def total_tokens_of(entry: dict) -> float:
    u = usage_of(entry)
    if not u:
        return 0.0
    t = finite(u.get("totalTokens"))
    if t:
        return t
    return sum(finite(u.get(k)) for k in ("input", "output", "cacheRead", "cacheWrite"))


def provider_input_tokens(entry: dict) -> float | None:
    """What the provider billed as context for an assistant reply (input + cache)."""
    m = entry_message(entry)
    if m is None or m.get("role") != "assistant" or m.get("stopReason") in ("error", "aborted"):
        return None
    u = m.get("usage")
    if not isinstance(u, dict):
        return None
    total = sum(finite(u.get(k)) for k in ("input", "cacheRead", "cacheWrite"))
    return total or None


def tool_calls_of(entry: dict) -> list[dict]:
    m = entry_message(entry)
    if m is None or m.get("role") != "assistant" or not isinstance(m.get("content"), list):
        return []
    return [b for b in m["content"] if isinstance(b, dict) and b.get("type") == "toolCall"]


_FILE_TOOLS = {"read": "read", "write": "modified", "edit": "modified"}


def files_touched(entries: Iterable[dict]) -> dict[str, list[str]]:
    """Files read and modified by tool calls, in first-seen order."""
    read: dict[str, None] = {}
    modified: dict[str, None] = {}
    for e in entries:
        for call in tool_calls_of(e):
            kind = _FILE_TOOLS.get(call.get("name"))  # type: ignore[arg-type]
            args = call.get("arguments")
            path = args.get("path") if isinstance(args, dict) else None
            if kind and isinstance(path, str) and path:
                (read if kind == "read" else modified)[path] = None
    return {"read": [p for p in read if p not in modified], "modified": list(modified)}


# --- raw versus projected ----------------------------------------------------------------

NOT_MODEL_TYPES = {
    "label": "label (UI metadata)",
    "session_info": "session name (UI metadata)",
    "custom": "extension state",
    "usage": "cost accounting",
    "model_change": "settings change",
    "thinking_level_change": "settings change",
    "context_edit": "context edit (changes another entry)",
}


@dataclass
class AlignedRow:
    """One raw path entry beside what it contributes to the model context."""

    entry: dict
    index: int  # position on the raw path
    status: str  # same | replaced | hidden | compacted | summary | superseded | metadata | inert
    reason: str  # human explanation of the difference ("" when the same)
    projected: list[dict] = field(default_factory=list)
    order: list[int] = field(default_factory=list)  # message numbers in model order
    raw_tokens: int = 0
    projected_tokens: int = 0
    cause_id: str | None = None  # the edit or compaction responsible

    @property
    def id(self) -> str:
        return str(self.entry.get("id", ""))

    @property
    def differs(self) -> bool:
        return self.status != "same"


@dataclass
class AlignedView:
    rows: list[AlignedRow]
    raw_tokens: int
    projected_tokens: int  # as the agent estimates it (usage-aware)
    projected_sum: int  # plain sum of the projected message estimates
    message_count: int
    thinking_level: str
    model: dict | None
    compaction_id: str | None
    differences: int
    would_compact: bool
    context_window: int
    threshold: int


def align_projection(
    path: Sequence[dict],
    *,
    context_window: int = 200_000,
    settings: CompactionSettings | None = None,
) -> AlignedView:
    """Pair every raw path entry with its projected messages and explain each difference."""
    settings = settings or CompactionSettings()
    projection = projection_from_path(list(path))
    contributed: dict[int, list[dict]] = {}
    order_of: dict[int, list[int]] = {}
    n = 0
    context_ids: set[int] = set()
    for pe in projection.entries:
        key = id(pe.source_entry)
        context_ids.add(key)
        contributed[key] = pe.messages
        order_of[key] = list(range(n + 1, n + 1 + len(pe.messages)))
        n += len(pe.messages)

    latest_index = next(
        (i for i in range(len(path) - 1, -1, -1) if path[i].get("type") == "compaction"), -1
    )
    latest = path[latest_index] if latest_index >= 0 else None
    latest_id = latest.get("id") if latest else None
    edits: dict[Any, dict] = {}
    for pe in projection.entries:
        src = pe.source_entry
        if src.get("type") == "context_edit":
            edits[src.get("targetId")] = src

    context_target_ids = {pe.source_entry.get("id") for pe in projection.entries}
    rows: list[AlignedRow] = []
    for i, entry in enumerate(path):
        raw_msgs = session_entry_to_context_messages(entry)
        raw_tokens = tokens_of(raw_msgs) if entry.get("type") != "compaction" else 0
        key = id(entry)
        kind = entry.get("type")
        row = AlignedRow(entry, i, "same", "", raw_tokens=raw_tokens)
        if key not in context_ids:
            row.cause_id = latest_id
            if latest is None:
                row.status, row.reason = "compacted", "not in context"
            elif kind == "message" and entry_role(entry) == "system" and i < latest_index:
                row.status = "superseded"
                row.reason = (
                    f"system message superseded by the checkpoint of compaction {latest_id}"
                )
            else:
                row.status, row.reason = "compacted", f"folded into compaction {latest_id}"
                if not raw_msgs:
                    row.reason += " · not model content"
            rows.append(row)
            continue
        msgs = contributed.get(key, [])
        row.projected = msgs
        row.order = order_of.get(key, [])
        row.projected_tokens = tokens_of(msgs)
        edit = edits.get(entry.get("id"))
        if kind == "compaction":
            if entry.get("id") == latest_id and msgs:
                row.status = "summary"
                first = entry.get("firstKeptEntryId")
                row.reason = (
                    "compaction summary"
                    + (" and system checkpoint" if len(msgs) > 1 else "")
                    + f"; sent first, keeps history from {first}"
                )
            elif (
                edit is not None
                and edit.get("replacement") is None
                and entry.get("id") == latest_id
            ):
                row.status, row.reason, row.cause_id = (
                    "hidden",
                    f"hidden by context edit {edit.get('id')}",
                    edit.get("id"),
                )
            else:
                row.status, row.reason = (
                    "inert",
                    "older compaction inside the kept range: contributes nothing",
                )
        elif edit is not None:
            rep = edit.get("replacement")
            if rep is None:
                row.status, row.reason = "hidden", f"hidden by context edit {edit.get('id')}"
            elif msgs and any(m is not r for m, r in zip(msgs, raw_msgs, strict=False)):
                if len(msgs) == len(raw_msgs) and all(
                    m.get("content") == r.get("content")
                    for m, r in zip(msgs, raw_msgs, strict=False)
                ):
                    # An undo appends the original content as the replacement: the model sees
                    # exactly the raw message again, so this is no longer a difference.
                    row.status, row.reason = (
                        "same",
                        f"original content restored by context edit {edit.get('id')}",
                    )
                else:
                    row.status, row.reason = (
                        "replaced",
                        f"content replaced by context edit {edit.get('id')}",
                    )
            else:
                row.status, row.reason = (
                    "same",
                    f"edit {edit.get('id')} does not apply to this role",
                )
            row.cause_id = edit.get("id")
        elif not msgs:
            if kind == "context_edit":
                target = entry.get("targetId")
                winner = edits.get(target)
                row.status = "metadata"
                if target not in context_target_ids:
                    row.reason = (
                        f"context edit of {target}: no effect, the target is not in context"
                    )
                elif winner is not entry:
                    row.reason = f"context edit of {target}: superseded by the later edit {winner.get('id') if winner else '?'}"
                else:
                    row.reason = f"context edit: {'hides' if entry.get('replacement') is None else 'replaces'} {target}"
            elif kind in NOT_MODEL_TYPES:
                row.status, row.reason = "metadata", f"not model content: {NOT_MODEL_TYPES[kind]}"
            elif kind == "branch_summary":
                row.status, row.reason = "metadata", "empty branch summary: contributes nothing"
            else:
                row.status, row.reason = "metadata", f"{kind}: not model content"
        rows.append(row)

    est = estimate_projected_context(projection, path)
    projected_tokens = int(finite(est.tokens))
    threshold = context_window - settings.reserve_tokens
    return AlignedView(
        rows=rows,
        raw_tokens=sum(r.raw_tokens for r in rows),
        projected_tokens=projected_tokens,
        projected_sum=tokens_of(projection.messages),
        message_count=len(projection.messages),
        thinking_level=projection.thinking_level,
        model=projection.model,
        compaction_id=latest_id,
        differences=sum(1 for r in rows if r.differs),
        would_compact=should_compact(est.tokens, context_window, settings),
        context_window=context_window,
        threshold=threshold,
    )


# --- compaction view and the reference survival check ------------------------------------

_URL = re.compile(r"\bhttps?://[^\s<>\"'`)\]]+", re.I)
_PATH = re.compile(
    r"(?<![\w/.-])(?:~?/?(?:[\w@.+-]+/)+[\w@.+-]+|[\w-]+\.(?:py|ts|tsx|js|jsx|mjs|json|jsonl|md|"
    r"txt|toml|yaml|yml|css|html|sh|rs|go|java|c|h|cpp|rb|sql|lock|cfg|ini|env))(?![\w/])"
)
_HEX_ID = re.compile(r"\b[0-9a-f]{8}\b")
_NUMBER = re.compile(r"(?<![\w.])\d[\d_,]*(?:\.\d+)?(?![\w.])")
_BACKTICK = re.compile(r"`([^`\n]{2,200})`")
_PROMPT = re.compile(r"^\s*\$ (.{2,200})$", re.M)
_COMMAND_WORDS = frozenset(
    [
        "git",
        "npm",
        "npx",
        "pnpm",
        "yarn",
        "node",
        "python",
        "python3",
        "pip",
        "uv",
        "pytest",
        "make",
        "cargo",
        "go",
        "ls",
        "cat",
        "grep",
        "rg",
        "sed",
        "awk",
        "find",
        "curl",
        "wget",
        "docker",
        "kubectl",
        "cd",
        "mkdir",
        "rm",
        "mv",
        "cp",
        "chmod",
        "tsc",
        "ruff",
        "mypy",
        "bash",
        "sh",
        "echo",
        "jq",
        "tar",
        "ssh",
        "psql",
        "sqlite3",
        "just",
        "deno",
        "bun",
    ]
)
REFERENCE_KINDS = ("path", "entry_id", "url", "command", "number")
_MAX_PER_KIND = 150


def _is_command(text: str) -> bool:
    word = text.strip().split(" ", 1)[0]
    return word in _COMMAND_WORDS


def extract_references(
    texts: Iterable[str],
    *,
    commands: Iterable[str] = (),
    known_ids: Iterable[str] = (),
    outputs: Iterable[str] = (),
) -> dict[str, list[str]]:
    """The checkable facts in some history: file paths, entry ids, URLs, commands, numbers.

    Entry ids are only recognised when they name a real entry (8 hex digits are too common
    otherwise). Numbers are kept when they carry information (three or more digits, or a
    decimal), so list markers and small counts do not drown the check. `outputs` (tool
    results) are scanned for paths, URLs and entry ids but not for numbers or commands: line
    numbers and listings there are noise no summary should be expected to keep.
    """
    ids = set(known_ids)
    found: dict[str, dict[str, None]] = {k: {} for k in REFERENCE_KINDS}

    def add(kind: str, value: str) -> None:
        value = value.strip().rstrip(".,;:")
        if value and len(found[kind]) < _MAX_PER_KIND:
            found[kind][value] = None

    for cmd in commands:
        first = cmd.strip().splitlines()[0] if cmd.strip() else ""
        if first:
            add("command", first[:200])
    quiet = [(t, True) for t in outputs]
    for text, is_output in [*((t, False) for t in texts), *quiet]:
        if not text:
            continue
        rest = text
        for m in _URL.finditer(text):
            add("url", m.group(0).rstrip(".,;:!?"))
        rest = _URL.sub(" ", rest)
        if not is_output:
            for m in _BACKTICK.finditer(rest):
                if _is_command(m.group(1)):
                    add("command", m.group(1))
            for m in _PROMPT.finditer(rest):
                add("command", m.group(1))
        for m in _PATH.finditer(rest):
            v = m.group(0)
            if "/" in v or "." in v:
                add("path", v)
        for m in _HEX_ID.finditer(rest):
            if m.group(0) in ids:
                add("entry_id", m.group(0))
        if is_output:
            continue
        scrub = _PATH.sub(" ", _HEX_ID.sub(" ", rest))
        for m in _NUMBER.finditer(scrub):
            v = m.group(0).rstrip(",")
            digits = v.replace(",", "").replace("_", "")
            if "." in digits or len(digits) >= 3:
                add("number", v)
    return {k: list(v) for k, v in found.items()}


@dataclass
class SurvivalItem:
    kind: str
    value: str
    survived: bool
    partial: bool = False  # e.g. only the file's base name appears


@dataclass
class SurvivalReport:
    items: list[SurvivalItem]

    def by_kind(self) -> list[tuple[str, list[SurvivalItem], int, int]]:
        out = []
        for kind in REFERENCE_KINDS:
            its = [i for i in self.items if i.kind == kind]
            out.append((kind, its, sum(1 for i in its if i.survived), len(its)))
        return out

    @property
    def total(self) -> int:
        return len(self.items)

    @property
    def survived(self) -> int:
        return sum(1 for i in self.items if i.survived)

    @property
    def rate(self) -> float | None:
        return self.survived / self.total if self.items else None


def _normalise(s: str) -> str:
    return " ".join(s.split())


def reference_survival(references: dict[str, list[str]], summary: str) -> SurvivalReport:
    """Which references of the replaced history still appear in the summary text."""
    summary = summary or ""
    flat = _normalise(summary)
    items: list[SurvivalItem] = []
    for kind in REFERENCE_KINDS:
        for value in references.get(kind, []):
            if kind == "command":
                ok = _normalise(value) in flat
            elif kind == "number":
                ok = re.search(r"(?<![\d.])" + re.escape(value) + r"(?![\d])", summary) is not None
            else:
                ok = value in summary
            partial = False
            if not ok and kind == "path":
                base = value.rstrip("/").rsplit("/", 1)[-1]
                partial = bool(base) and base != value and base in summary
            items.append(SurvivalItem(kind, value, ok, partial))
    return SurvivalReport(items)


@dataclass
class CompactionInfo:
    entry: dict
    index: int  # on the path
    replaced_start: int  # path index where the replaced history starts
    first_kept_index: int | None  # None: retain-none or first kept entry not on the path
    replaced: list[dict]
    kept: list[dict]
    tokens_before: float
    tokens_after: int
    read_files: list[str]
    modified_files: list[str]
    off_path: bool


def compaction_ranges(path: Sequence[dict]) -> list[tuple[int, int, int | None]]:
    """(compaction index, replaced start, first kept index) for each compaction on a path.

    A compaction summarises everything the model saw before its first kept entry: the
    history since the previous compaction's first kept entry (cumulative summaries), so that
    is where its replaced range starts.
    """
    index = {e.get("id"): i for i, e in enumerate(path)}
    out = []
    prev_start = 0
    for i, e in enumerate(path):
        if e.get("type") != "compaction":
            continue
        fk = e.get("firstKeptEntryId")
        fk_i = index.get(fk)
        if fk_i is None or fk_i >= i:
            fk_i = None
        out.append((i, prev_start, fk_i))
        prev_start = fk_i if fk_i is not None else i + 1
    return out


def compaction_info(
    path: Sequence[dict], comp_index: int, start: int, fk: int | None
) -> CompactionInfo:
    comp = path[comp_index]
    end = fk if fk is not None else comp_index
    replaced = [e for e in path[start:end] if e.get("type") != "compaction"]
    kept = list(path[fk:comp_index]) if fk is not None else []
    details = comp.get("details") if isinstance(comp.get("details"), dict) else {}
    read = (
        [p for p in details.get("readFiles", []) if isinstance(p, str)]
        if isinstance(details.get("readFiles"), list)
        else []
    )
    mod = (
        [p for p in details.get("modifiedFiles", []) if isinstance(p, str)]
        if isinstance(details.get("modifiedFiles"), list)
        else []
    )
    after_msgs = session_entry_to_context_messages(comp)
    for e in kept:
        if not (e.get("type") == "message" and entry_role(e) == "system"):
            after_msgs = after_msgs + session_entry_to_context_messages(e)
    fk_id = comp.get("firstKeptEntryId")
    return CompactionInfo(
        entry=comp,
        index=comp_index,
        replaced_start=start,
        first_kept_index=fk,
        replaced=replaced,
        kept=kept,
        tokens_before=finite(comp.get("tokensBefore")),
        tokens_after=tokens_of(after_msgs),
        read_files=read,
        modified_files=mod,
        off_path=fk is None and fk_id != comp.get("id"),
    )


def survival_for(info: CompactionInfo, known_ids: Iterable[str] = ()) -> SurvivalReport:
    texts = [
        entry_text(e) for e in info.replaced if entry_role(e) not in ("toolResult", "bashExecution")
    ]
    outputs = [
        entry_text(e) for e in info.replaced if entry_role(e) in ("toolResult", "bashExecution")
    ]
    commands = []
    for e in info.replaced:
        for call in tool_calls_of(e):
            args = call.get("arguments")
            if isinstance(args, dict) and isinstance(args.get("command"), str):
                commands.append(args["command"])
        m = entry_message(e)
        if m is not None and m.get("role") == "bashExecution" and isinstance(m.get("command"), str):
            commands.append(m["command"])
    ids = set(known_ids) | {str(e.get("id")) for e in info.replaced}
    refs = extract_references(texts, commands=commands, known_ids=ids, outputs=outputs)
    summary = info.entry.get("summary") if isinstance(info.entry.get("summary"), str) else ""
    return reference_survival(refs, summary)


# --- comparing routes --------------------------------------------------------------------


def common_ancestor_index(path_a: Sequence[str], path_b: Sequence[str]) -> int:
    """Index of the last shared entry of two root-first id paths (-1: different roots)."""
    k = -1
    for x, y in zip(path_a, path_b, strict=False):
        if x != y:
            break
        k += 1
    return k


@dataclass
class RouteStats:
    entries: int
    messages: int
    tokens: float  # provider-reported tokens (all requests on the route)
    cost: float
    tool_calls: int
    files_read: list[str]
    files_modified: list[str]


def route_stats(entries: Sequence[dict]) -> RouteStats:
    files = files_touched(entries)
    return RouteStats(
        entries=len(entries),
        messages=sum(1 for e in entries if e.get("type") == "message"),
        tokens=sum(total_tokens_of(e) for e in entries),
        cost=sum(cost_of(e) for e in entries),
        tool_calls=sum(len(tool_calls_of(e)) for e in entries),
        files_read=files["read"],
        files_modified=files["modified"],
    )


@dataclass
class ProjectionDiffRow:
    side: str  # "both" | "a" | "b"
    source_id: str
    role: str
    text: str
    tokens: int


def projection_diff(path_a: Sequence[dict], path_b: Sequence[dict]) -> list[ProjectionDiffRow]:
    """The two model contexts side by side, grouped by source entry: shared, only-A, only-B."""
    pa = projection_from_path(list(path_a))
    pb = projection_from_path(list(path_b))

    def rows(p: Any) -> list[tuple[str, str, str, int, str]]:
        out = []
        for pe in p.entries:
            for m in pe.messages:
                role = m.get("role", "") if isinstance(m, dict) else ""
                sig = _compact_json(m)
                text = _message_preview(m)
                out.append((str(pe.source_entry.get("id", "")), role, text, tokens_of([m]), sig))
        return out

    ra, rb = rows(pa), rows(pb)
    sigs_b = {(r[0], r[4]) for r in rb}
    sigs_a = {(r[0], r[4]) for r in ra}
    out: list[ProjectionDiffRow] = []
    for r in ra:
        out.append(
            ProjectionDiffRow("both" if (r[0], r[4]) in sigs_b else "a", r[0], r[1], r[2], r[3])
        )
    for r in rb:
        if (r[0], r[4]) not in sigs_a:
            out.append(ProjectionDiffRow("b", r[0], r[1], r[2], r[3]))
    return out


def _message_preview(m: Any, limit: int = 160) -> str:
    if not isinstance(m, dict):
        return ""
    role = m.get("role")
    if role in ("compactionSummary", "branchSummary"):
        text = str(m.get("summary", ""))
    elif role == "bashExecution":
        text = f"$ {m.get('command', '')}"
    else:
        text = entry_text({"type": "message", "message": m})
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- context-size timeline ---------------------------------------------------------------


@dataclass
class TimelinePoint:
    index: int  # path index of the assistant reply
    entry_id: str
    projected: int  # estimated context the projection gives the model here
    reported: float | None  # provider-reported input (+ cache) tokens


@dataclass
class TimelineMark:
    index: int
    entry_id: str
    kind: str  # "compaction" | "edit" | "branch_summary"
    label: str


def timeline(
    path: Sequence[dict], *, max_points: int = 240
) -> tuple[list[TimelinePoint], list[TimelineMark]]:
    """Projected context per turn against the provider's reported input tokens.

    The projection is recomputed at each sampled turn from the path prefix that can still
    reach the model (from the newest compaction's kept range on), so long paths stay cheap.
    """
    turns = [i for i, e in enumerate(path) if entry_role(e) == "assistant"]
    if len(turns) > max_points:
        step = len(turns) / max_points
        sampled = sorted({turns[int(k * step)] for k in range(max_points)} | {turns[-1]})
    else:
        sampled = turns
    marks = []
    for i, e in enumerate(path):
        t = e.get("type")
        if t == "compaction":
            marks.append(TimelineMark(i, str(e.get("id")), "compaction", "compaction"))
        elif t == "context_edit":
            rep = e.get("replacement")
            marks.append(
                TimelineMark(i, str(e.get("id")), "edit", "hide" if rep is None else "replace")
            )
        elif t == "branch_summary":
            marks.append(TimelineMark(i, str(e.get("id")), "branch_summary", "branch summary"))
    points: list[TimelinePoint] = []
    last_comp = -1
    comp_positions = [m.index for m in marks if m.kind == "compaction"]
    index_of = {e.get("id"): i for i, e in enumerate(path)}
    settings_idx: list[int] = []
    for i in sampled:
        while comp_positions and comp_positions[0] <= i:
            last_comp = comp_positions.pop(0)
        prefix = _relevant_prefix(path, i, last_comp, index_of, settings_idx)
        p = projection_from_path(prefix)
        est = estimate_projected_context(p, prefix)
        points.append(
            TimelinePoint(
                i, str(path[i].get("id")), int(finite(est.tokens)), provider_input_tokens(path[i])
            )
        )
    return points, marks


def _relevant_prefix(
    path: Sequence[dict], end: int, last_comp: int, index_of: dict, _cache: list[int]
) -> list[dict]:
    if last_comp < 0:
        return list(path[: end + 1])
    fk = index_of.get(path[last_comp].get("firstKeptEntryId"))
    start = fk if fk is not None and fk < last_comp else last_comp
    return list(path[start : end + 1])


def timeline_svg_data(
    points: Sequence[TimelinePoint],
    marks: Sequence[TimelineMark],
    path_len: int,
    *,
    width: int = 900,
    height: int = 260,
) -> dict[str, Any]:
    """Coordinates for an inline SVG chart (the template draws it; no JS library)."""
    pad_l, pad_r, pad_t, pad_b = 56, 12, 12, 28
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    top = max([p.projected for p in points] + [p.reported or 0 for p in points] + [1])
    top = _nice(top)
    span = max(path_len - 1, 1)

    def x(i: int) -> float:
        return round(pad_l + w * i / span, 1)

    def y(v: float) -> float:
        return round(pad_t + h - h * v / top, 1)

    proj = " ".join(f"{x(p.index)},{y(p.projected)}" for p in points)
    rep = " ".join(f"{x(p.index)},{y(p.reported)}" for p in points if p.reported is not None)
    ticks = [{"y": y(top * k / 4), "label": _short(top * k / 4)} for k in range(5)]
    return {
        "width": width,
        "height": height,
        "projected": proj,
        "reported": rep,
        "ticks": ticks,
        "marks": [
            {"x": x(m.index), "kind": m.kind, "label": m.label, "id": m.entry_id} for m in marks
        ],
        "dots": [
            {
                "x": x(p.index),
                "y": y(p.projected),
                "id": p.entry_id,
                "v": p.projected,
                "r": p.reported,
            }
            for p in points
        ],
        "left": pad_l,
        "right": width - pad_r,
        "bottom": pad_t + h,
        "top": pad_t,
    }


def _nice(v: float) -> float:
    exp = 10 ** max(0, len(str(int(v))) - 1)
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * exp:
            return m * exp
    return v


def _short(v: float) -> str:
    if v >= 1_000_000:
        return f"{v / 1_000_000:.1f}M"
    if v >= 1000:
        return f"{v / 1000:.0f}k"
    return str(int(v))
