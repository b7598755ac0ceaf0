"""BM25 search over the catalogue: an inverted index with per-posting weights, deterministic ties, cached queries.

Hand-written rather than a library: ``rank-bm25`` scores every document of the corpus in Python for each query
(no inverted index; over 100x slower here at 10,000 products, see benchmarks/bench_webshop.py, which measures
it in the same run) and ``bm25s`` pulls in scipy; neither breaks ties by a fixed order. The scoring is
Okapi BM25 with Lucene's idf, ``k1 = 1.5``, ``b = 0.75`` over each product's title, attributes, type and
category. Results are ordered by score, then by product index, and cut at ``MAX_RESULTS`` (WebShop's 50).
"""

from __future__ import annotations

import math
import re
from collections import Counter, OrderedDict

import numpy as np

from milepost.envs.webshop.catalogue import Catalogue

MAX_RESULTS = 50
PAGE_SIZE = 10
K1 = 1.5
B = 0.75
_TOKEN = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    ("a", "an", "and", "the", "for", "with", "of", "in", "to", "on", "i", "me", "my", "need", "want", "looking",
     "find", "buy", "some", "that", "is", "it")
)  # fmt: skip
_CACHE_SIZE = 4096


def tokenize(text: str) -> list[str]:
    """Lower-case alphanumeric words without stop words."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


class SearchIndex:
    """BM25 over a catalogue. ``search(query)`` returns up to ``MAX_RESULTS`` product indices, best first."""

    def __init__(self, catalogue: Catalogue) -> None:
        self.n = len(catalogue)
        docs = [Counter(tokenize(p.search_text())) for p in catalogue.products]
        lengths = np.array([sum(d.values()) for d in docs], dtype=np.float64)
        avgdl = float(lengths.mean()) if self.n else 1.0
        norm = K1 * (1.0 - B + B * lengths / avgdl)  # (N,)
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for i, doc in enumerate(docs):
            for token, tf in doc.items():
                ids, tfs = postings.setdefault(token, ([], []))
                ids.append(i)
                tfs.append(tf)
        # BM25's term weight depends only on (term, document), so each posting stores its final weight.
        self.postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for token, (ids, tfs) in postings.items():
            doc_ids = np.array(ids, dtype=np.int64)
            freq = np.array(tfs, dtype=np.float64)
            df = len(ids)
            idf = math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))
            self.postings[token] = (doc_ids, idf * freq * (K1 + 1.0) / (freq + norm[doc_ids]))
        self._cache: OrderedDict[tuple[str, ...], tuple[int, ...]] = OrderedDict()

    def search(self, query: str) -> tuple[int, ...]:
        """The ranked product indices for ``query`` (cached by its token sequence)."""
        key = tuple(tokenize(query))
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        result = self._rank(key)
        self._cache[key] = result
        if len(self._cache) > _CACHE_SIZE:
            self._cache.popitem(last=False)
        return result

    def scores(self, tokens: tuple[str, ...]) -> np.ndarray:
        """BM25 score of every product for a tokenized query, summed in query-token order. (N,)"""
        scores = np.zeros(self.n, dtype=np.float64)
        for token in tokens:
            posting = self.postings.get(token)
            if posting is not None:
                scores[posting[0]] += posting[1]  # a posting lists each document once
        return scores

    def _rank(self, tokens: tuple[str, ...]) -> tuple[int, ...]:
        scores = self.scores(tokens)
        hits = np.flatnonzero(scores > 0.0)
        if len(hits) > MAX_RESULTS:
            # Keep every document scoring at least the 50th best (ties included), then order exactly.
            cut = np.partition(scores[hits], len(hits) - MAX_RESULTS)[len(hits) - MAX_RESULTS]
            hits = hits[scores[hits] >= cut]
        order = np.lexsort((hits, -scores[hits]))  # score descending, then product index ascending
        return tuple(int(i) for i in hits[order][:MAX_RESULTS])
