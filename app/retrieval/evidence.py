"""Script-neutral keyword evidence: the numbers of a query, and words written in another script
than the query's own (a Latin name inside an Arabic question).

Such a token reads the same in an English and an Arabic text, so when the tenant's text has it
the match is meant, whatever the language of the rest; query coverage, which counts it as one
word among many untranslatable ones, all but switches it off. When few chunks hold all of it, it
is specific: a year found in one paragraph points there, a year found in forty does not. The
fusion rule using this (`RetrieverConfig.specific_evidence_max_chunks`) was chosen on the tuning
sets of eval/tune_fusion.py (README, Evaluation).
"""

from __future__ import annotations

from collections import Counter

from app.retrieval.keyword import KeywordSnapshot, token_script


def main_script(tokens: list[str]) -> str | None:
    """The script most of the query's word tokens are written in (None: numbers only)."""
    counts = Counter(token_script(t) for t in tokens if token_script(t) != "digits")
    return counts.most_common(1)[0][0] if counts else None


def script_neutral_tokens(tokens: list[str]) -> list[str]:
    """The query's numbers and its words in a script other than its main one, each once."""
    script = main_script(tokens)
    return [
        t
        for t in dict.fromkeys(tokens)
        if t and (token_script(t) == "digits" or token_script(t) != script)
    ]


def specific_evidence_chunks(snapshot: KeywordSnapshot, tokens: list[str]) -> int:
    """How many of the tenant's chunks hold every script-neutral query token the tenant's text
    has (0 when the query has none that it has)."""
    found = [t for t in script_neutral_tokens(tokens) if snapshot.coverage([t]) > 0]
    return len(snapshot.containing_all(found)) if found else 0
