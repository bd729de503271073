"""Stage 2: an LLM reads the stage-1 candidates and keeps (and orders) the ones the request needs.

The prompt lists candidates by short id (``t1``, ``t2``, ...) with their name and a one-line description, so the
model never has to copy long tool names; it answers with a JSON list of ids. Ids that are not among the candidates
are ignored (the filter may only drop or reorder), and an answer with no JSON list, or an empty one, is a failure:
the pipeline then keeps the stage-1 order and reports stage 2 as ``failed`` with the reason. The model is reached
through any ``Completer`` (the routing layer, or the client's own model through sampling).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import anyio

from hanzo_hub.errors import CompletionError
from hanzo_hub.llm.types import Caller, ChatMessage, ChatRequest, Completer

if TYPE_CHECKING:
    from hanzo_hub.selection.pipeline import Candidate

DEFAULT_TIMEOUT = 20.0
DESCRIPTION_CHARS = 200
SYSTEM_PROMPT = (
    "You choose which tools an assistant needs for a user's request. You get the request and numbered candidate "
    "tools. Keep every tool that the request (or one of its steps) may need, best first; drop tools that are "
    'clearly unrelated. Answer with only a JSON list of the kept ids, for example ["t3", "t1"].'
)
_LIST = re.compile(r"\[[^\[\]]*\]", re.DOTALL)


class FilterFailed(CompletionError):
    """The model's answer could not be used (no JSON list of ids, or nothing kept)."""


def _one_line(text: str) -> str:
    first = " ".join(text.split())
    return first[:DESCRIPTION_CHARS]


def build_prompt(query: str, candidates: Sequence[Candidate]) -> str:
    """The user message: the request, then one line per candidate ``t<i>: name - description``."""
    lines = [f"Request: {query}", "", "Candidate tools:"]
    for i, cand in enumerate(candidates, start=1):
        name = str(cand.tool.get("name", cand.id))
        server = str(cand.tool.get("server", ""))
        label = f"{name} ({server})" if server else name
        lines.append(f"t{i}: {label} - {_one_line(str(cand.tool.get('description') or ''))}")
    lines += ["", "Answer with the JSON list of the ids to keep, best first."]
    return "\n".join(lines)


def parse_answer(text: str, candidates: Sequence[Candidate]) -> list[str]:
    """Candidate ids (tool ids) named in the model's answer, in its order; unknown ids are ignored.

    Raises:
        FilterFailed: the answer holds no JSON list, or none of its entries is a candidate.
    """
    by_short = {f"t{i}": c.id for i, c in enumerate(candidates, start=1)}
    by_name = {str(c.tool.get("name", "")): c.id for c in candidates}
    for match in reversed(_LIST.findall(text)):
        try:
            items = json.loads(match)
        except ValueError:
            continue
        if not isinstance(items, list):
            continue
        kept = [by_short.get(str(x).strip()) or by_name.get(str(x).strip()) for x in items]
        ids = list(dict.fromkeys(k for k in kept if k))
        if ids:
            return ids
        raise FilterFailed("the model kept none of the candidates")
    raise FilterFailed("the model's answer has no JSON list of ids")


class LlmFilter:
    """A ``Stage2Filter`` backed by a ``Completer``; call it with the query and the stage-1 candidates."""

    def __init__(
        self,
        completer: Completer,
        *,
        caller: Caller | None = None,
        model: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_tokens: int = 256,
    ) -> None:
        self._completer = completer
        self._caller = caller or Caller(user="hanzo-hub:tool-selection")
        self._model = model
        self._timeout = timeout
        self._max_tokens = max_tokens

    async def __call__(self, query: str, candidates: Sequence[Candidate]) -> list[str]:
        """The kept candidate ids, best first.

        Raises:
            FilterFailed: unusable answer, or no answer within the timeout.
            CompletionError: the completer failed.
        """
        if not candidates:
            return []
        request = ChatRequest(
            messages=(
                ChatMessage(role="system", content=SYSTEM_PROMPT),
                ChatMessage(role="user", content=build_prompt(query, candidates)),
            ),
            model=self._model,
            max_tokens=self._max_tokens,
            temperature=0.0,
        )
        with anyio.move_on_after(self._timeout) as scope:
            result = await self._completer.chat(request, caller=self._caller)
        if scope.cancelled_caught:
            raise FilterFailed(f"no answer within {self._timeout:g} s")
        return parse_answer(result.message.text(), candidates)
