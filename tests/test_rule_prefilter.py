"""The rules' one-search prefilter (``compile_any``) never changes what the rules find."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scoring.model import Category
from scoring.rules import compile_any
from scoring.score import RuleClassifier


def _classifier(*rules_per_category: tuple[str, ...]) -> RuleClassifier:
    return RuleClassifier([Category(id=f"C{i:02}", name=f"cat{i}", rules=rules)
                           for i, rules in enumerate(rules_per_category, 1)])


def test_a_flag_inside_one_rule_does_not_reach_the_others():
    rules = _classifier(("(?i)secret",), ("TOKEN",))
    assert rules.match(["token"]) is None  # (?i) of C01 must not make C02 case-blind
    hit = rules.match(["SeCrEt"])
    assert hit is not None and hit[0].id == "C01"


def test_the_first_category_in_taxonomy_order_still_fires():
    rules = _classifier(("b",), ("a",))
    hit = rules.match(["a then b"])
    assert hit is not None and hit[0].id == "C01" and hit[2] == "b"


def test_a_rule_quoting_to_its_end_gets_no_prefilter_and_still_matches():
    # ``\Q`` without ``\E`` is a valid rule alone; in a union it would swallow the next groups.
    rules = _classifier((r"\Qrm -rf /",), (r"\Q)\E",))
    assert rules._any is None
    hit = rules.match(["sudo rm -rf /"])
    assert hit is not None and hit[0].id == "C01"
    assert compile_any([]) is None


_rule = st.sampled_from(["abc", "(?i)abc", "a.c", "^x", "y$", r"\bkey\b", "[0-9]{3}", "(?i)K(?:E)Y", r"\Qa.c",
                         r"\Q)\E", r"x\Q(y", r"\Qab\E|z"])
_text = st.text(alphabet="abcxyzKEY0123 \n", max_size=30)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_rule, min_size=1, max_size=3), min_size=1, max_size=4),
       st.lists(_text, min_size=1, max_size=3))
def test_the_prefilter_agrees_with_searching_every_rule(categories, texts):
    with_filter = _classifier(*map(tuple, categories))
    without = _classifier(*map(tuple, categories))
    without._any = None
    assert with_filter.match(texts) == without.match(texts)
