"""The command line scans and redacts files without ever printing a secret."""

from __future__ import annotations

import orjson

from explorer.secrets.__main__ import main
from explorer.session import validate_bytes

from .seeded import build_session


def test_scan_prints_masked_findings_and_exits_1(tmp_path, capsysbinary):
    data, seeds, _ = build_session()
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    assert main(["scan", str(path)]) == 1
    out = capsysbinary.readouterr().out
    records = [orjson.loads(line) for line in out.splitlines()]
    assert sorted((r["line"], r["kind"], r["path"]) for r in records) == sorted(
        (s.line + 1, s.kind, s.path) for s in seeds
    )
    for seed in seeds:
        assert seed.secret.encode() not in out


def test_scan_of_a_clean_file_exits_0(tmp_path, capsysbinary):
    path = tmp_path / "clean.jsonl"
    path.write_bytes(b'{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}\n')
    assert main(["scan", str(path)]) == 0
    assert capsysbinary.readouterr().out == b""


def test_redact_writes_a_valid_masked_session(tmp_path):
    data, seeds, _ = build_session()
    src, dst = tmp_path / "s.jsonl", tmp_path / "out.jsonl"
    src.write_bytes(data)
    assert main(["redact", str(src), "-o", str(dst)]) == 0
    out = dst.read_bytes()
    assert validate_bytes(out).ok
    assert out.count(b"[REDACTED:") == len(seeds)
    assert src.read_bytes() == data  # the source is never touched
