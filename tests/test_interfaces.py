"""The store's interfaces (store/interfaces.py): the facade has every member each one names, with the parameters
of the component it comes from; the wings type their store with them; a list read is one value."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import typing

import pytest

from ombre_brain.dream.engine import DreamEngine
from ombre_brain.forget.purge import Forgetter
from ombre_brain.retrieval.candidates import Retriever
from ombre_brain.retrieval.evidence import Admitter
from ombre_brain.store import bucket_store
from ombre_brain.store.bucket_store import BucketStore, _via
from ombre_brain.store.interfaces import Dreaming, Forgetting, ListRead, Search, TurnReads, Writes
from ombre_brain.store.reads import Reader
from ombre_brain.turn.context import TurnParts

from .test_layout import MODULES, imports_of

INTERFACES = (TurnReads, Search, Writes, Forgetting, Dreaming)


def members(proto: type) -> list[str]:
    names = {n for n in vars(proto) if not n.startswith("_")} | set(getattr(proto, "__annotations__", {}))
    return sorted(names)


def params(fn, *, drop_self: bool = False) -> list[tuple]:
    ps = list(inspect.signature(fn).parameters.values())
    return [(p.name, p.kind, p.default, p.annotation) for p in (ps[1:] if drop_self else ps)]


@pytest.mark.parametrize("proto", INTERFACES, ids=lambda p: p.__name__)
def test_the_store_has_each_interface_member_with_its_parameters(brain, proto):
    """Same names, kinds and defaults (and annotations, where both give one): an interface cannot drift from
    the component the facade takes the member from."""
    for name in members(proto):
        assert hasattr(brain.store, name), f"BucketStore has no {name} ({proto.__name__})"
        want = inspect.getattr_static(proto, name, None)
        if not inspect.isfunction(want):
            continue  # an attribute or property: being there is the contract
        got = params(getattr(brain.store, name))
        expected = params(want, drop_self=True)
        assert [g[:3] for g in got] == [e[:3] for e in expected], f"{proto.__name__}.{name}"
        for g, e in zip(got, expected, strict=True):
            if g[3] is not inspect.Parameter.empty and e[3] is not inspect.Parameter.empty:
                assert g[3] == e[3], f"{proto.__name__}.{name}({g[0]}): {g[3]} != {e[3]}"


def test_each_facade_member_names_a_member_of_its_component_once(brain):
    tree = ast.parse(inspect.getsource(bucket_store))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "BucketStore")
    names = [t.id for n in cls.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    vias = {n: v for n, v in vars(BucketStore).items() if isinstance(v, _via)}
    assert set(vias) == set(names)
    for name, via in vias.items():
        component = getattr(brain.store, via.component)
        assert name in dir(component), f"{name} = _via({via.component!r}): {type(component).__name__} has no {name}"


def test_the_wings_type_their_store_with_the_interface_they_use():
    def annotation(fn, name: str) -> str:
        return inspect.signature(fn).parameters[name].annotation

    assert annotation(Retriever.__init__, "store") == "Search"
    assert annotation(Admitter.__init__, "store") == "Search"
    assert annotation(Forgetter.__init__, "store") == "Forgetting"
    assert annotation(DreamEngine.__init__, "store") == "Dreaming"
    assert {f.name: f.type for f in dataclasses.fields(TurnParts)}["store"] == "TurnReads"
    builders = {"ombre_brain.brain"}  # only what builds the store names the whole of it
    bad = [m for m in MODULES if not m.startswith("ombre_brain.store") and m not in builders
           and "ombre_brain.store.bucket_store" in imports_of(m, type_checking=True)]
    assert not bad, bad


def test_the_interfaces_module_is_a_leaf():
    """Nothing it imports (type-checking imports included) reaches a wing that uses it."""
    seen: set[str] = set()
    todo = ["ombre_brain.store.interfaces"]
    while todo:
        m = todo.pop()
        for n in imports_of(m, type_checking=True):
            if n not in seen:
                seen.add(n)
                todo.append(n)
    users = ("ombre_brain.turn", "ombre_brain.dream", "ombre_brain.forget", "ombre_brain.retrieval.candidates",
             "ombre_brain.retrieval.evidence", "ombre_brain.store.bucket_store", "ombre_brain.brain")
    assert not [m for m in seen if m.startswith(users)]


def test_a_list_read_is_lists_keywords_with_its_defaults():
    keywords = {n: p.default for n, p in inspect.signature(Reader.list).parameters.items()
                if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert ListRead().kwargs() == keywords
    assert ListRead(**{"type": "dream", "limit": None}) == ListRead(type="dream", limit=None)
    assert len({ListRead(limit=3), ListRead(limit=3, role=None)}) == 1  # a key: equal reads are one
    assert typing.get_type_hints(ListRead) == {"type": str | None, "limit": int | None, "since": str | None,
                                               "role": str | None}
