"""Cheap, deterministic checks of a model's answer: the evidence a cascade uses to decide whether to escalate.

No model is called. The checks look for what a careful reader would: arithmetic the answer states but gets wrong
(``12 * 3 = 38``, ``<<12*3=38>>``), a final answer that is missing, not computed anywhere, or followed by second
thoughts, numbers of the question the answer never uses, hedges and refusals, code blocks that do not parse, and
the answer's length and shape against the question's. :func:`answer_features` turns them into a fixed vector
(:data:`ANSWER_FEATURES` names its entries) that the escalation model (:mod:`hanzo_hub.llm.escalation`) learns
from; :func:`answer_report` gives the same as a readable dict.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

__all__ = ["ANSWER_FEATURES", "answer_features", "answer_report"]

FloatArray = npt.NDArray[np.float32]

_NUMBER = re.compile(r"(?<![\w.])-?\$?\d[\d,]*(?:\.\d+)?")
_ANNOTATION = re.compile(r"<<([^=<>]+)=([^<>]+)>>")
_TIMES = "x\u00d7\u00f7"  # x, the multiplication sign, the division sign
_EQUATION = re.compile(
    r"(\(?\$?\d[\d,.]*\)?\s*(?:[-+*/" + _TIMES + r"]\s*\(?\$?\d[\d,.]*\)?\s*)+)=\s*\$?(-?\d[\d,]*\.?\d*)"
)
_FINAL = re.compile(
    r"(?:####|\\boxed\{|(?:final answer|the answer|answer)\s*(?:is|:)\s*)\s*\$?(-?[\d,]*\.?\d+)", re.IGNORECASE
)
_RESULT = re.compile(r"=\s*\$?(-?[\d,]*\.?\d+)")
_CODE = re.compile(r"```([a-zA-Z0-9_+-]*)\n(.*?)```", re.S)
_SAFE_EXPR = re.compile(r"[\d.\s+\-*/()]+")
_HEDGES = {
    "however": r"\bhowever\b",
    "assume": r"\bassum(?:e|ing|ption)\b",
    "approximately": r"\b(?:approximately|roughly|about)\b",
    "round": r"\bround(?:ed|ing)?\b",
    "cannot": r"\b(?:cannot|can't|unable to|not possible|impossible)\b",
    "not_enough": r"\bnot enough (?:information|info|data)\b",
    "self_correct": r"\b(?:wait|mistake|actually|i apologi[sz]e|let me re|correction)\b",
    "uncertain": r"\b(?:might|may be|perhaps|not sure|unclear|it depends)\b",
    "refusal": r"\b(?:i'm sorry|as an ai|i cannot help|i can't assist)\b",
}
_HEDGE_RES = {name: re.compile(rx, re.IGNORECASE) for name, rx in _HEDGES.items()}

ANSWER_FEATURES: tuple[str, ...] = (
    "checks",
    "checks_failed",
    "any_check_failed",
    "final_present",
    "final_marks",
    "final_computed",
    "final_is_last_result",
    "final_fractional",
    "final_negative",
    "text_after_final",
    "question_numbers",
    "question_numbers_unused",
    "question_numbers_unused_share",
    "answer_numbers",
    "distinct_number_share",
    *(f"hedge_{name}" for name in _HEDGES),
    "code_blocks",
    "code_blocks_failed",
    "list_lines",
    "headings",
    "log_answer_chars",
    "log_question_chars",
    "length_ratio",
    "log_lines",
)


def _number(text: str) -> float | None:
    try:
        value = float(text.replace(",", "").replace("$", "").strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _numbers(text: str) -> list[float]:
    return [v for v in (_number(m) for m in _NUMBER.findall(text)) if v is not None]


_OPS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _value(node: ast.AST) -> float:
    """Walk a parsed arithmetic expression; anything but numbers, + - * / and unary minus raises ValueError."""
    if isinstance(node, ast.Expression):
        return _value(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_value(node.left), _value(node.right))
    raise ValueError("not plain arithmetic")


def _evaluate(expr: str) -> float | None:
    """The value of a plain arithmetic expression (digits, + - * / and parentheses), else ``None``."""
    expr = expr.replace(",", "").replace("$", "").replace("\u00d7", "*").replace("\u00f7", "/").replace("x", "*")
    if len(expr) > 200 or not _SAFE_EXPR.fullmatch(expr):
        return None
    try:
        value = _value(ast.parse(expr.strip(), mode="eval"))
    except (SyntaxError, ValueError, ArithmeticError, RecursionError):
        return None
    return value if math.isfinite(value) else None


def _arithmetic(answer: str) -> tuple[int, int]:
    """(stated calculations that could be checked, of those the ones whose stated result is wrong)."""
    checked = failed = 0
    prose = _ANNOTATION.sub(" ", answer)  # an annotation is checked once, not again as an equation in the prose
    for pattern, text in ((_ANNOTATION, answer), (_EQUATION, prose)):
        for expr, stated in pattern.findall(text):
            value, claim = _evaluate(expr), _number(stated)
            if value is None or claim is None:
                continue
            checked += 1
            failed += not _agrees(value, claim, stated)
    return checked, failed


def _agrees(value: float, claim: float, stated: str) -> bool:
    """Whether ``claim`` is ``value`` rounded to the precision it was written with (``10 / 3 = 3.33`` agrees)."""
    decimals = len(stated.strip().rstrip(".").partition(".")[2])
    return abs(value - claim) <= 0.5 * 10.0**-decimals + 1e-9 * max(1.0, abs(value))


def _code_blocks(answer: str) -> tuple[int, int]:
    """(fenced code blocks, Python blocks that do not parse)."""
    blocks = _CODE.findall(answer)
    failed = 0
    for lang, body in blocks:
        if lang.lower() in ("python", "py", "python3"):
            try:
                ast.parse(body)
            except SyntaxError:
                failed += 1
    return len(blocks), failed


def answer_report(question: str, answer: str) -> dict[str, float]:
    """Every check of :data:`ANSWER_FEATURES` for ``answer`` to ``question``, by name."""
    checks, failed = _arithmetic(answer)
    finals = list(_FINAL.finditer(answer))
    numbers = _numbers(answer)
    final = _number(finals[-1].group(1)) if finals else (numbers[-1] if numbers else None)
    body = answer[: finals[-1].start()] if finals else answer
    results = [v for v in (_number(m) for m in _RESULT.findall(body)) if v is not None]
    question_numbers = set(_numbers(question))
    answer_set = set(numbers)
    unused = [v for v in question_numbers if v not in answer_set]
    blocks, blocks_failed = _code_blocks(answer)
    lines = answer.splitlines()
    out: dict[str, float] = {
        "checks": math.log1p(checks),
        "checks_failed": float(failed),
        "any_check_failed": float(failed > 0),
        "final_present": float(bool(finals)),
        "final_marks": float(min(len(finals), 3)),
        "final_computed": float(final is not None and final in results),
        "final_is_last_result": float(bool(results) and final is not None and results[-1] == final),
        "final_fractional": float(final is not None and final != int(final)),
        "final_negative": float(final is not None and final < 0),
        "text_after_final": math.log1p(len(answer[finals[-1].end() :].strip())) if finals else 0.0,
        "question_numbers": math.log1p(len(question_numbers)),
        "question_numbers_unused": float(len(unused)),
        "question_numbers_unused_share": len(unused) / len(question_numbers) if question_numbers else 0.0,
        "answer_numbers": math.log1p(len(numbers)),
        "distinct_number_share": len(answer_set) / len(numbers) if numbers else 0.0,
    }
    for name, rx in _HEDGE_RES.items():
        out[f"hedge_{name}"] = float(rx.search(answer) is not None)
    out.update(
        {
            "code_blocks": float(min(blocks, 5)),
            "code_blocks_failed": float(blocks_failed),
            "list_lines": math.log1p(sum(1 for ln in lines if re.match(r"\s*(?:[-*•]|\d+[.)])\s", ln))),
            "headings": math.log1p(sum(1 for ln in lines if ln.lstrip().startswith("#") and "####" not in ln)),
            "log_answer_chars": math.log1p(len(answer)),
            "log_question_chars": math.log1p(len(question)),
            "length_ratio": min(len(answer) / max(1, len(question)), 50.0),
            "log_lines": math.log1p(len(lines)),
        }
    )
    return out


def answer_features(question: str, answer: str) -> FloatArray:
    """:func:`answer_report` as a float32 vector in :data:`ANSWER_FEATURES` order."""
    report = answer_report(question, answer)
    return np.array([report[name] for name in ANSWER_FEATURES], np.float32)
