"""A session seeded with one secret of each kind in every kind of place: all found, all
masked, and the redacted file is still a valid Pi session that opens like the original."""

from __future__ import annotations

from pathlib import Path

import pytest

from explorer.secrets import (
    RULES,
    RULES_VERSION,
    fingerprint,
    redact_bytes,
    redact_line,
    resolve_pointer,
    reveal,
    scan_bytes,
    scan_entry,
)
from explorer.session import SessionManager, jsonfmt, validate_bytes

from .seeded import IMAGE_DATA, SIGNATURE, build_session, in_context

PI_FIXTURES = Path("/work/shared/fixtures/pi")


@pytest.fixture(scope="module")
def seeded():
    return build_session()


def _entries(data: bytes) -> list[dict]:
    return [jsonfmt.loads(line) for line in data.decode("utf-8").split("\n")[:-1]]


def _resolve(entry: dict, pointer: str):
    value = entry
    for part in pointer.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def _middle(secret: str) -> str:
    """Twelve characters from the random middle of a secret (not its public prefix)."""
    mid = len(secret) // 2
    return secret[mid : mid + 12]


def test_every_seeded_secret_is_found_with_kind_path_and_offsets(seeded):
    data, seeds, _ = seeded
    entries = _entries(data)
    found = {(i, f.kind, f.path): f for i, e in enumerate(entries) for f in scan_entry(e)}
    for seed in seeds:
        finding = found.get((seed.line, seed.kind, seed.path))
        assert finding is not None, f"{seed.kind} not found at line {seed.line} {seed.path}"
        text = _resolve(entries[seed.line], seed.path)
        assert text[finding.start : finding.end] == seed.secret
        assert finding.rules_version == RULES_VERSION
    # nothing else was flagged: the ordinary text around the secrets is not a finding
    assert len(found) == len(seeds)


def test_the_seeds_cover_every_rule_and_every_place(seeded):
    _, seeds, _ = seeded
    kinds = {rule.kind for rule in RULES}
    # these formats are checked in the rule tests; every other rule has a seed in the session
    only_in_rule_tests = {
        "pypi-token",
        "openrouter-api-key",
        "xai-api-key",
        "groq-api-key",
        "sendgrid-api-key",
        "digitalocean-token",
        "age-secret-key",
    }
    assert kinds - {s.kind for s in seeds} == only_in_rule_tests
    entries = _entries(seeded[0])
    where = {(entries[s.line]["type"], s.path) for s in seeds}
    assert {t for t, _ in where} == {
        "message",
        "label",
        "session_info",
        "custom",
        "custom_message",
        "compaction",
        "branch_summary",
    }
    paths = " ".join(p for _, p in where)
    for place in (
        "/thinking",
        "/arguments/",
        "/details/",
        "/alt",
        "/label",
        "/name",
        "/summary",
        "/command",
    ):
        assert place in paths, place
    roles = {
        entries[s.line]["message"]["role"] for s in seeds if entries[s.line]["type"] == "message"
    }
    assert roles == {"user", "assistant", "toolResult", "bashExecution"}


def test_findings_never_hold_the_secret(seeded):
    data, seeds, _ = seeded
    for entry in _entries(data):
        for f in scan_entry(entry):
            blob = repr(f) + jsonfmt.dumps(f.to_json())
            for seed in seeds:
                assert seed.secret not in blob
                # not even a long random piece of it (the vendor prefix alone may show)
                assert _middle(seed.secret) not in blob
            assert f.preview.endswith(f"[REDACTED:{f.kind}]")


def test_fingerprints_are_stable_keyed_and_follow_the_secret(seeded):
    data, seeds, _ = seeded
    entries = _entries(data)
    first = [f.fingerprint for e in entries for f in scan_entry(e)]
    again = [f.fingerprint for e in entries for f in scan_entry(e)]
    assert first == again
    assert len(set(first)) == len(first)
    keyed = [f.fingerprint for e in entries for f in scan_entry(e, key=b"site-key")]
    assert set(keyed).isdisjoint(first)
    # the same secret in another entry gets the same fingerprint
    aws = next(s for s in seeds if s.kind == "aws-access-key").secret
    other = {
        "type": "label",
        "id": "x",
        "parentId": None,
        "timestamp": "t",
        "label": f"again {aws}",
    }
    assert scan_entry(other)[0].fingerprint == fingerprint(aws) == first[0]


