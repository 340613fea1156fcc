"""Query terms as topic evidence: how much a term weighs, and the form in which it is compared.

Two weights, for two questions:

- :func:`term_weight`, for lexical coverage (is what is asked written in the memory?): Chinese
  words by jieba's bundled IDF table (名字 and 样子 are everyday, 鹦鹉 and 年糕 are not), because a
  space's own statistics say little in a small store where every word is rare; other words 1 each.
  An English question rarely writes its answer's words twice, so counting its written words alike
  measures coverage best (frequency weights let one rare unwritten word, "grandmother" against
  "grandma", sink a right answer: LoCoMo's single-hop recall fell from 70.9 to 65.2%).
- :func:`specificity`, for word alignment (which asked terms matter most): both scripts on one
  scale, English words by their Zipf frequency (``wordfreq``): "what", "last" or "good" weigh
  little, "dentist" or "hamster" a lot, and 名字 and "name" both about 2.
"""

from __future__ import annotations

from functools import lru_cache

from ..text import CJK_RE

__all__ = ["normalize_term", "specificity", "term_weight"]

_CLITICS = ("'s", "'re", "'ll", "'ve", "'d", "'m", "s'")
ZIPF_CEILING = 6.3   # a Zipf frequency at or above this ("the", "what") weighs the least
MIN_WEIGHT = 0.5


def normalize_term(term: str) -> str:
    """Case-folded, with an English clitic cut off: a question about "my cat's name" asks about a cat."""
    t = term.replace("’", "'").casefold().strip()
    for clitic in _CLITICS:
        if len(t) > len(clitic) + 1 and t.endswith(clitic):
            return t[: -len(clitic)]
    return t


def term_weight(term: str) -> float:
    """What a query term weighs in lexical coverage: its general specificity if Chinese, else 1."""
    return specificity(term) if CJK_RE.search(term) else 1.0


@lru_cache(maxsize=65536)
def specificity(term: str) -> float:
    """How specific a term is in its language at large: everyday words weigh little, specific ones a lot."""
    if CJK_RE.search(term):
        from .lexical import general_idf

        return max(general_idf(term) - 4.0, MIN_WEIGHT)
    from wordfreq import zipf_frequency

    return max(MIN_WEIGHT, 2.0 * (ZIPF_CEILING - zipf_frequency(normalize_term(term), "en")))
