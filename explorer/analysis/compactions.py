"""Compactions beside what they replaced, and which references of the replaced history the
summary kept (the survival check)."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from explorer.analysis.projection import projected_context_tokens
from explorer.session.describe import (
    entry_message,
    entry_role,
    entry_text,
    finite,
    tool_calls_of,
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


_HEX_BYTES = bytes(1 if chr(b) in "0123456789abcdef" else 0 for b in range(256))


def _has_hex_run(text: str) -> bool:
    """Whether ``text`` holds 8 lowercase hex digits in a row, as every entry id match does
    (a C-speed test: a multi-MB tool output without one is not scanned for ids)."""
    marks = text.encode("utf-8", "surrogatepass").translate(_HEX_BYTES)
    return b"\x01" * 8 in marks


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

    def room(kind: str) -> bool:
        return len(found[kind]) < _MAX_PER_KIND

    for cmd in commands:
        first = cmd.strip().splitlines()[0] if cmd.strip() else ""
        if first:
            add("command", first[:200])
    # Each kind keeps its first _MAX_PER_KIND values, so a kind that is full reads no more
    # text, and a scan that cannot match (no "://" for a URL, no run of 8 hex digits for an
    # entry id) is not run: the answer is the one reading every text whole, found at the
    # cost of what it keeps (a 3.7 MB tool output is no longer walked for its 10,000th path).
    quiet = [(t, True) for t in outputs]
    for text, is_output in [*((t, False) for t in texts), *quiet]:
        if not text:
            continue
        want_cmd = not is_output and room("command")
        want_path = room("path")
        want_id = bool(ids) and room("entry_id")
        want_num = not is_output and room("number")
        has_url = "://" in text  # every URL match holds it
        if has_url and room("url"):
            for m in _URL.finditer(text):
                add("url", m.group(0).rstrip(".,;:!?"))
                if not room("url"):
                    break
        if not (want_cmd or want_path or want_id or want_num):
            continue
        rest = _URL.sub(" ", text) if has_url else text
        if want_cmd:
            for m in _BACKTICK.finditer(rest):
                if _is_command(m.group(1)):
                    add("command", m.group(1))
            for m in _PROMPT.finditer(rest):
                add("command", m.group(1))
        if want_path:
            for m in _PATH.finditer(rest):
                v = m.group(0)
                if "/" in v or "." in v:
                    add("path", v)
                    if not room("path"):
                        break
        if want_id and _has_hex_run(rest):
            for m in _HEX_ID.finditer(rest):
                if m.group(0) in ids:
                    add("entry_id", m.group(0))
                    if not room("entry_id"):
                        break
        if not want_num:
            continue
        scrub = _PATH.sub(" ", _HEX_ID.sub(" ", rest))
        for m in _NUMBER.finditer(scrub):
            v = m.group(0).rstrip(",")
            digits = v.replace(",", "").replace("_", "")
            if "." in digits or len(digits) >= 3:
                add("number", v)
                if not room("number"):
                    break
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
        extra = [k for k in dict.fromkeys(i.kind for i in self.items) if k not in REFERENCE_KINDS]
        for kind in (*REFERENCE_KINDS, *extra):
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
    extra = [k for k in references if k not in REFERENCE_KINDS]
    for kind in (*REFERENCE_KINDS, *extra):
        for value in references.get(kind, []):
            if kind == "command":
                ok = _normalise(value) in flat
            elif kind == "number":
                ok = re.search(r"(?<![\d.])" + re.escape(value) + r"(?![\d])", summary) is not None
            elif kind == "identifier":  # a whole name: parse_config is not parse_config_v2
                ok = re.search(r"(?<!\w)" + re.escape(value) + r"(?!\w)", summary) is not None
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
    comps = [
        (i, e.get("firstKeptEntryId")) for i, e in enumerate(path) if e.get("type") == "compaction"
    ]
    return extend_compaction_ranges(comps, index, 0)[0]


def extend_compaction_ranges(
    comps: Sequence[tuple[int, Any]], index: Mapping[Any, int], start: int
) -> tuple[list[tuple[int, int, int | None]], int]:
    """The ranges of ``comps`` ((index on the path, firstKeptEntryId) in path order) and
    where the next compaction's replaced range would start.

    ``start``: where the first of them starts (0, or what an earlier call returned). A
    range depends only on the path up to its compaction, so the ranges of a route that
    grew are the kept ones plus those of its new compactions, started where they ended.
    """
    out = []
    for i, fk in comps:
        fk_i = index.get(fk)
        if fk_i is None or fk_i >= i:
            fk_i = None
        out.append((i, start, fk_i))
        start = fk_i if fk_i is not None else i + 1
    return out, start


def list_window(
    n: int, shown: int, *, chosen: int | None, before: int | None, every: bool
) -> tuple[int, int]:
    """The stretch [lo, hi) of a route's ``n`` compactions (oldest first) a page lists, so
    its weight does not grow with the route: the newest ``shown`` (reaching back to the
    ``chosen`` one when it is older); for "show older", the ``shown`` before index
    ``before``; ``every``: all of them (the "show older" link's target without script)."""
    if every:
        return 0, n
    if before is not None:
        hi = min(max(before, 0), n)
        return max(0, hi - shown), hi
    lo = max(0, n - shown)
    return (lo if chosen is None else min(lo, chosen)), n


def replaced_indices(
    types: Sequence[str],
    rng: tuple[int, int, int | None],
    lo: int = 0,
    hi: int | None = None,
) -> list[int]:
    """The path indices a compaction replaced, for every page that counts, lists or marks
    them (``lo``/``hi``: only those in [lo, hi), a window of the route).

    ``rng`` is one of :func:`compaction_ranges` over a path whose entry types are ``types``:
    the stretch from its start up to the first kept entry (or up to the compaction itself
    when nothing of the path is kept), without the earlier compactions lying in it, whose
    summaries the new one carries forward rather than replaces as history of their own."""
    ci, start, fk = rng
    stop = fk if fk is not None else ci
    if hi is not None:
        stop = min(stop, hi)
    return [j for j in range(max(start, lo), stop) if types[j] != "compaction"]


def replaced_count(rng: tuple[int, int, int | None], compactions: Sequence[int]) -> int:
    """``len(replaced_indices(types, rng))`` from the depths of the route's compactions alone
    (``compactions``, sorted): the stretch's length less the compactions lying in it. A page
    counting what a compaction replaced needs no other entry of the route."""
    ci, start, fk = rng
    stop = fk if fk is not None else ci
    if stop <= start:
        return 0
    inside = bisect.bisect_left(compactions, stop) - bisect.bisect_left(compactions, start)
    return stop - start - inside


def replaced_window(
    rng: tuple[int, int, int | None], compactions: Sequence[int], first: int, last: int
) -> list[int]:
    """``replaced_indices(types, rng)[first:last]`` (``first``/``last`` within the list,
    0 <= first) from the depths of the route's compactions alone (``compactions``, sorted):
    a window of what a compaction replaced is found by counting the compactions before it,
    without the types of the entries in between."""
    ci, start, fk = rng
    stop = fk if fk is not None else ci
    n = replaced_count(rng, compactions)
    first, last = max(0, min(first, n)), max(0, min(last, n))
    if first >= last:
        return []
    k = bisect.bisect_left(compactions, start)
    depth = start + first  # the entry of list position ``first``, compactions before it aside
    while k < len(compactions) and compactions[k] <= depth:
        depth += 1
        k += 1
    out: list[int] = []
    while len(out) < last - first and depth < stop:
        if k < len(compactions) and compactions[k] == depth:
            k += 1
        else:
            out.append(depth)
        depth += 1
    return out


def kept_indices(rng: tuple[int, int, int | None], lo: int = 0, hi: int | None = None) -> range:
    """The path indices a compaction kept verbatim, its first kept entry up to it (``lo``/
    ``hi`` as for :func:`replaced_indices`)."""
    ci, _start, fk = rng
    if fk is None:
        return range(0)
    return range(max(fk, lo), ci if hi is None else min(ci, hi))


def kept_count(rng: tuple[int, int, int | None]) -> int:
    """How many entries of the path a compaction kept verbatim (its first kept one up to it)."""
    return len(kept_indices(rng))


def compaction_info(
    path: Sequence[dict], comp_index: int, start: int, fk: int | None
) -> CompactionInfo:
    """One compaction of ``path`` (at ``comp_index``, its replaced range from ``start``, its
    first kept entry at ``fk``) with what it replaced and kept, and the context sizes
    before (as stored) and after (the engine's estimate at the compaction)."""
    comp = path[comp_index]
    types = [e.get("type") for e in path]
    replaced = [path[j] for j in replaced_indices(types, (comp_index, start, fk))]
    kept = [path[j] for j in kept_indices((comp_index, start, fk))]
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
    fk_id = comp.get("firstKeptEntryId")
    off_path = fk is None and fk_id != comp.get("id")
    before = finite(comp.get("tokensBefore"))
    # The context right after the compaction is the engine's, as Raw vs projected shows it
    # with the compaction as the leaf: a kept entry an edit hid, or an older compaction
    # inert in the kept range, sends nothing (summing the kept entries' raw messages once
    # counted them). Nothing before the first kept entry reaches the model (SPEC 4.3), so
    # a ``path`` starting anywhere up to it gives the same figure.
    after = projected_context_tokens(path[: comp_index + 1])
    return CompactionInfo(
        comp, comp_index, start, fk, replaced, kept, before, after, read, mod, off_path
    )


def survival_for(info: CompactionInfo, known_ids: Iterable[str] = ()) -> SurvivalReport:
    summary = info.entry.get("summary") if isinstance(info.entry.get("summary"), str) else ""
    return survival_of(info.replaced, summary, known_ids)


def survival_of(
    replaced: Sequence[dict], summary: str, known_ids: Iterable[str] = ()
) -> SurvivalReport:
    """Which references of the entries ``replaced`` appear in ``summary``: one check for a
    compaction and for a branch summary (whose "replaced" entries are the route it
    summarised), so the two are measured alike."""
    texts = [
        entry_text(e) for e in replaced if entry_role(e) not in ("toolResult", "bashExecution")
    ]
    outputs = [entry_text(e) for e in replaced if entry_role(e) in ("toolResult", "bashExecution")]
    commands = []
    for e in replaced:
        for call in tool_calls_of(e):
            args = call.get("arguments")
            if isinstance(args, dict) and isinstance(args.get("command"), str):
                commands.append(args["command"])
        m = entry_message(e)
        if m is not None and m.get("role") == "bashExecution" and isinstance(m.get("command"), str):
            commands.append(m["command"])
    ids = set(known_ids) | {str(e.get("id")) for e in replaced}
    refs = extract_references(texts, commands=commands, known_ids=ids, outputs=outputs)
    return reference_survival(refs, summary or "")
