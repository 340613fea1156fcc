"""`ombre-brain bench`: write throughput and turn latency, each beside the floor it cannot beat.

The floors are what any memory on this stack must pay: writing costs at least the embedding
of the moment texts plus a bare Chroma add of them; a turn costs at least one query embedding
plus one bare Chroma query. Reporting our numbers beside these, measured in the same process
on the same store, makes the overhead visible and the comparison fair on any machine.

- The store is synthetic and bilingual (Chinese and English memories of one user, with
  sections, flags, favorites and edges), generated from a seed so every run is the same.
- Writes go through :meth:`Brain.write_many`, the batch path. They are measured chunk by chunk,
  interleaved with floor chunks, so a noisy neighbour slows both alike. Past 5,000 buckets
  the floor is sampled on evenly spread chunks, to keep a 100k run under an hour.
- Turns go through :meth:`Brain.turn` with distinct content queries (no cache hits), a new
  session every 20 turns; the floor uses another set of distinct queries from the same generator,
  one sample after each turn (the floor sampled in a phase after the turns is reported beside it).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import resource
import sys
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from time import perf_counter
from typing import Any

import numpy as np

from ..retrieval.evidence import thaw
from ..text import CJK_RE

SPACE = "bench:user"
BASE_TIME = datetime.fromisoformat("2026-11-30T20:00:00+08:00")
CHUNK = 1024            # buckets per measured write chunk
FLOOR_SAMPLE = 5_000    # buckets whose texts the write floor is measured on, at most
WARMUP = 3              # unmeasured turns first: index builds and first-call costs
TURNS_PER_SESSION = 20
REPLIES = ["嗯嗯，我记得。", "That sounds lovely.", "然后呢？", "Tell me more.", "听起来很开心！"]
EDGE_SHARE = 0.2        # edges per bucket

# ---------------------------------------------------------------- synthetic memories

ZH_WHO = ["小雨", "阿哲", "妈妈", "爸爸", "外婆", "室友", "同事小王", "大刘", "妹妹", "表哥", "老板", "邻居阿姨",
          "高中同学", "健身教练", "猫咪豆豆", "我们"]
ZH_WHEN = ["周末", "昨天晚上", "去年冬天", "上个月", "早上", "生日那天", "下班以后", "国庆假期", "春节", "半夜",
           "中午", "三月的时候", "暑假", "出差回来那天", "下雨的晚上", "考完试那天"]
ZH_ACT = ["去海边捡贝壳", "在家做红烧肉", "骑车绕着护城河兜风", "重看《千与千寻》", "练吉他", "爬山看日出",
          "逛二手市场", "给猫洗澡", "准备考研复习", "去医院复查", "学做手冲咖啡", "在阳台种番茄", "去看演唱会",
          "打了一局游戏", "搬家整理旧照片", "去图书馆自习", "学游泳", "跑了五公里", "去宜家买书架", "包饺子",
          "在公园接飞盘", "去面试", "拼乐高", "写毕业论文", "去滑雪", "参加婚礼", "看牙医", "学日语", "逛夜市",
          "修自行车", "烤蛋糕", "去动物园", "整理衣柜", "听播客", "去露营", "坐夜车回老家"]
ZH_PLACE = ["在北京", "在成都", "在青岛", "在杭州西湖边", "在老家", "在公司楼下", "在学校", "在地铁上", "在咖啡店",
            "在外婆家", "在海南", "在京都", "在江边", "在山里", "在小区门口", "在便利店"]
ZH_FEEL = ["心情特别好", "累得不想说话", "笑了一整晚", "说下次还要再来", "觉得很安心", "有点失落", "紧张得手心出汗",
           "开心得跳起来", "偷偷哭了一会儿", "觉得被理解了", "一直念叨这件事", "后来想起来还会笑", "有点后悔",
           "觉得很骄傲", "说这是今年最好的一天"]
ZH_DETAIL = ["那天风很大，头发全乱了。", "回来的路上还买了烤红薯。", "拍了很多照片，发了朋友圈。",
             "手机没电了，差点迷路。", "遇到一只很亲人的小狗。", "中途下了一场雨。", "最后吃了一碗热汤面。",
             "还跟老板聊了很久。",
             "忘了带钥匙，在门口等了半小时。", "看到了很漂亮的晚霞。"]
EN_WHO = ["Mia", "Leo", "my mom", "my dad", "grandma", "my roommate", "Sam from work", "Jordan", "my sister",
          "my cousin", "the neighbour", "an old classmate", "my coach", "the cat", "we", "Alex"]
EN_WHEN = ["last weekend", "yesterday evening", "last winter", "a month ago", "this morning", "on my birthday",
           "after work", "over the holiday", "at new year", "late at night", "at lunch", "in March", "in the summer",
           "after the trip", "on a rainy night", "after the exam"]
EN_ACT = ["collected shells at the beach", "cooked braised pork at home", "rode a bike along the river",
          "rewatched Spirited Away", "practised guitar", "hiked up to see the sunrise", "browsed a flea market",
          "gave the cat a bath", "studied for the entrance exam", "went back to the hospital for a check-up",
          "learned pour-over coffee", "grew tomatoes on the balcony", "went to a concert", "played a game together",
          "sorted old photos while moving", "studied at the library", "took swimming lessons", "ran five kilometres",
          "bought a bookshelf at IKEA", "made dumplings", "played frisbee in the park", "had a job interview",
          "built a Lego set", "wrote the thesis", "went skiing", "attended a wedding", "saw the dentist",
          "started learning Japanese", "walked through the night market", "fixed the bicycle", "baked a cake",
          "visited the zoo", "cleaned out the wardrobe", "listened to a podcast", "went camping",
          "took the night train home"]
EN_PLACE = ["in Beijing", "in Chengdu", "in Qingdao", "by West Lake", "back home", "downstairs at the office",
            "at school", "on the subway", "at the coffee shop", "at grandma's", "in Hainan", "in Kyoto",
            "by the river", "in the mountains", "at the gate", "at the corner shop"]
EN_FEEL = ["felt great", "was too tired to talk", "laughed all night", "wants to go again", "felt safe",
           "was a bit let down", "was so nervous", "jumped for joy", "cried a little", "felt understood",
           "kept talking about it", "still smiles about it", "regretted it a bit", "felt proud",
           "called it the best day of the year"]
EN_DETAIL = ["The wind was so strong that day.", "We bought roasted sweet potatoes on the way back.",
             "Took lots of photos and posted them.", "The phone died and we almost got lost.",
             "A very friendly dog followed us.", "It rained halfway through.", "We ended with a bowl of hot noodles.",
             "Talked with the owner for ages.", "Forgot the keys and waited outside for half an hour.",
             "The sunset was beautiful."]
RELATIONS = ("same_event", "context_of", "evidenced_by", "relates_to", "old_version", "conflict")
RELATION_WEIGHTS = (3, 3, 2, 4, 1, 1)
ZH_QUERY = ["还记得{who}{when}{act}那次吗", "{who}{act}是什么时候", "我们{place}{act}的事", "上次{act}之后我心情怎么样",
            "{when}{act}的时候发生了什么", "你知道{who}喜欢{act}吗", "讲讲{place}{act}那天"]
EN_QUERY = ["do you remember when {who} {act}?", "what happened when {who} {act} {place}?",
            "tell me about the time we {act}", "how did I feel after I {act}?", "when was it that {who} {act}?"]


def _pick(rng: random.Random, seq):
    return seq[rng.randrange(len(seq))]


def synthetic_bucket(rng: random.Random, i: int) -> dict:
    """One memory of the synthetic user: Chinese two times in three, with the odd section, flag and favorite."""
    zh = rng.random() < 0.67
    who, when, act, place, feel, detail = (
        (ZH_WHO, ZH_WHEN, ZH_ACT, ZH_PLACE, ZH_FEEL, ZH_DETAIL) if zh else
        (EN_WHO, EN_WHEN, EN_ACT, EN_PLACE, EN_FEEL, EN_DETAIL))
    w, t, a, p, f = (_pick(rng, x) for x in (who, when, act, place, feel))
    if zh:
        title = f"{w}{t}{a}"
        body = f"{w}{t}{p}{a}，{f}。{_pick(rng, detail)}"
    else:
        title = f"{w} {a} {t}"
        body = f"{w[0].upper()}{w[1:]} {a} {p} {t} and {f}. {_pick(rng, detail)}"
    if rng.random() < 0.25:
        body += "\n\n" + _pick(rng, detail)
    item: dict = {"space": SPACE, "id": f"b{i:06d}", "title": title, "body": body,
                  "created": (BASE_TIME - timedelta(minutes=rng.randrange(2 * 365 * 24 * 60))).isoformat(),
                  "importance": rng.randint(3, 9), "valence": round(rng.random(), 2),
                  "arousal": round(rng.random(), 2), "tags": [a[:8] if zh else a.split()[0]]}
    roll = rng.random()
    if roll < 0.04:
        item["anchor"] = True
    elif roll < 0.07:
        item["archived"] = True
    elif roll < 0.09:
        item["type"] = "feel"
        item["body"] += "\n\n### feeling\n" + ("那段时间我们很亲近。" if zh else "We felt close back then.")
    elif roll < 0.11:
        item["tags"].append("haven_favorite")
        item["body"] += "\n\n### favorite_reason\n" + ("这是我最喜欢的一段。" if zh else "My favourite of all.")
    elif roll < 0.14:
        item["body"] += "\n\n### comment\n" + ("后来又提起过。" if zh else "Came up again later.")
    return item


def synthetic_store(n: int, seed: int) -> tuple[list[dict], list[tuple[str, str, str, float]]]:
    """``n`` bucket dicts and about ``EDGE_SHARE * n`` edges (from, to, relation, confidence), from ``seed``."""
    rng = random.Random(seed)
    items = [synthetic_bucket(rng, i) for i in range(n)]
    seen: set[tuple[str, str]] = set()
    for i, item in enumerate(items):  # past ~50k the templates repeat a memory word for word, with other values
        if (item["title"], item["body"]) in seen:  # (a write refuses that: design §3); a real user's are not
            item["body"] += f"（第{i}条）" if CJK_RE.search(item["body"]) else f" (no. {i})"
        seen.add((item["title"], item["body"]))
    edges: set[tuple[str, str, str]] = set()
    out = []
    for _ in range(int(EDGE_SHARE * n) if n > 1 else 0):
        a = rng.randrange(n)
        b = min(n - 1, max(0, a + rng.randint(-50, 50)))
        rel = rng.choices(RELATIONS, RELATION_WEIGHTS)[0]
        if a == b or (items[a]["id"], items[b]["id"], rel) in edges:
            continue
        edges.add((items[a]["id"], items[b]["id"], rel))
        out.append((items[a]["id"], items[b]["id"], rel, round(rng.uniform(0.5, 0.95), 2)))
    return items, out


def synthetic_queries(n: int, seed: int, avoid: set[str] | None = None) -> list[str]:
    """``n`` distinct content queries in both languages (none in ``avoid``), so no query hits a cache."""
    rng = random.Random(seed)
    seen = set(avoid or ())
    out: list[str] = []
    while len(out) < n:
        if rng.random() < 0.6:
            q = _pick(rng, ZH_QUERY).format(who=_pick(rng, ZH_WHO), when=_pick(rng, ZH_WHEN), act=_pick(rng, ZH_ACT),
                                            place=_pick(rng, ZH_PLACE))
        else:
            q = _pick(rng, EN_QUERY).format(who=_pick(rng, EN_WHO), act=_pick(rng, EN_ACT),
                                            place=_pick(rng, EN_PLACE))
        if q not in seen:
            seen.add(q)
            out.append(q)
    return out


# ---------------------------------------------------------------- measuring


@dataclass
class WriteResult:
    buckets: int
    moments: int
    seconds: float
    floor_buckets: int
    floor_seconds: float
    stored_as: dict[str, str] = field(default_factory=dict)  # synthetic id -> the id dedupe kept

    @property
    def duplicates(self) -> int:
        return sum(1 for a, b in self.stored_as.items() if a != b)

    @property
    def per_s(self) -> float:
        return self.buckets / self.seconds if self.seconds else 0.0

    @property
    def floor_per_s(self) -> float:
        return self.floor_buckets / self.floor_seconds if self.floor_seconds else 0.0


def _bar(total: int, desc: str, unit: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, leave=False, file=sys.stderr, disable=None)


def _floor_collection(brain):
    client = brain.store.chroma.client
    name = "ob_bench_floor"
    try:
        client.delete_collection(name)
    except Exception:  # absent is fine
        pass
    return client.get_or_create_collection(name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}})


def bench_write(brain, items: list[dict], *, measure_floor: bool = True) -> WriteResult:
    """Write ``items`` through write_many chunk by chunk; interleave floor chunks on the same texts."""
    from ..buckets import bucket_from_dict, build_moments

    n = len(items)
    chunks = [items[i:i + CHUNK] for i in range(0, n, CHUNK)]
    every = max(1, math.ceil(n / FLOOR_SAMPLE)) if measure_floor else 0
    floor_col = _floor_collection(brain) if measure_floor else None
    res = WriteResult(n, 0, 0.0, 0, 0.0)
    bar = _bar(n, "writing", "bucket")
    for ci, chunk in enumerate(chunks):
        t0 = perf_counter()
        stored = brain.write_many(chunk, dedupe=True)
        res.seconds += perf_counter() - t0
        bar.update(len(chunk))
        res.stored_as.update((item["id"], sid) for item, sid in zip(chunk, stored, strict=True))
        moments = [m for item in chunk for m in build_moments(bucket_from_dict(item, limits=brain.limits))]
        res.moments += sum(1 for m in moments if res.stored_as[m.bucket_id] == m.bucket_id)
        if floor_col is not None and ci % every == 0:
            texts = [m.text for m in moments]
            t0 = perf_counter()
            for j in range(0, len(texts), 4000):
                vecs = brain.store.embedder.passages(texts[j:j + 4000])
                floor_col.add(ids=[f"f{ci}_{j + k}" for k in range(len(vecs))], embeddings=vecs,
                              documents=texts[j:j + 4000])
            res.floor_seconds += perf_counter() - t0
            res.floor_buckets += len(chunk)
    bar.close()
    if floor_col is not None:
        brain.store.chroma.client.delete_collection(floor_col.name)
    return res


def link_edges(brain, edges, stored_as: dict[str, str] | None = None) -> int:
    """Link the synthetic edges between the buckets as stored (a deduplicated one by the id kept); returns the count."""
    alias = stored_as or {}
    done: set[tuple[str, str, str]] = set()
    bar = _bar(len(edges), "linking", "edge")
    for a, b, rel, conf in edges:
        a, b = alias.get(a, a), alias.get(b, b)
        if a != b and (a, b, rel) not in done:
            brain.link(SPACE, a, b, rel, conf)
            done.add((a, b, rel))
        bar.update()
    bar.close()
    return len(done)


def bench_turns(brain, queries: list[str], floor_queries: list[str], warmup: list[str], context: int = 0,
                after_queries: list[str] | None = None) -> dict:
    """Turn latency through Brain.turn, each turn followed by one floor sample: one uncached query embedding
    plus one bare Chroma query.

    The floor is sampled between the turns, as the write floor is between the write chunks, so a noisy
    neighbour or a slow minute slows both alike; up to the fourth round of issue 34 it was sampled in a phase
    of its own after the turns, and its p95 moved more between runs than the turn's. ``after_queries`` still
    measures that way too (``floor_after_ms``), so a run can be set beside the earlier records.

    With ``context`` N, each session is a sliding conversation: every turn hears the N messages before it
    (the session's earlier queries, each followed by a short assistant reply), as a proxy would send them.
    """
    emb = brain.store.embedder
    col = brain.store.chroma.collection(SPACE)
    k = brain.config.retrieval.vector_k

    def floor(q: str) -> float:
        t0 = perf_counter()
        col.query(query_embeddings=emb.queries([q]), n_results=k, include=["distances"])
        return (perf_counter() - t0) * 1000

    for i, q in enumerate(warmup):
        brain.turn(SPACE, "bench-warmup", q, now=BASE_TIME + timedelta(minutes=i))
    after_queries = after_queries or []
    turn_ms, floor_ms = [], []
    bar = _bar(len(queries) + len(after_queries), "turns", "turn")
    history: list[dict] = []
    for i, (q, fq) in enumerate(zip(queries, floor_queries, strict=True)):  # a repeated floor query would be cached
        now = BASE_TIME + timedelta(hours=1, minutes=i)
        if i % TURNS_PER_SESSION == 0:
            history = []
        heard = history[-context:] if context else None
        t0 = perf_counter()
        brain.turn(SPACE, f"bench-{i // TURNS_PER_SESSION}", q, now=now, context=heard)
        turn_ms.append((perf_counter() - t0) * 1000)
        floor_ms.append(floor(fq))
        history += [{"role": "user", "content": q}, {"role": "assistant", "content": REPLIES[i % len(REPLIES)]}]
        bar.update()
    after_ms = []
    for q in after_queries:
        after_ms.append(floor(q))
        bar.update()
    bar.close()
    out = {"turn_ms": _percentiles(turn_ms), "floor_ms": _percentiles(floor_ms)}
    if after_ms:
        out["floor_after_ms"] = _percentiles(after_ms)
    return out


def _ratio(turn: dict, floor: dict | None) -> float | None:
    return round(turn["p95"] / floor["p95"], 2) if floor and floor["p95"] else None


def _percentiles(ms: list[float]) -> dict:
    arr = np.asarray(ms or [0.0])
    return {"p50": round(float(np.percentile(arr, 50)), 2), "p95": round(float(np.percentile(arr, 95)), 2)}


def rss_mb() -> float:
    """Peak resident set size of this process so far (ru_maxrss is in KiB on Linux)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def run_bench(buckets: int = 1000, queries: int = 200, *, seed: int = 7, write: bool = True, turns: bool = True,
              config=None, data_dir: str | Path | None = None, context: int = 0,
              then: Callable[[Any], dict] | None = None) -> dict:
    """The whole benchmark in one process; returns the JSON object `ombre-brain bench --json` prints.

    With ``data_dir`` the store is built there and kept, with a ``bench-store.json`` marker naming
    the size and seed. A later run with the same directory, size and seed reuses it and measures
    turns only, so a 100k-bucket store (an hour of embedding on two cores) is built once and
    latency can be re-measured after a change to the read path. The write numbers in such a run
    are the ones recorded when the store was built, and ``"reused": true`` says so. ``then`` measures more on
    the built store (``bench --playground``: :mod:`.bench_playground`); what it returns joins the result.
    """
    from ..errors import ValidationError

    if buckets < 1 or queries < 1:
        raise ValidationError("--buckets and --queries must be at least 1")
    with _ledger_for_bench(config, data_dir) as config:
        if data_dir is not None:
            return _run_in(Path(data_dir), buckets, queries, seed, write, turns, config, context, then)
        with tempfile.TemporaryDirectory(prefix="ombre-bench-") as tmp:
            return _run_in(Path(tmp), buckets, queries, seed, write, turns, config, context, then)


@contextmanager
def _ledger_for_bench(config, data_dir):
    """With a PostgreSQL ledger (``store.ledger.url``), the bench store gets a schema of its own in that
    database: a fresh one dropped afterwards, or with ``--keep DIR`` one named after DIR and kept."""
    from ..config import load_config

    cfg = load_config(*(c for c in (config,) if c))
    url = cfg.store.ledger.url
    if url is None:
        yield config
        return
    from ..store.ledger.postgres import drop_schema, with_schema

    key = str(Path(data_dir).resolve()) if data_dir is not None else os.urandom(8).hex()
    schema = "ombre_bench_" + hashlib.sha256(key.encode()).hexdigest()[:12]
    scoped = load_config(cfg, {"store": {"ledger": {"url": with_schema(url, schema)}}})
    try:
        yield scoped
    finally:
        if data_dir is None:
            drop_schema(url, schema)


def _run_in(root: Path, buckets: int, queries: int, seed: int, write: bool, turns: bool, config,
            context: int = 0, then: Callable[[Any], dict] | None = None) -> dict:
    from ..brain import Brain
    from ..errors import ValidationError

    marker = root / "bench-store.json"
    built = json.loads(marker.read_text(encoding="utf-8")) if marker.is_file() else None
    if built is not None and (built.get("buckets"), built.get("seed")) != (buckets, seed):
        raise ValidationError(f"{root} holds a bench store of {built.get('buckets')} buckets (seed "
                              f"{built.get('seed')}), not {buckets} (seed {seed}); use another directory")
    if built is None and (root / "data").exists():
        raise ValidationError(f"{root} holds an unfinished bench store (no bench-store.json): its write numbers "
                              "would be wrong; delete the directory and run again")
    if built is None and root.exists() and any(root.iterdir()):
        raise ValidationError(f"{root} is not empty and holds no bench store; use an empty or new directory")
    with Brain.open(root / "data", config) as brain:
        brain.store.embedder.passages(["warm up"])  # model load is not a write cost
        if built is None:
            items, edges = synthetic_store(buckets, seed)
            wr = bench_write(brain, items, measure_floor=write)
            linked = link_edges(brain, edges, wr.stored_as)
            built = {"buckets": buckets, "seed": seed, "moments": wr.moments, "edges": linked,
                     "duplicates": wr.duplicates,
                     "embedder": brain.store.embedder.model_id}
            if write:
                built |= {"write_per_s": round(wr.per_s, 1), "floor_write_per_s": round(wr.floor_per_s, 1),
                          "write_ratio": round(wr.per_s / wr.floor_per_s, 3) if wr.floor_per_s else None,
                          "floor_sampled_buckets": wr.floor_buckets}
            out: dict = dict(built)
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(json.dumps(built), encoding="utf-8")
        else:
            out = dict(built) | {"reused": True}
        out.pop("seed", None)
        if not write:
            for key in ("write_per_s", "floor_write_per_s", "write_ratio", "floor_sampled_buckets"):
                out.pop(key, None)
        if turns:
            brain.admitter.prepare(freeze=True)  # as `serve` does at start: no measured turn loads a table
            try:
                qs = synthetic_queries(queries + WARMUP, seed + 1)
                fq = synthetic_queries(queries, seed + 2, avoid=set(qs))
                aq = synthetic_queries(queries, seed + 3, avoid=set(qs) | set(fq))
                t = bench_turns(brain, qs[WARMUP:], fq, qs[:WARMUP], context=context, after_queries=aq)
            finally:
                thaw()  # a server stays frozen; the process running the bench (a test) gets its collector back
            out |= {"queries": queries, "context": context, **t,
                    "overhead_p95": _ratio(t["turn_ms"], t["floor_ms"]),
                    "overhead_p95_floor_after": _ratio(t["turn_ms"], t.get("floor_after_ms"))}
        if then is not None:
            out |= then(brain)
        out["rss_mb"] = rss_mb()
        out["load_avg"] = round(os.getloadavg()[0], 2)  # other work on the machine skews every number
        return out


def format_bench(res: dict) -> str:
    lines = [f"{res['buckets']} buckets ({res['moments']} moments, {res['edges']} edges), embedder {res['embedder']}"]
    if "write_per_s" in res:
        lines.append(f"write   {res['write_per_s']:>9.1f} buckets/s   floor {res['floor_write_per_s']:>9.1f}/s   "
                     f"ratio {res['write_ratio']}  (floor on {res['floor_sampled_buckets']} buckets"
                     f"{'; recorded when the kept store was built' if res.get('reused') else ''})")
    if "turn_ms" in res:
        t, f = res["turn_ms"], res["floor_ms"]
        lines.append(f"turn    p50 {t['p50']:>7.2f} ms  p95 {t['p95']:>7.2f} ms   floor p50 {f['p50']:.2f} ms  "
                     f"p95 {f['p95']:.2f} ms   overhead p95 {res['overhead_p95']}x  ({res['queries']} queries)")
        if res.get("floor_after_ms"):
            lines.append(f"        floor sampled after the turns instead: p95 {res['floor_after_ms']['p95']:.2f} ms, "
                         f"overhead p95 {res['overhead_p95_floor_after']}x (the method before issue 34's fifth round)")
    lines.append(f"peak RSS {res['rss_mb']} MB   load average {res['load_avg']}")
    return "\n".join(lines)


def plot_turn_p95(results: list[dict], path: str | Path) -> None:
    """Draw turn p95 and its floor against store size (log x) from bench results; needs matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted((r for r in results if "turn_ms" in r), key=lambda r: r["buckets"])
    x = [r["buckets"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 3.6), dpi=120)
    ax.plot(x, [r["turn_ms"]["p95"] for r in rows], "o-", label="Brain.turn p95")
    ax.plot(x, [r["floor_ms"]["p95"] for r in rows], "s--", label="floor p95 (query embedding + Chroma query)")
    for r in rows:
        ax.annotate(f"{r['overhead_p95']}x", (r["buckets"], r["turn_ms"]["p95"]), textcoords="offset points",
                    xytext=(0, 6), ha="center", fontsize=8)
    ax.set_xscale("log")
    ax.set_ylim(0, max(r["turn_ms"]["p95"] for r in rows) * 1.18)  # room for the labels, and 0 in sight
    ax.set_xlabel("buckets in the space")
    ax.set_ylabel("ms")
    ax.set_title("Turn latency p95 against store size")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


__all__ = ["plot_turn_p95", "run_bench", "synthetic_queries", "synthetic_store"]
