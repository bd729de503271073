"""Which broken messages fail a request at once, and which stay exceptions on the read stream: the text as servers
write it, and the exceptions the SDK's parser raises for it."""

from __future__ import annotations

import mcp_types as types
import pytest
from pydantic import ValidationError

from hanzo_hub.backends.broken_answers import answer_to_frame, answer_to_junk, answered_id


def parse_error(text: str) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    return caught.value


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b'{"jsonrpc": "2.0", "id": 7, "result": {"content": [', 7),
        (b'{"jsonrpc":"2.0","id":"hub-1a-3","error":{"code"', "hub-1a-3"),
        (b'{"jsonrpc":"2.0","id":"a \\"quoted\\" id","result":', 'a "quoted" id'),
        (b'{"jsonrpc": "2.0", "result": {"id": 9, "text": "', None),  # the only id is inside the result
        (b'{"jsonrpc": "2.0", "method": "sampling/createMessage", "id": 3, "params": {"result": 1', None),
        (b'{"jsonrpc": "2.0", "id": 4, "method": "ping"}', None),  # a request of the server's own
        (b'{"jsonrpc": "2.0", "id": 4', None),  # cut off before anything says it is an answer
        (b"not json at all", None),
    ],
)
def test_answered_id_takes_only_a_top_level_id_before_the_result(head: bytes, expected: object) -> None:
    assert answered_id(head) == expected


@pytest.mark.parametrize(
    ("text", "request_id", "reason"),
    [
        ('{"jsonrpc": "2.0", "id": 1, "result": "hello"}', 1, "its result is not an object"),
        ('{"jsonrpc": "2.0", "id": 2, "error": "boom"}', 2, "its error is not a JSON-RPC error object"),
        ('{"jsonrpc": "2.0", "id": 3, "error": {"code": "x", "message": "m"}}', 3, "its error is not a JSON-RPC error"),
        ('{"jsonrpc": "1.0", "id": 4, "result": {}}', 4, "it is not JSON-RPC 2.0"),
        ('{"jsonrpc": "2.0", "id": "s-5", "result": {"content": [{"type": "te', "s-5", "it is not valid JSON"),
    ],
)
def test_a_broken_answer_becomes_an_error_for_its_request_from_text_and_from_the_parsers_exception(
    text: str, request_id: object, reason: str
) -> None:
    for answer in (answer_to_frame(text.encode(), "srv"), answer_to_junk(parse_error(text), "srv")):
        assert answer is not None
        message = answer.message
        assert isinstance(message, types.JSONRPCError)
        assert message.id == request_id
        assert message.error.code == types.INTERNAL_ERROR
        assert message.error.message.startswith("server 'srv' answered with an invalid message: " + reason)


@pytest.mark.parametrize(
    "text",
    [
        "a log line on stdout",
        '{"jsonrpc": "2.0", "id": true, "result": 5}',  # no usable id
        '{"jsonrpc": "2.0", "id": 1}',  # neither result nor error
        '{"jsonrpc": "2.0", "method": 5, "id": 1, "result": 1}',  # a broken request, not an answer
        "[1, 2]",
        '{"jsonrpc": "2.0", "result": {"id": 7, "text": "cut',
    ],
)
def test_a_message_that_answers_no_request_stays_an_exception(text: str) -> None:
    assert answer_to_frame(text, "srv") is None
    assert answer_to_junk(parse_error(text), "srv") is None


def test_an_exception_that_holds_no_message_gives_nothing() -> None:
    assert answer_to_junk(ValueError("closed"), "srv") is None
