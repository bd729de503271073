from hanzo_hub.selection.query import subqueries
from hanzo_hub.selection.text import TextOptions, content_hash, split_identifier, tokenize, tool_text


def test_split_identifier_splits_snake_kebab_and_camel_case() -> None:
    assert split_identifier("get_weread-rank") == "get weread rank"
    assert split_identifier("listDirectoryWithSizes") == "list directory with sizes"
    assert split_identifier("HTTPServer") == "http server"


def test_tokenize_drops_stopwords_and_stems_plurals() -> None:
    assert tokenize("Read the documents") == ["read", "document"]


def test_tool_text_puts_name_words_first_and_includes_parameters(tools: list[dict[str, object]]) -> None:
    text = tool_text(tools[0])
    assert text.startswith("get forecast.")
    assert "Server: weather." in text
    assert "city: City name" in text
    assert "City name" not in tool_text(tools[0], TextOptions(params=False))


def test_content_hash_changes_with_text_and_model() -> None:
    assert content_hash("a", "m1") == content_hash("a", "m1")
    assert content_hash("a", "m1") != content_hash("b", "m1")
    assert content_hash("a", "m1") != content_hash("a", "m2")


def test_subqueries_split_multi_step_requests_only() -> None:
    assert subqueries("Create a report document, then convert it to PDF.") == [
        "Create a report document",
        "convert it to PDF",
    ]
    assert subqueries("weather in Paris") == []
