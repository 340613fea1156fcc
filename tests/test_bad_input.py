"""Bad input everywhere gets a clear error: HTTP bodies, bucket fields, config YAML and import files.

Each case asserts the message a user would read. HTTP errors are JSON with a 4xx status, never
a 500, and no output anywhere carries a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ombre_brain import ConfigError, ValidationError, load_config
from ombre_brain.portability.jsonl import FORMAT, ImportProblems, import_jsonl
from ombre_brain.portability.ombre_md import import_ombre_md

SPACE = "haven:xiaoyu"


def _post(client, path, **kw):
    kw.setdefault("headers", {"Content-Type": "application/json"})
    return client.post(path, **kw)


HTTP_CASES = [
    # (id, method, path, body (dict -> JSON, bytes -> raw), status, code, message part)
    ("malformed json", "POST", "/v1/buckets", b'{"space": "haven:xiaoyu", "title": ', 400, "bad_json",
     "malformed JSON at line 1"),
    ("array body", "POST", "/v1/buckets", b'[1, 2]', 400, "bad_json", "expected a JSON object, got list"),
    ("empty body", "POST", "/v1/buckets", b"", 400, "bad_json", "got an empty body"),
    ("not utf-8", "POST", "/v1/buckets", b'{"title": "\xff\xfe"}', 400, "bad_json", "body is not UTF-8"),
    ("importance wrong type", "POST", "/v1/buckets", {"space": SPACE, "title": "t", "importance": "high"}, 400,
     "invalid", "importance: expected an integer between 1 and 10"),
    ("valence out of range", "POST", "/v1/buckets", {"space": SPACE, "title": "t", "valence": 1.5}, 400, "invalid",
     "valence: expected a value between 0 and 1, got 1.5"),
    ("unknown field", "POST", "/v1/buckets", {"space": SPACE, "title": "t", "colour": "red"}, 400, "unknown_field",
     "unknown field(s) colour"),
    ("bad space name", "POST", "/v1/buckets", {"space": "haven xiaoyu!", "title": "t"}, 400, "bad_space",
     "expected a space name of letters, digits and _.:-"),
    ("missing space", "POST", "/v1/buckets", {"title": "t"}, 400, "invalid", "space: is required"),
    ("missing title", "POST", "/v1/buckets", {"space": SPACE, "body": "no title"}, 400, "invalid",
     "title: is required"),
    ("tags not a list", "POST", "/v1/buckets", {"space": SPACE, "title": "t", "tags": "海边"}, 400, "invalid",
     "tags: expected a list of strings"),
    ("naive time", "POST", "/v1/buckets", {"space": SPACE, "title": "t", "created": "2026-11-30T20:00:00"}, 400,
     "invalid", "has no UTC offset"),
    ("unknown type", "POST", "/v1/buckets", {"space": SPACE, "title": "t", "type": "diary"}, 400, "invalid",
     "type: expected one of dynamic, permanent, feel, dream, source, journal"),
    ("edge relation", "POST", "/v1/edges", {"space": SPACE, "from_id": "a", "to_id": "b", "relation": "loves"}, 400,
     "invalid", "relation: expected one of same_event"),
    ("edge unknown field", "POST", "/v1/edges", {"space": SPACE, "from_id": "a", "to_id": "b",
                                                 "relation": "same_event", "weight": 1}, 400, "unknown_field",
     "unknown field(s) weight"),
    ("list limit", "GET", f"/v1/buckets?space={SPACE}&limit=abc", None, 400, "invalid",
     "limit: expected an integer, got 'abc'"),
    ("list limit range", "GET", f"/v1/buckets?space={SPACE}&limit=100000", None, 400, "invalid",
     "limit: expected an integer between 1 and 1000"),
    ("unknown bucket", "GET", f"/v1/buckets/nope?space={SPACE}", None, 404, "not_found", "no bucket 'nope'"),
    ("inject query type", "POST", "/v1/inject", {"space": SPACE, "session_id": "s", "query": 42}, 400, "invalid",
     "query: is required and must be a string"),
    ("inject unknown field", "POST", "/v1/inject", {"space": SPACE, "query": "hi", "user": "x"}, 400,
     "unknown_field", "unknown field(s) user"),
    ("inject bad now", "POST", "/v1/inject", {"space": SPACE, "query": "hi", "now": "yesterday"}, 400, "invalid",
     "now: expected an ISO-8601 time"),
    ("purge unknown field", "POST", "/v1/purge", {"space": SPACE, "ids": ["a"]}, 400, "unknown_field",
     "unknown field(s) ids"),
    ("unknown route", "GET", "/v1/nothing-here", None, 404, "not_found", ""),
]


@pytest.mark.parametrize("case", HTTP_CASES, ids=[c[0] for c in HTTP_CASES])
def test_http_bad_input_is_a_clear_json_error(client, case):
    _, method, path, body, status, code, message = case
    if isinstance(body, dict):
        r = client.request(method, path, json=body)
    elif isinstance(body, bytes):
        r = client.request(method, path, content=body, headers={"Content-Type": "application/json"})
    else:
        r = client.request(method, path)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["code"] == code
    assert message in err["message"]
    assert "Traceback" not in r.text


def test_http_body_over_the_limit_is_413_json(client, brain):
    limit = brain.config.server.max_body_bytes
    big = json.dumps({"space": SPACE, "title": "big", "body": "x" * (limit + 10)})
    r = client.post("/v1/buckets", content=big, headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    assert r.json()["error"] == {"code": "body_too_large",
                                 "message": f"request body is larger than the limit of {limit} bytes"}


def test_http_patch_cannot_change_id(client):
    bid = client.post("/v1/buckets", json={"space": SPACE, "title": "keep my id"}).json()["id"]
    r = client.patch(f"/v1/buckets/{bid}?space={SPACE}", json={"id": "other"})
    assert r.status_code == 400
    assert r.json()["error"]["message"] == "id: cannot be changed by an update"


# ---------------------------------------------------------------- bucket input through the library

BUCKET_CASES = [
    ({"id": "bad id!", "title": "t"}, "id: expected an id of letters, digits and _.:- (1-128 chars)"),
    ({"title": "x" * 201}, "title: is 201 characters; the limit is 200"),
    ({"title": "t", "tags": [f"t{i}" for i in range(33)]}, "tags: has 33 tags; the limit is 32"),
    ({"title": "t", "tags": [""]}, "tags: each tag must be 1-64 visible characters"),
    ({"title": "t", "comments": ["just text"]}, "comments[0]: each comment is {author, created, content}"),
    ({"title": "t", "source_ref": {"path": "a.md", "start_line": 0}},
     "start_line: expected a value between 1 and 1000000000, got 0"),
    ({"title": "t", "event_time": "next tuesday"}, "event_time: expected an ISO-8601 time with offset"),
    ({"title": "t", "confidence": 2}, "confidence: expected a value between 0 and 1, got 2"),
    ({"title": "t\x00"}, "title: contains a NUL character"),
    ({"title": "t", "pinned": "yes"}, 'pinned: expected true or false, got "yes"'),
    ({"title": "t", "origin": "system"}, "origin: expected one of user, assistant, derived"),
    ({"title": "   "}, "title: must not be empty"),
]


@pytest.mark.parametrize("fields,message", BUCKET_CASES, ids=[c[1][:30] for c in BUCKET_CASES])
def test_bucket_mistakes_name_the_field(brain, fields, message):
    with pytest.raises(ValidationError) as exc:
        brain.write(space=SPACE, **fields)
    assert message in exc.value.message
    assert brain.store.count(SPACE) == 0


def test_duplicate_id_and_bad_edges(brain):
    brain.write(space=SPACE, id="a1", title="first")
    with pytest.raises(ValidationError, match="bucket 'a1' already exists in space 'haven:xiaoyu'"):
        brain.write(space=SPACE, id="a1", title="second", dedupe=False)
    with pytest.raises(ValidationError, match="an edge must join two different buckets"):
        brain.link(SPACE, "a1", "a1", "same_event", 0.5)
    with pytest.raises(ValidationError, match="confidence: expected a number between 0 and 1, got 7"):
        brain.link(SPACE, "a1", "b1", "same_event", 7)


# ---------------------------------------------------------------- config

CONFIG_CASES = [
    ("gateway:\n  cooldown_hourz: 3\n", "key 'gateway.cooldown_hourz': unknown key (known keys here:"),
    ("gateway:\n  cooldown_hours: soon\n", "key 'gateway.cooldown_hours': expected a number, got str \"soon\""),
    ("store:\n  chroma:\n    port: 70000\n", "key 'store.chroma.port': expected a value between 1 and 65535"),
    ("store:\n  chroma:\n    mode: cloud\n", "key 'store.chroma.mode': expected one of 'embedded', 'http'"),
    ("gateway: [1, 2\n", "invalid YAML at line"),
    ("- just\n- a list\n", "expected a mapping at the top level, got list"),
    ("identity:\n  ai_name: [Haven]\n", "key 'identity.ai_name': expected a string"),
    ("diffusion:\n  relation_weights:\n    hugs: 1.0\n", "key 'diffusion.relation_weights.hugs': unknown relation"),
]


@pytest.mark.parametrize("text,message", CONFIG_CASES, ids=[c[1][:35] for c in CONFIG_CASES])
def test_config_mistakes_name_file_and_key(tmp_path, text, message):
    path = tmp_path / "persona.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    assert str(path) in exc.value.message
    assert message in exc.value.message


def test_config_missing_file_and_bad_overrides(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError) as exc:
        load_config({"server": {"max_body_bytes": 10}})
    assert "<overrides>: key 'server.max_body_bytes': expected a value between 1024" in exc.value.message


def test_config_check_command_names_file_and_key_without_traceback(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("gateway:\n  skip_recent_rounds: -3\n", encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "ombre_brain.cli", "config", "check", str(path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.startswith(f"ombre-brain: error: {path}: line 2: key 'gateway.skip_recent_rounds': ")
    assert "Traceback" not in r.stderr + r.stdout
    ok = subprocess.run([sys.executable, "-m", "ombre_brain.cli", "config", "check"], capture_output=True,
                        text=True, timeout=60)
    assert ok.returncode == 0 and "# ok: config version" in ok.stderr


# ---------------------------------------------------------------- import files


def _header(**over) -> str:
    h = {"format": FORMAT, "version": 1, "space": SPACE, "exported_at": "2026-11-30T12:00:00+00:00",
         "model_id": "x", "counts": {"buckets": 1, "edges": 0, "facts": 0}}
    h.update(over)
    return json.dumps(h)


def _bucket(**over) -> str:
    b = {"kind": "bucket", "id": "b1", "space": SPACE, "title": "海边", "body": "贝壳"}
    b.update(over)
    return json.dumps(b, ensure_ascii=False)


@pytest.mark.parametrize("lines,message", [
    ([], "the file is empty"),
    (["not json"], "line 1: malformed JSON at column 1: Expecting value (the first line must be the"),
    ([json.dumps({"format": "something-else", "version": 1, "space": SPACE})],
     'line 1: not an Ombre Brain export: expected "format": "ombre-brain-export", got "something-else"'),
    ([_header(version=2), _bucket()], "line 1: written by a newer Ombre Brain (format version 2)"),
    ([_header(space="no space!"), _bucket()], "line 1: space: expected a space name"),
], ids=["empty", "header not json", "wrong format", "newer version", "bad header space"])
def test_import_header_mistakes(brain, tmp_path, lines, message):
    path = tmp_path / "in.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    with pytest.raises(ValidationError) as exc:
        import_jsonl(brain, path)
    assert message in exc.value.message
    assert brain.store.count(SPACE) == 0


def test_import_names_every_bad_line_and_writes_nothing(brain, tmp_path):
    path = tmp_path / "in.jsonl"
    lines = [
        _header(counts={"buckets": 9, "edges": 1, "facts": 0}),
        _bucket(),                                                        # 2: fine
        '{"kind": "bucket", "id": "b2", ',                                # 3: malformed
        _bucket(id="b3", valence="warm"),                                 # 4: bad field
        json.dumps({"kind": "blob", "space": SPACE}),                     # 5: unknown kind
        _bucket(id="b1"),                                                 # 6: duplicate id
        _bucket(id="b6", embedding=[0.1, 0.2]),                           # 7: embeddings are not part of the format
        _bucket(id="b7", space="other:space"),                            # 8: wrong space
        json.dumps({"kind": "edge", "space": SPACE, "from_id": "b1", "to_id": "zz", "relation": "same_event",
                    "confidence": 0.5}),                                  # 9: edge to nowhere
        json.dumps({"kind": "edge", "space": SPACE, "from_id": "b1", "to_id": "b1", "relation": "same_event",
                    "confidence": 0.5}),                                  # 10: self edge
        _bucket(id=None),                                                 # 11: no id
    ]
    lines.append(json.dumps({"kind": "fact", "space": SPACE, "record_id": "r1", "key": "diet"}))  # 12: bad fact
    data = ("\n".join(lines) + "\n").encode() + b'{"kind": "bucket", "title": "\xff"}\n'  # 13: not UTF-8
    path.write_bytes(data)
    with pytest.raises(ImportProblems) as exc:
        import_jsonl(brain, path)
    got = [str(p) for p in exc.value.problems]
    expected = [
        "line 3: malformed JSON at column",
        "line 4: bucket 'b3': valence: expected a number between 0 and 1",
        "line 5: unknown kind \"blob\" (expected one of bucket, edge, fact)",
        "line 6: bucket 'b1' appears twice (first at line 2)",
        "line 7: bucket 'b6': unknown field(s) embedding",
        "line 8: bucket is in space \"other:space\" but the header says 'haven:xiaoyu'",
        "line 10: edge joins a bucket to itself",
        "line 11: bucket has no id",
        "line 12: fact 'r1': subject: expected a string",
        "line 13: not UTF-8 (byte 0xff",
        "line 9: edge b1->zz: to_id 'zz' is neither in the file nor in space 'haven:xiaoyu'",
    ]
    assert len(got) == len(expected), got
    for want, have in zip(expected, got, strict=True):
        assert have.startswith(want), (want, have)
    assert f"{path}: 11 problems, nothing imported" in exc.value.message
    assert brain.store.count(SPACE) == 0


def test_import_detects_a_truncated_export(brain, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text(_header(counts={"buckets": 3, "edges": 0, "facts": 0}) + "\n" + _bucket() + "\n",
                    encoding="utf-8")
    with pytest.raises(ImportProblems, match=r"header: says 3 buckets but the file holds 1 \(truncated"):
        import_jsonl(brain, path)


def test_import_path_mistakes(brain, tmp_path):
    with pytest.raises(ValidationError, match="no such file"):
        import_jsonl(brain, tmp_path / "missing.jsonl")
    with pytest.raises(ValidationError, match="is a directory; a JSONL import takes a file"):
        import_jsonl(brain, tmp_path)
    with pytest.raises(ValidationError, match="no such folder"):
        import_ombre_md(brain, tmp_path / "nope", space=SPACE)
    with pytest.raises(ValidationError, match="no .md files found"):
        import_ombre_md(brain, tmp_path, space=SPACE)


def test_cli_import_errors_are_one_clear_message(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "ombre-brain-export", "version": 1, "space": "haven:x"}\n{oops}\n', encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "ombre_brain.cli", "import", "--data", str(tmp_path / "d"), str(bad)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "ombre-brain: error: " in r.stderr and "line 2: malformed JSON at column 2" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    md = subprocess.run([sys.executable, "-m", "ombre_brain.cli", "import", "--from", "ombre-md", "--data",
                         str(tmp_path / "d"), str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert md.returncode == 2
    assert "--space is required with --from ombre-md" in md.stderr
    assert "Traceback" not in md.stderr
