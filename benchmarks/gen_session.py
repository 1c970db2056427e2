"""Deterministic generator of large, realistic Pi session files (format version 3).

Benchmarks need files far bigger than the real fixtures (tens of thousands of entries, a few
hundred branch points) whose shape resembles real use: a system prompt at the root, turns of
user prompt -> assistant (thinking, text, tool calls) -> tool results of very uneven size,
occasional settings changes, labels, extension state, cache-warming usage entries, context
edits, compactions with a system checkpoint, and navigation back to earlier points (some of
them with a branch summary). The same arguments always give the same bytes, so results from
different helpers and runs are comparable.

Usage as a library::

    from benchmarks.gen_session import generate_session
    generate_session("/tmp/big.jsonl", entries=50_000, branch_points=200, seed=7)

or from the shell::

    python benchmarks/gen_session.py /tmp/big.jsonl --entries 50000 --branch-points 200
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from explorer.session.jsonfmt import dumps, iso_from_ms

__all__ = ["DEFAULT_SEED", "BigShapes", "big_shapes_for", "generate_session", "main"]

DEFAULT_SEED = 20250304
START_MS = 1_741_064_767_000  # 2025-03-04T05:06:07.000Z

_WORD_TEXT = (
    "the a to of and in is it that for on with as this be are we can not from by at or an "
    "file function test module session entry parent branch leaf context token model prompt "
    "summary compaction update refactor error value return import class method should would "
    "could check read write edit run build fix change add remove keep move path tree node "
    "list dict string number line output input result tool call user assistant thinking "
    "because when then after before while each every other first last next previous new old"
)
_WORDS = _WORD_TEXT.split()
_FILES = [
    f"src/{d}/{n}.{ext}"
    for d in ("core", "cli", "tui", "utils", "session", "agent", "web")
    for n in ("index", "manager", "loader", "render", "config", "types", "helpers", "state")
    for ext in ("ts", "py")
]
_CODE = [
    "export function {w}(input: string): number {{",
    "  const {w} = await load{W}(path);",
    "  if (!{w}) throw new Error('missing {w}');",
    "  return {w}.map((x) => x.{w});",
    "}}",
    "def {w}(self, value):",
    "    return self._{w}.get(value)",
    "import {{ {W} }} from './{w}.js';",
    "// TODO: {w} the {w} before {w}",
    "    for item in {w}:",
]


# Real sessions are mostly ASCII, but a few percent of lines (often the big tool outputs:
# test runners, tree listings) carry box-drawing characters, arrows, check marks or emoji.
_UNICODE_LINES = [
    "├── {w}/",
    "│   └── {w}.ts",
    "✓ {w} passes (3 ms)",
    "✗ {w} failed → expected {W}",
    "━━━━━━━━━━━━━━━━━━━━ {w} ━━━━━━━━━━━━━━━━━━━━",
    "✅ {W} done · {w} … ok",
    "Grüße aus {W} — naïve café",
    "🚀 deployed {w} 🎉",
]


@dataclass(frozen=True)
class BigShapes:
    """The shapes of the sessions users report at 1-2 GB, added on top of the default ones.

    Such files are big because of a few hundred huge lines, not because of long text: tool
    outputs of 1-5 MB (a whole log or generated file read back), screenshots pasted as images,
    and compactions only every few thousand entries, since the huge outputs are truncated
    before they reach the model.
    """

    huge_result_rate: float = 0.01
    """Share of `read`/`bash` results that are 1-5 MB of text."""
    image_rate: float = 0.003
    """Share of user prompts and of `read` results that carry an image (100-800 KB base64)."""
    compaction_chars: int = 1_500_000
    """Characters of path since the last compaction before the next one is considered."""


DEFAULT_COMPACT_AFTER = 600_000
"""Characters of path since the last compaction before the next one is considered, unless
told otherwise: a 50,000-entry session gets about a hundred compactions."""

# Measured on generated files: per entry, about 0.23 `read`/`bash` results and 0.12 user
# prompts; the default shapes average about 1,800 bytes a line.
_READ_BASH_PER_ENTRY = 0.23
_USER_PER_ENTRY = 0.12
_DEFAULT_LINE_BYTES = 1_800
_HUGE_MEAN_BYTES = 3_300_000  # 3 M characters; escapes and UTF-8 add about a tenth
_IMAGE_MEAN_BYTES = 450_000


def big_shapes_for(target_bytes: int, entries: int, image_rate: float = 0.003) -> BigShapes:
    """Big shapes whose expected file size is about `target_bytes` for `entries` entries."""
    images = entries * (_USER_PER_ENTRY + _READ_BASH_PER_ENTRY / 2) * image_rate * _IMAGE_MEAN_BYTES
    rest = target_bytes - entries * _DEFAULT_LINE_BYTES - images
    huge_results = max(0.0, rest / _HUGE_MEAN_BYTES)
    rate = min(0.5, huge_results / max(1.0, entries * _READ_BASH_PER_ENTRY))
    return BigShapes(huge_result_rate=rate, image_rate=image_rate)


class _Gen:
    """State of one generation run: the tree built so far and the current position."""

    def __init__(
        self,
        path: Path,
        entries: int,
        branch_points: int,
        seed: int,
        cwd: str,
        big: BigShapes | None = None,
        compact_after: int | None = None,
    ):
        self.path = path
        self.total = entries
        self.branch_points = branch_points
        self.rng = random.Random(seed)
        self.cwd = cwd
        self.now = START_MS
        self.used_ids: set[str] = set()
        self.count = 0
        self.leaf: str | None = None
        self.parent_of: dict[str, str | None] = {}
        self.kind_of: dict[str, str] = {}  # "user" / "assistant" / "toolResult" / "custom" / other
        self.since_compaction: dict[str, int] = {}  # chars on the path since the last compaction
        self.branched: set[str] = set()
        self.out: Any = None  # the open temporary file: lines are streamed, never all held
        self.bytes_written = 0
        self.big = big
        if compact_after is None:
            compact_after = big.compaction_chars if big is not None else DEFAULT_COMPACT_AFTER
        self.compact_after = compact_after
        # Big shapes draw from their own random stream, so the default shapes stay identical
        # to what this generator always produced for the same arguments.
        self.big_rng = random.Random(seed ^ 0x5EED_B16) if big is not None else None
        self._pool: list[str] = []
        self.system_message: dict[str, Any] | None = None
        self._uuid7()  # drawn as always, so every entry stays what these arguments gave
        # The id is derived from every parameter, not the seed alone: two files of one seed
        # (say 400 and 4,000 entries) are two sessions, and the second is not refused on
        # import as another history under the first one's id.
        shape = repr((seed, entries, branch_points, cwd, big, compact_after))
        self.session_id = self._uuid7(hashlib.sha256(shape.encode()).digest())

    # -- primitives ----------------------------------------------------------------------------

    def _uuid7(self, digest: bytes | None = None) -> str:
        ts = self.now & ((1 << 48) - 1)
        rand = self.rng.getrandbits(74) if digest is None else int.from_bytes(digest) >> 182
        value = (
            (ts << 80)
            | (0x7 << 76)
            | ((rand >> 62) << 64)
            | (0b10 << 62)
            | (rand & ((1 << 62) - 1))
        )
        h = f"{value:032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def _id(self) -> str:
        while True:
            candidate = f"{self.rng.getrandbits(32):08x}"
            if candidate not in self.used_ids:
                self.used_ids.add(candidate)
                return candidate

    def _tick(self, lo: int = 200, hi: int = 30_000) -> str:
        self.now += self.rng.randint(lo, hi)
        return iso_from_ms(self.now)

    def _words(self, n: int) -> str:
        rng = self.rng
        return " ".join(rng.choice(_WORDS) for _ in range(n))

    def _sentences(self, approx_chars: int) -> str:
        parts: list[str] = []
        size = 0
        while size < approx_chars:
            s = self._words(self.rng.randint(6, 18)).capitalize() + "."
            parts.append(s)
            size += len(s) + 1
        return " ".join(parts)

    def _code(self, approx_chars: int) -> str:
        rng = self.rng
        lines: list[str] = []
        size = 0
        while size < approx_chars:
            w = rng.choice(_WORDS)
            line = rng.choice(_CODE).format(w=w, W=w.capitalize())
            lines.append(line)
            size += len(line) + 1
        return "\n".join(lines)

    def _unicode_output(self, approx_chars: int) -> str:
        rng = self.rng
        lines: list[str] = []
        size = 0
        while size < approx_chars:
            w = rng.choice(_WORDS)
            pattern = rng.choice(_UNICODE_LINES) if rng.random() < 0.4 else rng.choice(_CODE)
            line = pattern.format(w=w, W=w.capitalize())
            lines.append(line)
            size += len(line) + 1
        return "\n".join(lines)

    def _result_size(self) -> int:
        # Tool outputs are very uneven: mostly small, sometimes a whole file, rarely huge.
        r = self.rng.random()
        if r < 0.55:
            return self.rng.randint(20, 400)
        if r < 0.90:
            return self.rng.randint(400, 4_000)
        if r < 0.99:
            return self.rng.randint(4_000, 20_000)
        return self.rng.randint(20_000, 120_000)

    def _usage(self, context_chars: int) -> dict[str, Any]:
        inp = max(1, context_chars // 4 // 10)
        cache_read = context_chars // 4 - inp
        out = self.rng.randint(20, 1_500)
        return {
            "input": inp,
            "output": out,
            "cacheRead": cache_read,
            "cacheWrite": self.rng.choice((0, 0, 0, 512)),
            "totalTokens": inp + out + cache_read,
            "cost": {
                "input": round(inp * 3e-6, 6),
                "output": round(out * 15e-6, 6),
                "cacheRead": round(cache_read * 3e-7, 6),
                "cacheWrite": 0,
                "total": round(inp * 3e-6 + out * 15e-6 + cache_read * 3e-7, 6),
            },
        }

    # -- writing -------------------------------------------------------------------------------

    def _emit(self, entry: dict[str, Any], kind: str, chars: int = 0) -> str:
        entry_id = entry["id"]
        parent = entry["parentId"]
        self._write(dumps(entry))
        self.parent_of[entry_id] = parent
        self.kind_of[entry_id] = kind
        base = self.since_compaction.get(parent, 0) if parent else 0
        self.since_compaction[entry_id] = 0 if kind == "compaction" else base + chars
        self.leaf = entry_id
        self.count += 1
        return entry_id

    def _write(self, line: str) -> None:
        data = line.encode("utf-8") + b"\n"
        self.out.write(data)
        self.bytes_written += len(data)

    # -- big shapes ----------------------------------------------------------------------------

    def _huge_text(self, size: int) -> str:
        """`size` characters of tool output, assembled from a pool of generated blocks: a
        multi-megabyte output costs a join, not a million random draws."""
        rng = self.big_rng
        assert rng is not None
        if not self._pool:
            saved, self.rng = self.rng, rng  # the pool comes from the big stream too
            try:
                for i in range(48):
                    block = self._unicode_output(16_384) if i % 4 == 0 else self._code(16_384)
                    self._pool.append(block + "\n")
            finally:
                self.rng = saved
        parts: list[str] = []
        total = 0
        pool = self._pool
        while total < size:
            block = pool[rng.randrange(len(pool))]
            parts.append(block)
            total += len(block)
        return "".join(parts)[:size]

    def _image_block(self) -> dict[str, Any]:
        """A screenshot-like image block: base64 of incompressible bytes (100-800 KB)."""
        rng = self.big_rng
        assert rng is not None
        raw = rng.randbytes(rng.randint(75_000, 600_000))
        return {
            "type": "image",
            "data": base64.b64encode(raw).decode("ascii"),
            "mimeType": "image/png",
        }

    def _big_result(self, name: str) -> tuple[list[dict[str, Any]], int] | None:
        """Content of a big tool result (1-5 MB of output, or a read image), or None for a
        normal one. The second value is what the compaction clock counts: a huge output is
        counted as a truncated one would be, so compactions stay every few thousand entries."""
        big, rng = self.big, self.big_rng
        if big is None or rng is None:
            return None
        if name in ("read", "bash") and rng.random() < big.huge_result_rate:
            text = self._huge_text(rng.randint(1_000_000, 5_000_000))
            return [{"type": "text", "text": text}], 20_000
        if name == "read" and rng.random() < big.image_rate:
            return [
                {"type": "text", "text": "Read image file [image/png]"},
                self._image_block(),
            ], 2_000
        return None

    def _base(self, type_: str) -> dict[str, Any]:
        return {"type": type_, "id": self._id(), "parentId": self.leaf, "timestamp": self._tick()}

    def message(self, message: dict[str, Any], chars: int) -> str:
        entry = self._base("message")
        message["timestamp"] = self.now
        entry["message"] = message
        return self._emit(entry, message["role"], chars)

    def system(self) -> None:
        tools = [
            {
                "name": name,
                "description": f"{name.capitalize()} " + self._words(12),
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                    "required": ["path"],
                },
            }
            for name in ("read", "write", "edit", "bash", "ls", "grep")
        ]
        msg = {
            "role": "system",
            "content": "",
            "sections": {
                "preamble": "You are an expert coding assistant. " + self._sentences(1_500),
                "guidelines": self._sentences(800),
                "cwd": self.cwd,
            },
            "toolsAdded": tools,
        }
        self.message(msg, 3_000)
        self.system_message = msg

    def turn(self) -> None:
        """One user prompt and the agent loop that answers it."""
        rng = self.rng
        prompt = self._sentences(rng.choice((60, 150, 400, 1_200)))
        content: Any = prompt if rng.random() < 0.5 else [{"type": "text", "text": prompt}]
        if (
            self.big_rng is not None
            and self.big is not None
            and self.big_rng.random() < self.big.image_rate
        ):
            content = [{"type": "text", "text": prompt}, self._image_block()]  # a pasted screenshot
        self.message({"role": "user", "content": content}, len(prompt))
        steps = rng.randint(1, 6)
        for step in range(steps):
            if self.count >= self.total:
                return
            blocks: list[dict[str, Any]] = []
            chars = 0
            if rng.random() < 0.7:
                thinking = self._sentences(rng.randint(80, 1_500))
                blocks.append(
                    {
                        "type": "thinking",
                        "thinking": thinking,
                        "thinkingSignature": f"sig{rng.getrandbits(64):016x}",
                    }
                )
                chars += len(thinking)
            if rng.random() < 0.6 or step == steps - 1:
                text = self._sentences(rng.randint(40, 900))
                if rng.random() < 0.05:
                    text += " → done ✓"
                blocks.append({"type": "text", "text": text})
                chars += len(text)
            calls: list[tuple[str, str]] = []
            if step < steps - 1:
                for _ in range(rng.choice((1, 1, 1, 2, 3))):
                    name = rng.choice(("read", "read", "bash", "edit", "write", "ls"))
                    call_id = f"toolu_{rng.getrandbits(80):020x}"
                    path = rng.choice(_FILES)
                    if name == "bash":
                        args: dict[str, Any] = {"command": f"cd {self.cwd} && npm test -- {path}"}
                    elif name == "edit":
                        args = {
                            "path": path,
                            "oldText": self._code(120),
                            "newText": self._code(160),
                        }
                    elif name == "write":
                        args = {"path": path, "content": self._code(rng.randint(200, 3_000))}
                    else:
                        args = {"path": path}
                    blocks.append(
                        {"type": "toolCall", "id": call_id, "name": name, "arguments": args}
                    )
                    chars += len(dumps(args)) + len(name)
                    calls.append((call_id, name))
            context = self.since_compaction.get(self.leaf or "", 0)
            self.message(
                {
                    "role": "assistant",
                    "content": blocks,
                    "api": "anthropic-messages",
                    "provider": "anthropic",
                    "model": self.model,
                    "usage": self._usage(context + chars),
                    "stopReason": "toolUse" if calls else "stop",
                },
                chars,
            )
            for call_id, name in calls:
                if self.count >= self.total:
                    return
                big_result = self._big_result(name)
                if big_result is not None:
                    blocks_out, counted = big_result
                    self.message(
                        {
                            "role": "toolResult",
                            "toolCallId": call_id,
                            "toolName": name,
                            "content": blocks_out,
                            "isError": False,
                        },
                        counted,
                    )
                    continue
                size = self._result_size()
                if name in ("read", "bash"):
                    output = self._unicode_output(size) if rng.random() < 0.3 else self._code(size)
                else:
                    output = self._sentences(min(size, 300))
                self.message(
                    {
                        "role": "toolResult",
                        "toolCallId": call_id,
                        "toolName": name,
                        "content": [{"type": "text", "text": output}],
                        "isError": rng.random() < 0.04,
                    },
                    len(output),
                )

    def metadata(self) -> None:
        """One of the entries that carry no conversation."""
        rng = self.rng
        r = rng.random()
        if r < 0.15:
            entry = self._base("thinking_level_change")
            entry["thinkingLevel"] = rng.choice(("off", "low", "medium", "high"))
            self._emit(entry, "meta")
        elif r < 0.25:
            self.model = rng.choice(("claude-sonnet-4-5", "claude-opus-4-5"))
            entry = self._base("model_change")
            entry["provider"] = "anthropic"
            entry["modelId"] = self.model
            self._emit(entry, "meta")
        elif r < 0.45:
            target = self._recent_on_path(lambda _k: True)
            entry = self._base("label")
            entry["targetId"] = target
            if rng.random() < 0.85:
                entry["label"] = "checkpoint-" + self._words(1)
            self._emit(entry, "meta")
        elif r < 0.65:
            entry = {
                "type": "custom",
                "customType": "todo-list",
                "data": {
                    "items": [
                        {"title": self._words(4), "done": rng.random() < 0.5}
                        for _ in range(rng.randint(1, 6))
                    ]
                },
            }
            entry.update(self._base("custom"))
            self._emit(entry, "meta")
        elif r < 0.80:
            entry = self._base("usage")
            entry["kind"] = "cache_warm"
            entry["provider"] = "anthropic"
            entry["model"] = self.model
            entry["usage"] = self._usage(self.since_compaction.get(self.leaf or "", 0))
            self._emit(entry, "meta")
        elif r < 0.88:
            content = self._sentences(rng.randint(40, 300))
            entry = {
                "type": "custom_message",
                "customType": "reminder",
                "content": content,
                "display": rng.random() < 0.5,
            }
            entry.update(self._base("custom_message"))
            self._emit(entry, "custom", len(content))
        elif r < 0.92:
            entry = self._base("session_info")
            entry["name"] = self._words(3).title()
            self._emit(entry, "meta")
        else:
            target = self._recent_on_path(
                lambda k: k in ("user", "assistant", "toolResult", "custom")
            )
            if target is None:
                return
            entry = self._base("context_edit")
            entry["targetId"] = target
            if rng.random() < 0.5 or self.kind_of[target] in ("user", "custom"):
                entry["replacement"] = None
            else:
                entry["replacement"] = {
                    "content": [{"type": "text", "text": "(elided) " + self._words(5)}]
                }
            self._emit(entry, "meta")

    def _recent_on_path(self, accept: Any, depth: int = 40) -> str | None:
        node = self.leaf
        for _ in range(depth):
            if node is None:
                return None
            if accept(self.kind_of[node]):
                return node
            node = self.parent_of[node]
        return None

    def compaction(self) -> None:
        """Fold the history of the current path, keeping a recent user turn verbatim."""
        keep: str | None = None
        node = self.leaf
        seen = 0
        while node is not None and seen < 60:
            kind = self.kind_of[node]
            if kind == "compaction":
                break
            if kind == "user" and seen >= 8:
                keep = node
                break
            node = self.parent_of[node]
            seen += 1
        if keep is None:
            return
        entry = self._base("compaction")
        entry["summary"] = (
            "## Goal\n" + self._sentences(600) + "\n\n## Progress\n" + self._sentences(1_500)
        )
        entry["firstKeptEntryId"] = keep
        entry["tokensBefore"] = self.since_compaction.get(self.leaf or "", 0) // 4
        reads = sorted(self.rng.sample(_FILES, 5))
        modified = sorted(self.rng.sample(_FILES, 3))
        entry["details"] = {"readFiles": reads, "modifiedFiles": modified}
        entry["usage"] = self._usage(60_000)
        entry["fromHook"] = False
        if self.system_message is not None:
            checkpoint = {k: v for k, v in self.system_message.items() if k != "timestamp"}
            checkpoint["timestamp"] = self.now
            entry["systemMessage"] = checkpoint
        self._emit(entry, "compaction")

    def navigate(self) -> None:
        """Go back to an earlier point of the current path and continue from there."""
        rng = self.rng
        path: list[str] = []
        node = self.leaf
        far = rng.random() < 0.1
        limit = None if far else rng.randint(3, 400)
        while node is not None and (limit is None or len(path) < limit):
            path.append(node)
            node = self.parent_of[node]
        # path[0] is the leaf; any older entry already has a child on this path.
        candidates = [n for n in path[1:] if n not in self.branched]
        if not candidates:
            return
        target = rng.choice(candidates)
        self.branched.add(target)
        old_leaf = self.leaf
        self.leaf = target
        if rng.random() < 0.3:
            entry = self._base("branch_summary")
            entry["fromId"] = old_leaf
            entry["summary"] = (
                "The user explored a different conversation branch before returning here.\n"
                "Summary of that exploration:\n\n## Goal\n" + self._sentences(500)
            )
            entry["details"] = {"readFiles": sorted(rng.sample(_FILES, 2)), "modifiedFiles": []}
            entry["fromHook"] = False
            self._emit(entry, "branchSummary", 600)

    # -- driver --------------------------------------------------------------------------------

    def run(self) -> Path:
        self.model = "claude-sonnet-4-5"
        header = {
            "type": "session",
            "version": 3,
            "id": self.session_id,
            "timestamp": iso_from_ms(self.now),
            "cwd": self.cwd,
        }
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb", buffering=1 << 20) as self.out:
            self._write(dumps(header))
            self._body()
        self.out = None
        os.replace(tmp, self.path)
        return self.path

    def _body(self) -> None:
        rng = self.rng
        compact_after = self.compact_after
        if self.total > 0:
            self.system()
        # Branch points spread evenly over the file; leave room for the final stretch.
        every = max(1, self.total // (self.branch_points + 1)) if self.branch_points else None
        next_branch = every
        while self.count < self.total:
            if (
                next_branch is not None
                and self.count >= next_branch
                and len(self.branched) < self.branch_points
            ):
                before = len(self.branched)
                self.navigate()
                if len(self.branched) > before:
                    next_branch += every
            if self.count >= self.total:
                break
            if self.since_compaction.get(self.leaf or "", 0) > compact_after and rng.random() < 0.5:
                self.compaction()
            elif rng.random() < 0.12:
                self.metadata()
            else:
                self.turn()


def generate_session(
    path: str | os.PathLike[str],
    entries: int = 50_000,
    branch_points: int = 200,
    seed: int = DEFAULT_SEED,
    *,
    cwd: str = "/home/dev/project",
    big: BigShapes | None = None,
    compact_after: int | None = None,
) -> Path:
    """Write a version-3 session file with exactly `entries` entries after the header.

    `branch_points` distinct entries get a second child (a navigation back to them); the
    file's last entry is the default leaf. `big` adds huge tool results, images and sparse
    compactions (see `BigShapes`). `compact_after` is how many characters of path since the
    last compaction (or the root) go before a compaction is considered (default:
    `DEFAULT_COMPACT_AFTER`, or the big shapes' `compaction_chars`): a short session needs a
    lower one to have compactions on its routes at all, e.g. to be compared like for like
    with a long one. Lines are streamed to a temporary file that replaces
    `path` at the end, so memory stays bounded by the tree's ids, whatever the file size.
    Returns the path written.
    """
    if entries < 0 or branch_points < 0:
        raise ValueError("entries and branch_points must be non-negative")
    if compact_after is not None and compact_after < 0:
        raise ValueError("compact_after must be non-negative")
    return _Gen(Path(path), entries, branch_points, seed, cwd, big, compact_after).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Generate a large deterministic Pi session file. The session id is "
        "derived from all the arguments but the path: files of one seed with other sizes or "
        "shapes are distinct sessions; the same arguments give the same file and id."
    )
    parser.add_argument("path", help="output .jsonl file")
    parser.add_argument("--entries", type=int, default=50_000)
    parser.add_argument("--branch-points", type=int, default=200)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument(
        "--target-bytes",
        type=float,
        default=None,
        help="add big shapes (1-5 MB tool results, images, sparse compactions) sized so the "
        "file is about this many bytes, e.g. 2e9",
    )
    parser.add_argument(
        "--compact-after",
        type=int,
        default=None,
        help="characters of path since the last compaction before the next one is considered "
        f"(default {DEFAULT_COMPACT_AFTER:,}; lower it for compactions in a short session)",
    )
    args = parser.parse_args(argv)
    big = big_shapes_for(int(args.target_bytes), args.entries) if args.target_bytes else None
    out = generate_session(
        args.path,
        args.entries,
        args.branch_points,
        args.seed,
        big=big,
        compact_after=args.compact_after,
    )
    size = out.stat().st_size
    print(f"{out}: {args.entries} entries, {args.branch_points} branch points, {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