def test_redacted_file_holds_no_secret_and_is_a_valid_session(seeded):
    data, seeds, _ = seeded
    redacted = redact_bytes(data)
    for seed in seeds:
        # as the secret appears inside a JSON line (newlines escaped)
        encoded = jsonfmt.dumps(seed.secret)[1:-1].encode()
        middle = jsonfmt.dumps(_middle(seed.secret))[1:-1].encode()
        assert encoded in data and middle in data
        assert encoded not in redacted
        # the body of a secret is gone, not only its full form
        assert middle not in redacted
        assert f"[REDACTED:{seed.kind}]".encode() in redacted
    report = validate_bytes(redacted)
    assert report.ok and report.problems == []
    assert report.entry_count == validate_bytes(data).entry_count


def test_redacted_file_keeps_ids_parents_types_and_key_order(seeded):
    data, _, _ = seeded
    before, after = _entries(data), _entries(redact_bytes(data))
    assert len(before) == len(after)
    for a, b in zip(before, after, strict=True):
        assert (a.get("id"), a.get("parentId"), a["type"]) == (
            b.get("id"),
            b.get("parentId"),
            b["type"],
        )
        assert list(a) == list(b)
        if isinstance(a.get("message"), dict):
            assert list(a["message"]) == list(b["message"])


def test_redacted_session_opens_like_the_original(seeded):
    data, seeds, _ = seeded
    original = SessionManager.load_readonly(data)
    redacted = SessionManager.load_readonly(redact_bytes(data))
    assert redacted.get_leaf_id() == original.get_leaf_id()
    assert [e["id"] for e in redacted.get_branch()] == [e["id"] for e in original.get_branch()]
    assert redacted.get_session_name() == "rotate [REDACTED:gitlab-token]"
    first = original.get_entries()[0]["id"]
    assert redacted.get_label(first) == "leaked [REDACTED:github-token]"
    context = redacted.build_session_context()
    text = jsonfmt.dumps(context.messages)
    assert len(context.messages) == len(original.build_session_context().messages)
    seen = jsonfmt.dumps(original.build_session_context().messages)
    for seed in seeds:
        encoded = jsonfmt.dumps(seed.secret)[1:-1]
        if seed.line in (6, 7, 8):  # label, name, extension state: not part of the context
            continue
        assert encoded in seen and encoded not in text


def test_signatures_and_image_data_are_untouched(seeded):
    data, _, _ = seeded
    after = _entries(redact_bytes(data))
    assistant = after[3]["message"]["content"]
    assert assistant[0]["thinkingSignature"] == SIGNATURE
    assert assistant[1]["textSignature"] == SIGNATURE
    assert assistant[2]["thoughtSignature"] == SIGNATURE
    image = after[2]["message"]["content"][1]
    assert image["data"] == IMAGE_DATA
    assert image["alt"].startswith("console showing [REDACTED:google-api-key]")
    # and the scanner does not report what it must not touch
    before = _entries(data)
    paths = [f.path for e in before for f in scan_entry(e)]
    assert not any("Signature" in p or p.endswith("/data") for p in paths)


def test_lines_without_secrets_are_byte_identical(seeded):
    data, seeds, _ = seeded
    raw_lines = data.split(b"\n")[:-1]
    secret_lines = {s.line for s in seeds}
    for i, line in enumerate(raw_lines):
        out = redact_line(line + b"\n")
        if i in secret_lines:
            assert out != line + b"\n" and out.endswith(b"\n")
        else:
            assert out == line + b"\n"


@pytest.mark.parametrize("name", ["before-compaction.jsonl", "large-session.jsonl"])
def test_real_pi_sessions_without_secrets_redact_to_the_same_bytes(name):
    data = (PI_FIXTURES / name).read_bytes()
    assert redact_bytes(data) == data


