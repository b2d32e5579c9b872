"""The offline parser: a request in English or Chinese -> an :class:`~perfscout.state.intent.Intent`.

No network, no model, the same text always gives the same intent. What words mean lives
in ``vocabulary.yaml`` beside this package (synonyms, units, refusals); the modules here
hold the grammar of numbers, shapes, paths and quotes, and the bookkeeping that makes every
part of a request accounted for: each recognised piece marks its characters as used, and
what is left over is either filler, reported as not used, or -- a clause made only of
words the parser could not place -- asked about. A request that asks for anything outside
the tool whitelist is refused as a whole before anything else is read.

:func:`parse` reads a request; :func:`assess` fills ``Intent.missing`` with the questions
that must be answered before anything runs; :func:`apply_answer` folds an answer in.

Where things are: ``vocab`` (the vocabulary's phrase tables, the codec and dataset
catalogues), ``text`` (the text with its used spans, numbers, shapes, paths, variables of a
file, dataset names), ``commands`` (normalising, refusals, the program to profile),
``messages`` (what the parser says, in both languages), ``assess`` (the questions),
``question`` (the question a request asks, and accounting for every word), ``readers``
(:func:`parse` and one reader per slot), ``answers`` (folding an answer in), ``unicode_text``
(invisible characters, look-alike letters, the refusals' skeleton). Imports point one way, in
that order (messages, vocab and unicode_text import nothing of the package), and only public
names cross from one module to another (tests/unit/test_understand_public_names.py).
"""

from perfscout.graph.understand.answers import apply_answer
from perfscout.graph.understand.assess import assess, usable_codecs
from perfscout.graph.understand.commands import detect_language, normalise, refusal_reason
from perfscout.graph.understand.readers import parse
from perfscout.graph.understand.text import path_kind, to_number
from perfscout.graph.understand.vocab import codec_catalogue, dataset_catalogue, vocabulary

__all__ = [
    "apply_answer", "assess", "codec_catalogue", "dataset_catalogue", "detect_language", "normalise",
    "parse", "path_kind", "refusal_reason", "to_number", "usable_codecs", "vocabulary",
]
