"""File operations carried through compactions and branch summaries (SPEC section 6.6).

A summary is prose the model may get wrong; the lists of files read and modified are
computed mechanically from tool calls instead, appended to the summary in fixed tags and
stored in the entry's `details`, so the next compaction can carry them forward even when the
messages that produced them are long gone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .jsonfmt import js_join, js_sort_key, js_string

__all__ = [
    "FileOps",
    "add_details_file_ops",
    "compute_file_lists",
    "extract_file_ops_from_message",
    "format_file_operations",
]


@dataclass
class FileOps:
    """Insertion-ordered sets (dicts with `None` values) of paths by kind of access."""

    read: dict[Any, None] = field(default_factory=dict)
    written: dict[Any, None] = field(default_factory=dict)
    edited: dict[Any, None] = field(default_factory=dict)

    def to_json(self) -> dict[str, list[Any]]:
        return {"read": list(self.read), "written": list(self.written), "edited": list(self.edited)}


def _add(target: dict[Any, None], value: Any) -> None:
    # Hand-written details may hold lists or objects; they cannot name a file.
    with contextlib.suppress(TypeError):
        target[value] = None


def _add_file_op(tool_name: Any, arguments: Any, ops: FileOps) -> None:
    if not isinstance(arguments, dict):
        return
    path = arguments.get("path")
    if not isinstance(path, str) or not path:
        return
    if tool_name == "read":
        _add(ops.read, path)
    elif tool_name == "write":
        _add(ops.written, path)
    elif tool_name == "edit":
        _add(ops.edited, path)


def extract_file_ops_from_message(message: Any, ops: FileOps) -> None:
    """Add the file operations of one message: assistant tool calls and nested tool calls."""
    if not isinstance(message, dict):
        return
    role = message.get("role")
    if role == "toolResult":
        nested = message.get("nestedCalls")
        calls = nested.get("calls") if isinstance(nested, dict) else None
        if isinstance(calls, list):
            for call in calls:
                if isinstance(call, dict):
                    _add_file_op(call.get("name"), call.get("arguments"), ops)
        return
    if role != "assistant":
        return
    content = message.get("content")
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "toolCall":
            continue
        if "arguments" not in block or "name" not in block:
            continue
        _add_file_op(block["name"], block["arguments"], ops)


def add_details_file_ops(details: Any, ops: FileOps) -> None:
    """Carry the lists of an earlier pi-generated summary's `details` forward."""
    if not isinstance(details, dict):
        return
    read_files = details.get("readFiles")
    if isinstance(read_files, list):
        for f in read_files:
            _add(ops.read, f)
    modified = details.get("modifiedFiles")
    if isinstance(modified, list):
        for f in modified:
            _add(ops.edited, f)


def _js_sorted(values: Iterable[Any]) -> list[Any]:
    return sorted(values, key=lambda v: js_sort_key(js_string(v)))


def compute_file_lists(ops: FileOps) -> tuple[list[Any], list[Any]]:
    """`(readFiles, modifiedFiles)`: read-only files and modified files, each sorted."""
    modified: dict[Any, None] = dict.fromkeys(ops.edited)
    modified.update(dict.fromkeys(ops.written))
    read_only = [f for f in ops.read if f not in modified]
    return _js_sorted(read_only), _js_sorted(modified)


def format_file_operations(read_files: list[Any], modified_files: list[Any]) -> str:
    """The tag block appended to a summary; empty when there is nothing to list."""
    sections: list[str] = []
    if read_files:
        sections.append("<read-files>\n" + js_join(read_files, "\n") + "\n</read-files>")
    if modified_files:
        sections.append(
            "<modified-files>\n" + js_join(modified_files, "\n") + "\n</modified-files>"
        )
    if not sections:
        return ""
    return "\n\n" + "\n\n".join(sections)
