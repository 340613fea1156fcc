"""`doctor`: each kind of disagreement between the ledger, Chroma and the lexical index is found and repaired."""

from __future__ import annotations

import numpy as np

from ombre_brain import Brain, cli
from ombre_brain.buckets import Bucket, Moment
from ombre_brain.store.doctor import doctor

SPACE = "haven:doc"


def break_everything(brain) -> dict[str, str]:
    ids = {k: brain.write(space=SPACE, id=k, title=t, body=b) for k, t, b in [
        ("lost", "Chroma lost me", "My moments vanished from Chroma."),
        ("stale", "旧的文字", "Chroma 里还是旧的句子。"),
        ("bare", "No moment rows", "The ledger forgot my moments."),
        ("ok", "All fine", "Nothing wrong here."),
    ]}
    brain.link(SPACE, "ok", "lost", "relates_to", 0.5)
    store = brain.store
    store.chroma.delete(SPACE, ["lost#0", "lost#1"])                                   # missing in Chroma
    ghost = Bucket(id="ghost", space=SPACE, title="never in the ledger")
    store.writer._chroma_put(ghost, [Moment("ghost#0", "ghost", 0, "title", ghost.title, False)],
                             store.embedder.passages([ghost.title]))                      # orphan in Chroma
    store.chroma.upsert(SPACE, ["stale#1"], np.asarray(store.embedder.passages(["old words"])),
                        [{"space": SPACE, "bucket_id": "stale", "text_hash": "0ld"}])   # stale text in Chroma
    with store.ledger.tx() as c:
        c.execute("DELETE FROM moments WHERE space = ? AND bucket_id = 'bare'", (SPACE,))  # bucket without moments
        c.execute("INSERT INTO moments(space, id, bucket_id, ordinal, section, context_only, text, tokens, start, "
                  "\"end\") VALUES (?, 'nobody#0', 'nobody', 0, 'title', 0, 'x', 'x', -1, -1)", (SPACE,))
        c.execute("INSERT INTO edges(space, from_id, to_id, relation, confidence, created) VALUES "
                  "(?, 'ok', 'vanished', 'same_event', 0.5, '2026-01-01T00:00:00+00:00')", (SPACE,))
    store.lexical(SPACE).remove(["ok#0"])                                                 # missing in lexical
    store.chroma.collection("haven:forgotten-space")                                      # orphan collection
    return ids


def test_doctor_finds_names_and_repairs_every_kind_of_damage(tmp_path, capsys):
    with Brain.open(tmp_path / "d") as brain:
        break_everything(brain)
        found = doctor(brain, repair=False)
        assert not found["consistent"]
        e = found["spaces"][SPACE]
        assert e["missing_in_chroma"] == ["lost#0", "lost#1"]
        assert e["orphans_in_chroma"] == ["ghost#0"]
        assert e["stale_in_chroma"] == ["stale#1"]
        assert e["buckets_without_moments"] == ["bare"]
        assert e["orphan_moment_rows"] == ["nobody#0"]
        assert e["dangling_edges"] == [("ok", "vanished", "same_event")]
        assert "ok#0" in e["missing_in_lexical"]
        assert found["orphan_collections"] == ["haven:forgotten-space"]
        assert doctor(brain, repair=False)["issues"] == found["issues"]  # a check changes nothing

    assert cli.main(["doctor", "--data", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    for line in ["found 2 moments missing in Chroma: lost#0, lost#1", "found 1 orphan moments in Chroma: ghost#0",
                 "found 1 moments with stale text in Chroma: stale#1", "found 1 buckets without moments: bare",
                 "found 1 moment rows without a bucket: nobody#0", "found 1 edges to missing buckets",
                 "repaired: re-added 2 moments to Chroma", "repaired: deleted 1 orphan moments from Chroma",
                 "repaired: rebuilt the moments of 1 buckets that had none",
                 "repaired: deleted 1 edges to buckets that are gone",
                 "orphan Chroma collections (spaces unknown to the ledger): haven:forgotten-space",
                 "the store is now consistent"]:
        assert line in out, (line, out)

    assert cli.main(["doctor", "--data", str(tmp_path / "d")]) == 0
    assert "consistent: 1 spaces checked, nothing to repair" in capsys.readouterr().out
    with Brain.open(tmp_path / "d") as brain:
        store = brain.store
        assert store.chroma.get_text_hashes(SPACE, ["stale#1"]) == {
            "stale#1": [m for m in store.moments(SPACE, "stale") if m.id == "stale#1"][0].text_hash}
        assert [m.text for m in store.moments(SPACE, "bare")] == ["No moment rows", "The ledger forgot my moments."]
        assert any(m.startswith("bare#") for m in store.lexical_search(SPACE, store.tokens("ledger forgot"), 3))
        assert brain.edges(SPACE) == [e for e in brain.edges(SPACE) if e.to_id != "vanished"]
        assert "haven:forgotten-space" not in store.chroma.list_spaces()


def test_doctor_on_a_clean_store_repairs_nothing(tmp_path):
    with Brain.open(tmp_path / "d") as brain:
        brain.write(space=SPACE, title="fine", body="all good")
        report = doctor(brain)
        assert report["consistent"] and report["consistent_after"] and report["issues"] == 0
        assert report["spaces"][SPACE]["repaired"] == []
