"""Path resolution and the per-project session directory (SPEC section 1.1).

Pi resolves every cwd, file and directory like Node's `path.resolve` after expanding `~` and
`file://` URLs; symlinks are never followed, so two spellings of one directory stay distinct
exactly as they do in Pi.
"""

from __future__ import annotations

import os
import posixpath
from urllib.parse import unquote, urlparse

__all__ = [
    "AGENT_DIR_ENV",
    "default_session_dir_path",
    "expand_path",
    "file_timestamp",
    "get_agent_dir",
    "get_default_session_dir",
    "get_sessions_root",
    "resolve_path",
    "session_dir_name",
]

AGENT_DIR_ENV = "PI_CODING_AGENT_DIR"


def _node_normalize(path: str) -> str:
    """`path.normalize` for POSIX; unlike `posixpath.normpath` a leading `//` collapses."""
    if not path:
        return "."
    out = posixpath.normpath(path)
    if out.startswith("//") and not out.startswith("///"):
        out = "/" + out.lstrip("/")
    return out


def expand_path(path: str) -> str:
    """Tilde expansion and `file://` conversion only; a relative path stays relative."""
    if path == "~":
        return os.path.expanduser("~")
    if path.startswith("~/"):
        return _node_normalize(posixpath.join(os.path.expanduser("~"), path[2:]))
    if path.startswith("file://"):
        parsed = urlparse(path)
        return unquote(parsed.path)
    return path


def resolve_path(path: str, base: str | None = None) -> str:
    """Absolute, normalized path (Node `path.resolve` after `expand_path`)."""
    expanded = expand_path(path)
    if posixpath.isabs(expanded):
        return _node_normalize(expanded)
    base_dir = expand_path(base) if base is not None else os.getcwd()
    if not posixpath.isabs(base_dir):
        base_dir = posixpath.join(os.getcwd(), base_dir)
    return _node_normalize(posixpath.join(base_dir, expanded))


def get_agent_dir() -> str:
    """`$PI_CODING_AGENT_DIR` (tilde-expanded) when set and non-empty, else `~/.pi/agent`."""
    env = os.environ.get(AGENT_DIR_ENV)
    if env:
        return expand_path(env)
    return posixpath.join(os.path.expanduser("~"), ".pi", "agent")


def get_sessions_root(agent_dir: str | None = None) -> str:
    return posixpath.join(agent_dir if agent_dir is not None else get_agent_dir(), "sessions")


def session_dir_name(cwd: str) -> str:
    """`--<cwd without one leading separator, separators and colons as dashes>--`."""
    resolved = resolve_path(cwd)
    if resolved[:1] in ("/", "\\"):
        resolved = resolved[1:]
    return "--" + resolved.replace("/", "-").replace("\\", "-").replace(":", "-") + "--"


def default_session_dir_path(cwd: str, agent_dir: str | None = None) -> str:
    """The per-project directory for `cwd`, without creating it."""
    agent = resolve_path(agent_dir if agent_dir is not None else get_agent_dir())
    return _node_normalize(posixpath.join(agent, "sessions", session_dir_name(cwd)))


def get_default_session_dir(cwd: str, agent_dir: str | None = None) -> str:
    """The per-project directory for `cwd`, created if missing."""
    path = default_session_dir_path(cwd, agent_dir)
    os.makedirs(path, exist_ok=True)
    return path


def file_timestamp(iso: str) -> str:
    """File-name form of an ISO timestamp: every `:` and `.` becomes `-`."""
    return iso.replace(":", "-").replace(".", "-")
