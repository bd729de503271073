"""Structured data conversion between JSON, YAML, TOML and CSV files."""

from __future__ import annotations

import csv
import io
import json
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp_types import CallToolResult
from pydantic import Field

from servers._common import ToolError, json_result
from servers._hints import REPLACES
from servers._roots import AllowedRoots
from servers._toolset import Toolset, tool

DataFormat = Literal["json", "yaml", "toml", "csv"]
SUFFIXES: dict[str, DataFormat] = {".json": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".csv": "csv"}
MAX_DATA_BYTES = 50 * 2**20


def format_of(path: Path, given: DataFormat | None) -> DataFormat:
    if given is not None:
        return given
    found = SUFFIXES.get(path.suffix.lower())
    if found is None:
        raise ToolError(f"cannot tell the format of {path.name} from its extension; pass it explicitly")
    return found


def parse(text: str, fmt: DataFormat) -> Any:
    """Parse ``text`` as ``fmt``; a syntax error becomes a ToolError with the parser's position."""
    import yaml

    try:
        if fmt == "json":
            return json.loads(text)
        if fmt == "yaml":
            return yaml.safe_load(text)
        if fmt == "toml":
            return tomllib.loads(text)
        return list(csv.DictReader(io.StringIO(text)))
    except (json.JSONDecodeError, yaml.YAMLError, tomllib.TOMLDecodeError, csv.Error) as exc:
        raise ToolError(f"input is not valid {fmt}: {exc}") from None


def _jsonable(value: Any) -> Any:
    """TOML and YAML dates/times become ISO strings so every format can hold them."""
    return json.loads(json.dumps(value, default=str))


def dump(value: Any, fmt: DataFormat, indent: int) -> str:
    import tomli_w
    import yaml

    if fmt == "json":
        return json.dumps(value, ensure_ascii=False, indent=indent or None, default=str) + "\n"
    if fmt == "yaml":
        return str(yaml.safe_dump(_jsonable(value), sort_keys=False, allow_unicode=True))
    if fmt == "toml":
        if not isinstance(value, dict):
            raise ToolError("TOML needs a table (an object) at the top level; this data is a list or a scalar")
        try:
            return tomli_w.dumps(_drop_nulls(_jsonable(value)))
        except TypeError as exc:
            raise ToolError(f"data cannot be written as TOML: {exc}") from None
    if not isinstance(value, list) or not all(isinstance(r, dict) for r in value):
        raise ToolError("CSV needs a list of flat objects (records) at the top level")
    columns = list(dict.fromkeys(k for row in value for k in row))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in value:
        writer.writerow({k: json.dumps(v) if isinstance(v, dict | list) else v for k, v in row.items()})
    return out.getvalue()


def _drop_nulls(value: Any) -> Any:
    """TOML has no null: keys holding None are left out."""
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value if v is not None]
    return value


class FormatTools(Toolset):
    """Conversion between JSON, YAML, TOML and CSV files."""

    def __init__(self, roots: AllowedRoots) -> None:
        self.roots = roots

    @tool(
        name="convert_data",
        description=(
            "Convert a structured data file between JSON, YAML, TOML and CSV (formats taken from the extensions "
            "unless given). CSV is read as a list of records and written from one; TOML needs an object at the top. "
            "Use to turn configs or exports into another format. Returns the output path, formats and a preview."
        ),
        annotations=REPLACES,
    )
    def convert_data(
        self,
        path: Annotated[str, Field(description="input file")],
        output: Annotated[str, Field(description="output file")],
        input_format: Annotated[DataFormat | None, Field(description="default: from the input extension")] = None,
        output_format: Annotated[DataFormat | None, Field(description="default: from the output extension")] = None,
        indent: Annotated[int, Field(ge=0, le=8, description="JSON indentation (0 = compact)")] = 2,
        overwrite: Annotated[bool, Field(description="replace an existing output file")] = False,
    ) -> CallToolResult:
        src = self.roots.existing_file(path)
        if src.stat().st_size > MAX_DATA_BYTES:
            raise ToolError(f"{path} is larger than {MAX_DATA_BYTES} bytes")
        fmt_in = format_of(src, input_format)
        dst = self.roots.resolve(output, kind="output")
        fmt_out = format_of(dst, output_format)
        value = parse(src.read_text(encoding="utf-8-sig"), fmt_in)
        text = dump(value, fmt_out, indent)
        dst = self.roots.output_file(output, overwrite=overwrite)
        dst.write_text(text, encoding="utf-8")
        return json_result(
            {"output": str(dst), "from": fmt_in, "to": fmt_out, "bytes": len(text.encode()), "preview": text[:2000]}
        )
