"""Which files a tool call reads or modifies, for Pi's, Claude Code's and Codex's tools.

``describe.file_uses`` asks :func:`call_uses` for each tool call of an entry. Claude Code and
Codex sessions are stored in their Pi form (``formats.claude_code``, ``formats.codex``), which
keeps each agent's own tool names and arguments, so the rules are told apart by name alone:
Pi's built-in file tools are lower-case (``read``, ``edit``, ``write``, with ``path``), Claude
Code's capitalised (``Read``, ``Edit``, ... with ``file_path`` / ``notebook_path``) and Codex
edits files through ``apply_patch``, whose patch text names them. No name is in two tables,
so a Pi session's answer is what it was before the other agents were known.

What counts, deliberately:

- a tool whose job is to read or change one named file counts, with that file: Claude Code's
  ``Read`` and ``NotebookRead`` read; ``Edit``, ``MultiEdit``, ``Write`` and
  ``NotebookEdit`` modify;
- a Codex patch modifies every file it names: ``*** Add File:``, ``*** Update File:``,
  ``*** Delete File:`` and both paths of a move (``*** Move to:``), whether the patch came as
  the ``apply_patch`` tool's input or as the argument vector ``["apply_patch", patch]`` of a
  ``shell`` / ``local_shell`` call (how Codex runs a patch through its shell tool);
- searches and listings (``Glob``, ``Grep``, ``LS``) name patterns and folders, not files
  read, and count for nothing;
- a shell command line (Claude Code's ``Bash``, Codex's ``exec_command`` or ``shell``
  running ``cat``, ``sed -n`` ...) is **not** parsed: guessing what a command line reads
  would be wrong as often as right, so those files are not listed.

Arguments of the wrong shape (not an object, a path that is not text or is empty, a patch
that is not text) name nothing; they never raise.
"""

from __future__ import annotations

from typing import Any

__all__ = ["call_uses", "patch_paths"]

# Pi's own tools (unchanged from before the other agents were read).
_PI = {"read": "read", "write": "modified", "edit": "modified"}

# Claude Code's file tools: name -> (kind, argument holding the path).
_CLAUDE_CODE = {
    "Read": ("read", "file_path"),
    "NotebookRead": ("read", "notebook_path"),
    "Edit": ("modified", "file_path"),
    "MultiEdit": ("modified", "file_path"),
    "Write": ("modified", "file_path"),
    "NotebookEdit": ("modified", "notebook_path"),
}

_PATCH_TOOL = "apply_patch"
_SHELLS = ("shell", "local_shell")

# The headers of Codex's patch format naming a file; each file named is modified.
_PATCH_HEADERS = ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: ")


def patch_paths(patch: Any) -> list[str]:
    """The files a Codex ``apply_patch`` text names, in the order it names them (a move's
    old path, from its ``Update File`` header, then the new one). A header counts only at the
    start of a line: a hunk's lines start with ``+``, ``-`` or a space, so text that merely
    quotes a header inside a file's content is not mistaken for one."""
    if not isinstance(patch, str) or "*** " not in patch:
        return []
    out = []
    for line in patch.splitlines():
        if not line.startswith("*** "):
            continue
        line = line.rstrip()
        for header in _PATCH_HEADERS:
            if line.startswith(header):
                path = line[len(header) :].strip()
                if path:
                    out.append(path)
                break
    return out


def _shell_patch(arguments: dict) -> Any:
    """The patch of a shell call whose argument vector is ``["apply_patch", patch]`` (the
    command a ``shell`` call gives, or a ``local_shell`` call's ``action``), else None."""
    command = arguments.get("command")
    action = arguments.get("action")
    if command is None and isinstance(action, dict):
        command = action.get("command")
    if isinstance(command, list) and len(command) == 2 and command[0] == _PATCH_TOOL:
        return command[1]
    return None


def call_uses(name: Any, arguments: Any) -> list[tuple[str, str]]:
    """("read" | "modified", path) of one tool call, from its name and arguments (see the
    module's docstring for what counts)."""
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return []
    kind = _PI.get(name)
    if kind is not None:
        path = arguments.get("path")
        return [(kind, path)] if isinstance(path, str) and path else []
    rule = _CLAUDE_CODE.get(name)
    if rule is not None:
        path = arguments.get(rule[1])
        return [(rule[0], path)] if isinstance(path, str) and path else []
    if name == _PATCH_TOOL:
        patch = arguments.get("input")  # a custom tool's text, or the function's argument
    elif name in _SHELLS:
        patch = _shell_patch(arguments)
    else:
        return []
    return [("modified", path) for path in patch_paths(patch)]
