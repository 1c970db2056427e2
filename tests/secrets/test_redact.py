"""Masking text, entries and raw JSONL lines."""

from __future__ import annotations

import copy

from explorer.secrets import (
    Match,
    mask_text,
    redact_bytes,
    redact_entry,
    redact_for_search,
    redact_line,
    scan_entry,
    scan_text,
)
from explorer.session import jsonfmt

from .seeded import make_secrets

S = make_secrets(99)
GH, AWS = S["github-token"], S["aws-access-key"]


def test_mask_text_replaces_each_span_with_its_kind():
    text = f"a {GH} b {AWS} c"
    assert (
        mask_text(text, scan_text(text))
        == "a [REDACTED:github-token] b [REDACTED:aws-access-key] c"
    )
    assert mask_text(text, []) == text


def test_mask_text_merges_overlapping_spans_and_ignores_bad_ones():
    text = "0123456789abcdef"
    spans = [Match("a", 2, 6), Match("b", 4, 9), Match("c", 12, 40), Match("d", 5, 5)]
    assert mask_text(text, spans) == "01[REDACTED:a]9abcdef"


def test_mask_text_with_entry_findings_of_one_path():
    entry = {"type": "label", "id": "1", "parentId": None, "timestamp": "t", "label": f"x {GH} y"}
    findings = scan_entry(entry)
    assert [f.path for f in findings] == ["/label"]
    assert mask_text(entry["label"], findings) == "x [REDACTED:github-token] y"


def test_redact_for_search_leaves_no_fragment_to_match():
    text = f"the token is {GH}, keep it"
    indexed = redact_for_search(text)
    assert indexed == "the token is [REDACTED:github-token], keep it"
    for n in (6, 10, 20):
        assert GH[4 : 4 + n] not in indexed


def test_redact_entry_copies_only_what_changes_and_never_mutates():
    entry = {
        "type": "message",
        "id": "e1",
        "parentId": None,
        "timestamp": "2025-03-04T05:06:07.000Z",
        "message": {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "read",
            "content": [
                {"type": "text", "text": "nothing here"},
                {"type": "text", "text": f"GH={GH}"},
            ],
            "details": {"big": ["untouched"] * 3},
            "isError": False,
            "timestamp": 1,
        },
    }
    before = copy.deepcopy(entry)
    out = redact_entry(entry)
    assert entry == before
    assert out["message"]["content"][1]["text"] == "GH=[REDACTED:github-token]"
    assert out["message"]["content"][0] is entry["message"]["content"][0]
    assert out["message"]["details"] is entry["message"]["details"]
    assert list(out["message"]) == list(entry["message"])
    clean = {"type": "label", "id": "x", "parentId": None, "timestamp": "t", "label": "fine"}
    assert redact_entry(clean) is clean


def test_structural_fields_are_never_changed_even_when_they_look_like_secrets():
    entry = {
        "type": "label",
        "id": AWS,
        "parentId": GH,
        "timestamp": "t",
        "targetId": AWS,
        "label": AWS,
    }
    out = redact_entry(entry)
    assert (out["id"], out["parentId"], out["targetId"]) == (AWS, GH, AWS)
    assert out["label"] == "[REDACTED:aws-access-key]"


def test_redacted_thinking_and_encrypted_reasoning_are_opaque():
    block = {
        "type": "thinking",
        "thinking": f"opaque {GH}",
        "redacted": True,
        "thinkingSignature": GH,
    }
    other = {"type": "reasoning", "encrypted_content": GH, "summary": f"note {GH}"}
    raw = {"type": "redacted_thinking", "data": f"x {GH}"}
    entry = {
        "type": "custom",
        "id": "1",
        "parentId": None,
        "timestamp": "t",
        "data": [block, other, raw],
    }
    out = redact_entry(entry)
    assert out["data"][0] is block
    assert out["data"][2] is raw
    assert out["data"][1]["encrypted_content"] == GH
    assert out["data"][1]["summary"] == "note [REDACTED:github-token]"


def test_base64_data_uris_are_not_scanned():
    uri = "data:image/png;base64,iVBORw0KGgo" + AWS + "AAAA"
    entry = {"type": "custom", "id": "1", "parentId": None, "timestamp": "t", "data": {"src": uri}}
    assert scan_entry(entry) == []


def test_redact_line_keeps_crlf_and_unchanged_lines_byte_for_byte():
    raw = b'{"type":"label","id":"1","parentId":null,"timestamp":"t","label":  "ok"}\r\n'
    assert redact_line(raw) == raw  # odd spacing kept: nothing to redact
    line = jsonfmt.dumps(
        {"type": "label", "id": "1", "parentId": None, "timestamp": "t", "label": GH}
    )
    out = redact_line(line.encode() + b"\r\n")
    assert out.endswith(b"\r\n")
    assert jsonfmt.loads(out)["label"] == "[REDACTED:github-token]"


def test_redact_line_sees_through_json_escapes():
    escaped = "".join(f"\\u{ord(c):04x}" for c in GH)
    raw = (
        '{"type":"label","id":"1","parentId":null,"timestamp":"t","label":"' + escaped + '"}\n'
    ).encode()
    out = redact_line(raw)
    assert b"[REDACTED:github-token]" in out and escaped.encode() not in out


def test_lines_pi_skips_are_masked_as_text():
    broken = f'{{"type":"message","id":"1", "text": "{GH}"'.encode() + b"\n"
    out = redact_line(broken)
    assert GH.encode() not in out and out.endswith(b"\n")
    assert redact_line(f'"{GH}"\n'.encode()) == b'"[REDACTED:github-token]"\n'
    assert redact_line(b"5\n") == b"5\n"
    assert redact_line(b"   \n") == b"   \n"


def test_redact_bytes_splits_only_on_newlines():
    # a lone CR is JSON whitespace inside a line, not a line break
    a = b'{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}\n'
    b = (
        '{"type":"label",\r"id":"1","parentId":null,"timestamp":"t","label":"' + GH + '"}'
    ).encode()
    out = redact_bytes(a + b)
    assert out.startswith(a)
    assert out.count(b"\n") == 1 and not out.endswith(b"\n")
    assert jsonfmt.loads(out.split(b"\n")[1])["label"] == "[REDACTED:github-token]"


def test_lone_surrogates_survive_redaction():
    raw = (
        '{"type":"label","id":"1","parentId":null,"timestamp":"t","label":"\\ud800 ' + GH + '"}\n'
    ).encode()
    out = redact_line(raw)
    assert b"\\ud800" in out
    assert jsonfmt.loads(out)["label"] == "\ud800 [REDACTED:github-token]"


def test_ids_inside_tool_arguments_and_extension_data_are_scanned():
    call = {"type": "toolCall", "id": "call_1", "name": "api", "arguments": {"id": AWS, "type": GH}}
    entry = {
        "type": "message",
        "id": "m1",
        "parentId": None,
        "timestamp": "t",
        "message": {"role": "assistant", "content": [call], "timestamp": 1},
    }
    out = redact_entry(entry)
    assert out["message"]["content"][0]["id"] == "call_1"
    assert out["message"]["content"][0]["arguments"] == {
        "id": "[REDACTED:aws-access-key]",
        "type": "[REDACTED:github-token]",
    }
    custom = {"type": "custom", "id": "c1", "parentId": "m1", "timestamp": "t", "data": {"id": GH}}
    assert [f.path for f in scan_entry(custom)] == ["/data/id"]
