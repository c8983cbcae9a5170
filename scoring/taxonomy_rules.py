"""Taxonomy rules compiled for RE2, a regular-expression engine that runs in linear time.

A run file's header carries the rules, so they are hostile input: Python's backtracking
``re`` takes exponential time on a rule like ``(a|aa)+$`` against ``aaaa…b``, and an import
that scores with it never finishes. RE2 never backtracks: a search costs time proportional to
the text (times the size of the compiled rule, which is itself capped by ``max_mem``). What RE2
cannot run — lookarounds, backreferences, possessive or atomic groups, a rule whose compiled
form exceeds the memory cap — is refused when the header is read, with the rule's place.

The syntax is Python's for everything else (``(?i)``, ``\\b``, classes, ``(?P<name>…)``);
``\\w``, ``\\d``, ``\\s`` and ``\\b`` are ASCII-only in RE2.
"""

from __future__ import annotations

import hashlib

import re2

from .errors import RuleError

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the refusal is reported as our error, not logged to stderr


def compile_rule(rule: str):
    """A compiled RE2 pattern over UTF-8 bytes (texts are searched as bytes, encoded once)."""
    try:
        encoded = rule.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RuleError(f"is not a valid regular expression: a lone surrogate at character {exc.start}") from None
    try:
        return re2.compile(encoded, _OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise RuleError(f"is not a valid regular expression for RE2, the linear-time engine rules run "
                        f"on ({detail}); lookarounds and backreferences are not supported") from None


_CHECKED: set[bytes] = set()
CHECKED_KEPT = 4096
"""Rules remembered as checked (by a 16-byte digest of their text: a hostile header's rules may
be long) before the memory is emptied."""


def check_rule(rule: str) -> None:
    """``compile_rule``'s refusal, if any, without keeping the compiled rule. A rule that
    compiles is remembered by a digest of its text (neither the text nor its compiled form, which
    may be large): a header is checked rule by rule, and a fleet of small runs under one taxonomy
    would otherwise compile the same rules once a run."""
    key = hashlib.blake2b(rule.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    if key in _CHECKED:
        return
    compile_rule(rule)
    if len(_CHECKED) >= CHECKED_KEPT:
        _CHECKED.clear()
    _CHECKED.add(key)


def compile_any(rules: list[str]):
    """One RE2 pattern that matches where any of ``rules`` matches, or None where it cannot be
    built safely (the caller then searches rule by rule).

    A prefilter: one search says whether any rule can match, so a text no rule matches (the
    common case) costs one search, not one per rule. Each rule is already known to compile
    alone and is wrapped in a group of its own (RE2 scopes a ``(?i)`` inside a group to that
    group). A rule holding ``\\Q`` is the exception: a quote left open runs to the end of the
    pattern and would swallow the groups after it, changing what the union means, so such rule
    sets get no prefilter. (RE2's own ``Set`` is not used: its search gives no answer, rather than
    a wrong one, only where the caller can ask for its error, which this binding cannot.) The
    union may also exceed RE2's memory cap where each rule alone does not.
    """
    if not rules or any("\\Q" in rule for rule in rules):
        return None
    try:
        return re2.compile(b"|".join(b"(?:" + rule.encode("utf-8") + b")" for rule in rules), _OPTIONS)
    except re2.error:
        return None


def joinable(rule: str) -> bool:
    """Whether a search of ``rule`` over texts joined by ``JOIN`` finds a match wherever the rule
    matches one of the texts on its own (so a miss over the join is a miss in every text).

    A match in a text alone is the same bytes inside the join; what can differ is only an
    assertion about the match's surroundings. ``\\b`` and ``\\B`` read the neighbouring byte, and
    ``JOIN`` is made of non-word bytes, as a text's edge counts. ``^``, ``$``, ``\\A`` and ``\\z``
    hold at the edges of the searched text, so the join hides a match at the edge of any text but
    the first (last): a rule with one is not joinable (nor, to keep the scan simple, one with
    ``(?m)``'s ``^`` or ``$``, which would be). The scan is conservative: any ``^`` or ``$`` outside
    what is surely a character class, any ``\\A``, ``\\z`` or ``\\Q`` (a quote the scan does not
    follow) makes the rule not joinable, and a class is taken to end at its first unescaped
    ``]``, the earliest it can; so a wrong answer can only cost a joined search, never miss a
    match (``tests/test_rule_prefilter.py`` holds the rules to a search of every text alone)."""
    i, n = 0, len(rule)
    while i < n:
        c = rule[i]
        if c == "\\":
            if rule[i + 1:i + 2] in ("A", "z", "Q"):
                return False
            i += 2
        elif c in "^$":
            return False
        elif c == "[":
            i += 1
            while i < n and rule[i] != "]":
                i += 2 if rule[i] == "\\" else 1
            i += 1
        else:
            i += 1
    return True


JOIN = b"\n\x00\n"
"""What ``score.RuleClassifier`` joins a trajectory's texts with for one search of its joinable
rules (non-word bytes, a newline either side)."""


def encode_text(text: str) -> bytes:
    """A surface as the bytes a rule searches (a lone surrogate is kept, never an error)."""
    return text.encode("utf-8", "surrogatepass")


def quote_match(match, limit: int = 120) -> str:
    """The first ``limit`` characters of a match, as text."""
    return match.group(0)[: 4 * limit].decode("utf-8", "replace")[:limit]
