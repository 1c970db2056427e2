"""``benchmarks/gen_session.py``: the session id comes from every parameter, so two files of
one seed are two sessions (the second was refused on import under the first one's id)."""

from __future__ import annotations

import json

import pytest

from benchmarks.gen_session import generate_session, main


def _header(path) -> dict:
    with open(path, encoding="utf-8") as fh:
        return json.loads(fh.readline())


def test_files_of_one_seed_with_other_shapes_get_other_ids(tmp_path):
    a = generate_session(tmp_path / "a.jsonl", entries=60, branch_points=2, seed=3)
    b = generate_session(tmp_path / "b.jsonl", entries=80, branch_points=2, seed=3)
    c = generate_session(tmp_path / "c.jsonl", entries=60, branch_points=3, seed=3)
    again = generate_session(tmp_path / "again.jsonl", entries=60, branch_points=2, seed=3)
    ids = [_header(p)["id"] for p in (a, b, c)]
    assert len(set(ids)) == 3
    assert again.read_bytes() == a.read_bytes()  # same arguments: the same file


def test_both_files_import(tmp_path, db):
    from explorer import services

    a = generate_session(tmp_path / "a.jsonl", entries=60, branch_points=2, seed=3)
    b = generate_session(tmp_path / "b.jsonl", entries=80, branch_points=2, seed=3)
    first = services.import_bytes(a.read_bytes(), source_path=str(a))
    second = services.import_bytes(b.read_bytes(), source_path=str(b))
    assert first.ok and second.ok, [str(p) for p in second.problems]
    assert first.session.pk != second.session.pk


def test_help_says_how_the_id_is_made(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "session id is derived from all the arguments" in " ".join(
        capsys.readouterr().out.split()
    )
