"""The files a tool call reads or modifies (``explorer.session.tool_files`` through
``describe.file_uses``): Pi's tools as before, Claude Code's file tools and the files a Codex
patch names; what does not count (searches, shell command lines) and arguments of any
shape (no exception, no use)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.session.describe import file_uses, files_touched
from explorer.session.tool_files import call_uses, patch_paths
from tests.conftest import pi_fixture_files


def _reply(*calls: tuple[Any, Any]) -> dict:
    content = [{"type": "toolCall", "id": f"c{k}", "name": n, "arguments": a}
               for k, (n, a) in enumerate(calls)]  # fmt: skip
    return {"type": "message", "id": "r", "message": {"role": "assistant", "content": content}}


PATCH = (
    "*** Begin Patch\n"
    "*** Add File: docs/new.md\n"
    "+# New\n"
    "+*** Update File: not/a/header.py\n"  # a line of the new file's content
    "*** Update File: src/app.py\n"
    "@@ def f():\n"
    " *** Delete File: context/line.py\n"  # a context line that quotes a header
    "-    return 1\n"
    "+    return 2\n"
    "*** Update File: old/name.py\n"
    "*** Move to: new/name.py\n"
    "@@\n"
    "-a\n"
    "+b\n"
    "*** Delete File: gone.txt\n"
    "*** End Patch"
)
PATCHED = ["docs/new.md", "src/app.py", "old/name.py", "new/name.py", "gone.txt"]


@pytest.mark.parametrize(
    ("name", "arguments", "want"),
    [
        # Pi: unchanged.
        ("read", {"path": "a.py"}, [("read", "a.py")]),
        ("edit", {"path": "a.py", "oldText": "x", "newText": "y"}, [("modified", "a.py")]),
        ("write", {"path": "b.py", "content": ""}, [("modified", "b.py")]),
        ("read", {"file_path": "a.py"}, []),  # Pi's tools take ``path``
        ("bash", {"command": "cat a.py"}, []),
        # Claude Code.
        ("Read", {"file_path": "/w/a.py", "offset": 10}, [("read", "/w/a.py")]),
        ("NotebookRead", {"notebook_path": "/w/n.ipynb"}, [("read", "/w/n.ipynb")]),
        ("Edit", {"file_path": "/w/a.py", "old_string": "", "new_string": "x"},
         [("modified", "/w/a.py")]),
        ("MultiEdit", {"file_path": "/w/m.py", "edits": [{"old_string": "a"}]},
         [("modified", "/w/m.py")]),
        ("Write", {"file_path": "/w/new.py", "content": "x"}, [("modified", "/w/new.py")]),
        ("NotebookEdit", {"notebook_path": "/w/n.ipynb", "new_source": "x"},
         [("modified", "/w/n.ipynb")]),
        ("Read", {"path": "/w/a.py"}, []),  # Claude Code's tools take ``file_path``
        ("NotebookEdit", {"file_path": "/w/n.ipynb"}, []),
        ("Glob", {"pattern": "**/*.py", "path": "/w"}, []),
        ("Grep", {"pattern": "TODO", "path": "/w/a.py"}, []),
        ("LS", {"path": "/w"}, []),
        ("Bash", {"command": "cat /w/a.py && sed -n 1,5p /w/b.py"}, []),
        ("Task", {"prompt": "read /w/a.py"}, []),
        # Codex.
        ("apply_patch", {"input": PATCH}, [("modified", p) for p in PATCHED]),
        ("shell", {"command": ["apply_patch", PATCH]}, [("modified", p) for p in PATCHED]),
        ("local_shell", {"action": {"type": "exec", "command": ["apply_patch", PATCH]}},
         [("modified", p) for p in PATCHED]),
        ("shell", {"command": ["bash", "-lc", "cat a.py"]}, []),
        ("shell", {"command": ["bash", "-lc", f"apply_patch <<'EOF'\n{PATCH}\nEOF"]}, []),
        ("exec_command", {"cmd": "sed -n 1,20p src/app.py"}, []),
        ("apply_patch", {"input": "*** Begin Patch\n*** End Patch"}, []),
    ],
)  # fmt: skip
def test_each_tool_shape(name: str, arguments: Any, want: list[tuple[str, str]]):
    assert call_uses(name, arguments) == want
    assert file_uses(_reply((name, arguments))) == want


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("Read", None), ("Read", "a.py"), ("Read", ["a.py"]), ("Read", {"file_path": 7}),
        ("Read", {"file_path": ""}), ("Edit", {"file_path": None}),
        ("MultiEdit", {"file_path": {"p": "a"}}), ("Write", {"input": "a.py"}),
        ("NotebookEdit", {"notebook_path": ["n"]}), ("read", {"path": ""}),
        ("apply_patch", {"input": None}), ("apply_patch", {"input": 5}),
        ("apply_patch", {"input": ["*** Add File: a"]}), ("apply_patch", {"raw": "{oops"}),
        ("apply_patch", "*** Add File: a"), ("apply_patch", {"input": "*** Add File:   \n"}),
        ("shell", {"command": "apply_patch"}), ("shell", {"command": ["apply_patch"]}),
        ("shell", {"command": ["apply_patch", 3]}), ("local_shell", {"action": "x"}),
        ("local_shell", {"action": {"command": None}}), (None, {"file_path": "a"}),
        (7, {"path": "a"}),
    ],
)  # fmt: skip
def test_malformed_arguments_name_nothing(name: Any, arguments: Any):
    assert call_uses(name, arguments) == []
    assert file_uses(_reply((name, arguments))) == []


def test_calls_keep_their_order_and_a_file_both_read_and_modified_counts_as_modified():
    entry = _reply(
        ("Read", {"file_path": "/w/a.py"}),
        ("Grep", {"pattern": "x"}),
        ("apply_patch", {"input": "*** Update File: b.py\n@@\n-x\n+y"}),
        ("Edit", {"file_path": "/w/a.py"}),
        ("read", {"path": "c.py"}),
    )
    assert file_uses(entry) == [
        ("read", "/w/a.py"), ("modified", "b.py"), ("modified", "/w/a.py"), ("read", "c.py"),
    ]  # fmt: skip
    assert files_touched([entry]) == {"read": ["c.py"], "modified": ["b.py", "/w/a.py"]}


def test_only_assistant_replies_call_tools():
    entry = _reply(("Read", {"file_path": "/w/a.py"}))
    entry["message"]["role"] = "user"
    assert file_uses(entry) == []


def test_a_header_counts_only_at_the_start_of_a_line():
    assert patch_paths("x *** Add File: a\n+*** Add File: b\n *** Add File: c\n") == []
    assert patch_paths("*** Add File: a \r\n*** Add File: b\r\n") == ["a", "b"]


# Arguments of every shape: values JSON can hold, in dicts that sometimes carry the keys
# the rules read.
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)  # fmt: skip
PATCH_TEXT = st.lists(
    st.sampled_from(["*** Begin Patch", "*** Add File: ", "*** Update File: ",
                     "*** Delete File: ", "*** Move to: ", "+", "-", " ", "@@", "*** End Patch"])
    .flatmap(lambda head: st.text(max_size=12).map(lambda rest: head + rest)),
    max_size=8,
).map("\n".join)  # fmt: skip
KEYS = ["path", "file_path", "notebook_path", "input", "command", "action"]
ARGUMENTS = st.one_of(
    JSON,
    st.dictionaries(st.sampled_from(KEYS), st.one_of(JSON, PATCH_TEXT, st.text()), max_size=4),
    st.builds(lambda p: {"command": ["apply_patch", p]}, PATCH_TEXT),
    st.builds(lambda p: {"action": {"command": ["apply_patch", p]}}, PATCH_TEXT),
)
NAMES = st.one_of(
    st.sampled_from(["read", "edit", "write", "bash", "Read", "NotebookRead", "Edit", "MultiEdit",
                     "Write", "NotebookEdit", "Glob", "Grep", "Bash", "apply_patch", "shell",
                     "local_shell", "exec_command"]),
    JSON,
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(NAMES, ARGUMENTS), max_size=4))
def test_any_arguments_give_named_paths_and_never_raise(calls: list[tuple[Any, Any]]):
    """Whatever the arguments, each use is ("read" | "modified", a non-empty text) that the
    call's arguments hold, and the entry's uses are its calls' in call order."""
    uses = file_uses(_reply(*calls))
    expected: list[tuple[str, str]] = []
    for name, arguments in calls:
        one = call_uses(name, arguments)
        text = json.dumps(arguments, ensure_ascii=False)
        for kind, path in one:
            assert kind in ("read", "modified")
            assert isinstance(path, str) and path
            assert json.dumps(path, ensure_ascii=False)[1:-1] in text
            assert kind == "modified" or name in ("read", "Read", "NotebookRead")
        expected.extend(one)
    assert uses == expected


def _pi_rule(entry: Any) -> list[tuple[str, str]]:
    """Pi's rule as it was before the other agents (the parity reference, written out)."""
    old = {"read": "read", "write": "modified", "edit": "modified"}
    m = entry.get("message") if isinstance(entry, dict) and entry.get("type") == "message" else None
    if (
        not isinstance(m, dict)
        or m.get("role") != "assistant"
        or not isinstance(m.get("content"), list)
    ):
        return []
    out = []
    for b in m["content"]:
        if isinstance(b, dict) and b.get("type") == "toolCall" and b.get("name") in old:
            args = b.get("arguments")
            path = args.get("path") if isinstance(args, dict) else None
            if isinstance(path, str) and path:
                out.append((old[b["name"]], path))
    return out  # fmt: skip


@pytest.mark.pi_fixtures
@pytest.mark.parametrize("path", pi_fixture_files(), ids=lambda p: p.name)
def test_pi_files_answer_as_before(path):
    """Pi parity: every line of Pi's own files names the files it named before."""
    named = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            assert file_uses(value) == _pi_rule(value)
            named += bool(_pi_rule(value))
    assert named or "read" not in path.read_text(encoding="utf-8")
