"""The cascade's answer checks: arithmetic, final answer, unused numbers, hedges, code, on constructed answers."""

from __future__ import annotations

import numpy as np
import pytest

from hanzo_hub.llm.answer_check import ANSWER_FEATURES, _evaluate, answer_features, answer_report

QUESTION = "Tom has 3 apples, buys 4 more and then 5 more. How many apples does he have?"


def test_stated_arithmetic_is_checked_in_text_and_in_annotations() -> None:
    right = answer_report(QUESTION, "3 + 4 = 7, and 7 + 5 = 12. #### 12")
    wrong = answer_report(QUESTION, "3 + 4 = 8, and 8 + 5 = 13. #### 13")
    annotated = answer_report(QUESTION, "He has <<3+4=7>>7, then <<7+5=13>>13 apples. #### 13")
    assert (right["checks_failed"], right["any_check_failed"]) == (0.0, 0.0)
    assert right["checks"] > 0
    assert (wrong["checks_failed"], wrong["any_check_failed"]) == (1.0, 1.0)  # 3 + 4 = 8; 8 + 5 = 13 holds
    assert annotated["checks_failed"] == 1.0


def test_the_final_answer_its_provenance_and_second_thoughts() -> None:
    computed = answer_report(QUESTION, "3 + 4 + 5 = 12\n#### 12")
    missing = answer_report(QUESTION, "He probably has a dozen or so.")
    doubt = answer_report(QUESTION, "3 + 4 + 5 = 12\n#### 12\nHowever, he may have eaten one, so 11.")
    assert (computed["final_present"], computed["final_computed"], computed["final_is_last_result"]) == (1, 1, 1)
    assert computed["text_after_final"] == 0.0
    assert (missing["final_present"], missing["final_computed"]) == (0.0, 0.0)
    assert missing["hedge_uncertain"] == 0.0
    assert answer_report(QUESTION, "It might be 12.")["hedge_uncertain"] == 1
    assert doubt["text_after_final"] > 0
    assert doubt["hedge_however"] == 1.0
    assert answer_report(QUESTION, "The answer is 12.5")["final_fractional"] == 1.0


def test_numbers_of_the_question_the_answer_never_uses() -> None:
    complete = answer_report(QUESTION, "3 + 4 + 5 = 12. #### 12")
    skipped = answer_report(QUESTION, "3 + 4 = 7. #### 7")
    assert complete["question_numbers_unused"] == 0.0
    assert skipped["question_numbers_unused"] == 1.0
    assert skipped["question_numbers_unused_share"] == pytest.approx(1 / 3)


def test_python_blocks_that_do_not_parse_and_refusals() -> None:
    good = answer_report("sum a list", "```python\ndef total(xs):\n    return sum(xs)\n```")
    bad = answer_report("sum a list", "```python\ndef total(xs:\n    return sum(xs)\n```\n```js\nlet a = (\n```")
    assert (good["code_blocks"], good["code_blocks_failed"]) == (1.0, 0.0)
    assert (bad["code_blocks"], bad["code_blocks_failed"]) == (2.0, 1.0)  # only Python is parsed
    assert answer_report("x", "I'm sorry, as an AI I cannot help with that.")["hedge_refusal"] == 1.0


@pytest.mark.parametrize(
    ("expr", "value"),
    [("3 x 4", 12.0), ("(2+3)*4", 20.0), ("1,200 / 4", 300.0), ("-2 * 3", -6.0), ("$5 * 2", 10.0)],
)
def test_plain_arithmetic_evaluates(expr: str, value: float) -> None:
    assert _evaluate(expr) == pytest.approx(value)


@pytest.mark.parametrize("expr", ["2**10", "1/0", "__import__('os')", "9" * 300, "(" * 150 + "1" + ")" * 150, "a+b"])
def test_anything_but_plain_arithmetic_is_not_evaluated(expr: str) -> None:
    assert _evaluate(expr) is None


def test_features_are_a_finite_vector_in_the_documented_order() -> None:
    for answer in ["", "#### 7", "x" * 100_000, "1/0 = 5", "9" * 400 + " * 9 = 1"]:
        v = answer_features(QUESTION, answer)
        assert v.shape == (len(ANSWER_FEATURES),)
        assert v.dtype == np.float32
        assert np.isfinite(v).all()
    report = answer_report(QUESTION, "3 + 4 = 8. #### 8")
    assert list(answer_features(QUESTION, "3 + 4 = 8. #### 8")) == pytest.approx([report[n] for n in ANSWER_FEATURES])


@pytest.mark.parametrize(
    ("answer", "failed"),
    [("76 + 58 = 135", 1.0), ("76 + 58 = 134", 0.0), ("10 / 3 = 3.33", 0.0), ("10 / 3 = 3.4", 1.0),
     ("10 / 3 = 3", 0.0), ("2 x 2.5 = 5.0", 0.0), ("1,000 * 3 = 3,001", 1.0)],
)  # fmt: skip
def test_a_stated_result_must_agree_to_the_precision_it_is_written_with(answer: str, failed: float) -> None:
    assert answer_report("q", answer)["checks_failed"] == failed