def test_reveal_returns_the_secret_only_for_a_matching_finding(seeded):
    data, seeds, _ = seeded
    entries = _entries(data)
    for seed in seeds:
        entry = entries[seed.line]
        finding = next(f for f in scan_entry(entry, key=b"k") if f.path == seed.path)
        assert reveal(entry, finding, key=b"k") == seed.secret
        assert reveal(entry, finding) is None  # another site key
    # the entry changed since the scan: the stale finding reveals nothing
    label_seed = next(s for s in seeds if s.kind == "github-token")
    entry = entries[label_seed.line]
    finding = scan_entry(entry)[0]
    changed = dict(entry, label="leaked " + "x" * 40)
    assert reveal(changed, finding) is None
    assert reveal({"type": "label"}, finding) is None
    assert (
        resolve_pointer(entries[3], "/message/content/3/arguments/env/API_SECRET")
        == (seeded[2]["generic-secret"])
    )
    assert resolve_pointer(entries[3], "/message/content/9") is None


def test_scan_bytes_gives_file_line_numbers_and_entry_ids(seeded):
    data, seeds, _ = seeded
    entries = _entries(data)
    found = [(lf.line, lf.entry_id, lf.finding.kind, lf.finding.path) for lf in scan_bytes(data)]
    expected = [(s.line + 1, entries[s.line]["id"], s.kind, s.path) for s in seeds]
    assert sorted(found) == sorted(expected)


def test_scan_bytes_scans_lines_pi_would_skip():
    gh = build_session()[2]["github-token"]
    data = (
        b'{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}\n{broken '
        + gh.encode()
        + b"\n"
    )
    (lf,) = scan_bytes(data)
    assert (lf.line, lf.entry_id, lf.finding.kind, lf.finding.path) == (2, None, "github-token", "")


def test_allowed_fingerprints_stay_in_clear(seeded):
    data, seeds, secrets = seeded
    key = b"site"
    allowed = {fingerprint(secrets["github-token"], key), fingerprint(secrets["jwt"], key)}
    out = redact_bytes(data, allow=allowed, key=key)
    assert secrets["github-token"].encode() in out and secrets["jwt"].encode() in out
    for seed in seeds:
        if seed.kind not in ("github-token", "jwt"):
            assert seed.secret.encode() not in out
    # a fingerprint made with another key allows nothing
    assert secrets["github-token"].encode() not in redact_bytes(data, allow=allowed)


def _inject(entry: dict, secret: str) -> bool:
    """Append `secret` to the first text (or thinking) block of a message; True if done."""
    message = entry.get("message")
    if entry.get("type") != "message" or not isinstance(message, dict):
        return False
    content = message.get("content")
    if isinstance(content, str):
        message["content"] = f"{content} {secret}"
        return True
    for block in content if isinstance(content, list) else []:
        for field in ("text", "thinking"):
            if (
                isinstance(block, dict)
                and isinstance(block.get(field), str)
                and not block.get("redacted")
            ):
                block[field] = f"{block[field]} {secret}"
                return True
    return False


@pytest.mark.parametrize("name", ["before-compaction.jsonl", "large-session.jsonl"])
def test_real_pi_session_with_injected_secrets_redacts_to_an_equivalent_session(name, seeded):
    secrets = [(v, in_context(k, v)) for k, v in seeded[2].items()]
    raw = (PI_FIXTURES / name).read_bytes()
    entries = [jsonfmt.loads(line) for line in raw.split(b"\n") if line.strip()]
    injected = [
        secrets[i % len(secrets)][0]
        for i, e in enumerate(entries)
        if _inject(e, secrets[i % len(secrets)][1])
    ]
    assert len(injected) > 500
    data = b"".join(jsonfmt.dumps(e).encode() + b"\n" for e in entries)
    redacted = redact_bytes(data)
    for secret in set(injected):
        encoded = jsonfmt.dumps(secret)[1:-1].encode()  # as it appears inside a JSON line
        assert encoded in data
        assert encoded not in redacted
    assert redacted.count(b"[REDACTED:") == len(injected)
    before, after = validate_bytes(data), validate_bytes(redacted)
    assert after.codes() == before.codes() and after.entry_count == before.entry_count
    a, b = SessionManager.load_readonly(data), SessionManager.load_readonly(redacted)
    assert len(b.get_entries()) == len(a.get_entries())
    assert len(b.get_branch()) == len(a.get_branch())
    assert [e["type"] for e in b.get_branch()] == [e["type"] for e in a.get_branch()]
    assert len(b.build_session_context().messages) == len(a.build_session_context().messages)
