"""Command line: argv → settings → the chosen command. The only place that configures logging.

```
hanzo-hub serve [--config FILE] [--http] [--host H] [--port P] [--home DIR]
hanzo-hub import [--from FILE] [--project DIR] [--dry-run]
hanzo-hub snippet [--http]
hanzo-hub token --user ID
hanzo-hub tools search "QUERY" [--json] [--catalog]
hanzo-hub secrets set|list|rm ...           (hub/policy_cli.py)
hanzo-hub auth login|status|logout ...      (hub/auth_cli.py)
hanzo-hub policy show|check ...
hanzo-hub doctor [--probe] [--json]         (doctor/)
hanzo-hub prepare                           export and check the embedding model once (later starts skip torch)
```
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from hanzo_hub import __version__
from hanzo_hub.catalog import cli as catalog_cli
from hanzo_hub.config import HubSettings, load_settings
from hanzo_hub.doctor import cli as doctor_cli
from hanzo_hub.errors import AuthorizationRequired, ConfigError
from hanzo_hub.hub import auth_cli, memory_cli, policy_cli

logger = logging.getLogger("hanzo_hub")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hanzo-hub", description="One MCP server in front of many MCP servers.")
    parser.add_argument("--version", action="version", version=f"hanzo-hub {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", type=Path, help="config file (JSON with mcpServers/servers, or TOML)")
    common.add_argument("--home", type=Path, help="state directory (default: $HANZO_HUB_HOME)")
    common.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", parents=[common], help="serve the hub (stdio by default)")
    serve.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    serve.add_argument("--host", help="HTTP bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="HTTP port (default 8765)")
    serve.add_argument("--stateless", action="store_true", help="HTTP without sessions")

    imp = commands.add_parser("import", parents=[common], help="import servers from other MCP clients' configs")
    imp.add_argument("--from", dest="source", type=Path, action="append", help="read this file instead")
    imp.add_argument("--project", type=Path, help="also read this project's .mcp.json, .cursor/, .vscode/")
    imp.add_argument("--dry-run", action="store_true", help="report without writing")

    tools = commands.add_parser("tools", help="search the tools of every configured server")
    tools_cmd = tools.add_subparsers(dest="tools_command", required=True)
    search = tools_cmd.add_parser("search", parents=[common], help="rank tools for a task, as find_tools would")
    search.add_argument("query", help="the task, in plain words")
    search.add_argument("--json", action="store_true", help="machine-readable output")
    search.add_argument("--embedder", choices=["sentence-transformers", "fake", "none"], help="dense half of search")
    search.add_argument("--profile", help="rank only the tools of this exposure profile")
    search.add_argument(
        "--catalog",
        action="store_true",
        help="rank the tools of every cataloged server, enabled or not (which server to enable for a task)",
    )

    token = commands.add_parser("token", help="make a bearer token for the HTTP endpoint")
    token.add_argument("--user", required=True, help="the user id the token stands for")

    commands.add_parser(
        "prepare",
        parents=[common],
        help="export and check the embedding model into the hub's model cache now, so that its first use skips torch",
    )
    snippet = commands.add_parser("snippet", parents=[common], help="print the entry to paste into a client config")
    snippet.add_argument("--http", action="store_true", help="print an HTTP entry instead")
    catalog_cli.register(commands, common)
    policy_cli.register(commands, common)
    auth_cli.register(commands, common)
    memory_cli.register(commands, common)
    doctor_cli.register(commands, common)
    return parser


def _settings(args: argparse.Namespace) -> HubSettings:
    overrides: dict[str, Any] = {}
    if args.home is not None:
        overrides["home"] = args.home
    if args.log_level:
        overrides["log_level"] = args.log_level
    http: dict[str, Any] = {}
    for key in ("host", "port"):
        value = getattr(args, key, None)
        if value is not None:
            http[key] = value
    if getattr(args, "stateless", False):
        http["stateless"] = True
    if http:
        overrides["http"] = http
    return load_settings(args.config, **overrides)


class _JunkLineFilter(logging.Filter):
    """Drop the SDK's traceback for each non-JSON line a downstream prints, and for an OAuth flow the hub stops
    because a server needs a new login; the supervisor logs a short summary of both."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "mcp.client.stdio" and str(record.msg).startswith("Failed to parse JSONRPC"):
            return False
        error = record.exc_info[1] if record.exc_info else None
        return not (record.name == "mcp.client.auth.oauth2" and isinstance(error, AuthorizationRequired))


def _configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)  # never stdout: over stdio it carries the protocol
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(_JunkLineFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    if level != "DEBUG":
        # hanzo_hub.audit: one line per tool call; <home>/logs/audit.jsonl has them all (console only at DEBUG)
        for noisy in ("mcp", "httpx2", "uvicorn.access", "hanzo_hub.audit"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


async def _serve(settings: HubSettings, http: bool) -> None:
    if http:
        from hanzo_hub.app import serve_http

        await serve_http(settings)  # uvicorn handles SIGINT/SIGTERM with a graceful shutdown
        return
    from hanzo_hub.transports.stdio import serve_stdio

    async with anyio.create_task_group() as tg:

        async def on_signals() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
                async for signum in signals:
                    logger.info("received signal %d, shutting down", signum)
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(on_signals)
        await serve_stdio(settings)
        tg.cancel_scope.cancel()


def _use_uvloop(choice: str) -> bool:
    """Whether to serve on uvloop (``event_loop``): its loop, pipes and sockets run in C, which cuts the hub's CPU
    per relayed call (``bench/proxy_overhead.py``)."""
    if choice == "asyncio":
        return False
    try:
        import uvloop  # noqa: F401
    except ImportError:
        if choice == "uvloop":
            raise ConfigError("event_loop is 'uvloop' but uvloop is not installed (pip install uvloop)") from None
        return False
    return True


def _catalog_enabled(settings: HubSettings) -> bool:
    """Whether any catalog server is enabled (by config or ``hanzo-hub catalog enable``)."""
    from hanzo_hub.catalog.loader import read_state

    return bool(settings.catalog.enabled or read_state(settings).enabled)


def _cmd_serve(args: argparse.Namespace) -> int:
    gc.disable()  # start-up allocates ~100k long-lived objects; the serving path freezes them and re-enables
    settings = _settings(args)
    _configure_logging(settings.log_level)
    uvloop = _use_uvloop(settings.event_loop)
    logger.info(
        "hanzo-hub %s: %d servers, home %s, event loop %s",
        __version__, len(settings.servers), settings.home, "uvloop" if uvloop else "asyncio",
    )  # fmt: skip
    if not settings.servers and not _catalog_enabled(settings):
        logger.warning(
            "no downstream servers yet: add them to %s (`hanzo-hub import` copies those of Claude Desktop, Claude "
            "Code, Cursor and VS Code), or serve cataloged ones with `hanzo-hub catalog enable ID` (`hanzo-hub "
            "catalog list`)",
            settings.config_file or settings.home / "config.json",
        )
    anyio.run(_serve, settings, args.http, backend_options={"use_uvloop": uvloop})
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from hanzo_hub.catalog.importer import collect, default_sources, file_source, merge_into

    settings = _settings(args)
    target = settings.config_file or settings.home / "config.json"
    sources = [file_source(p) for p in args.source] if args.source else default_sources(project=args.project)
    report = collect(sources, dict(settings.servers))
    for path in report.read:
        print(f"read {path}")
    for name, (label, _entry) in report.taken.items():
        print(f"took {label}" if name else label)
    for client, name, why in report.skipped:
        print(f"skipped {name} ({client}): {why}")
    if not report.taken:
        print("nothing to import")
        return 0
    if args.dry_run:
        print(f"dry run: would add {len(report.taken)} servers to {target}")
        return 0
    merge_into(target, report)
    print(f"added {len(report.taken)} servers to {target}")
    return 0


def _cmd_snippet(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if args.http:
        entry: dict[str, Any] = {
            "type": "http",
            "url": f"http://{settings.http.host}:{settings.http.port}{settings.http.path}",
        }
    else:
        cmd = [sys.executable, "-m", "hanzo_hub", "serve"]
        if settings.config_file is not None:
            cmd += ["--config", str(settings.config_file.resolve())]
        entry = {"command": cmd[0], "args": cmd[1:]}
    print(json.dumps({"mcpServers": {"hanzo-hub": entry}}, indent=2))
    return 0


def _cmd_tools(args: argparse.Namespace) -> int:
    _configure_logging(args.log_level or "WARNING")  # the ranking is the output
    settings = _settings(args)
    if args.profile and args.profile not in settings.exposure.profiles:
        print(f"unknown profile {args.profile!r}; configured: {sorted(settings.exposure.profiles)}", file=sys.stderr)
        return 2
    if not args.catalog:
        return _tools_search(args, settings, None)
    import tempfile

    from hanzo_hub.catalog.loader import load_catalog, served_entries

    catalog = load_catalog(settings)
    served = set(served_entries(settings, catalog))
    with tempfile.TemporaryDirectory(prefix="hanzo-hub-catalog-search-") as tmp:
        # a scratch hub that serves every entry, with its own tool index (never the configured one, which it would
        # rewrite), so nothing is written into the real home or index but the model cache
        everything = settings.model_copy(
            update={
                "home": Path(tmp),
                "catalog": settings.catalog.model_copy(update={"enabled": tuple(catalog.entries)}),
                "exposure": settings.exposure.model_copy(
                    update={"index_store": "chroma", "index_path": None, "chroma_host": None}
                ),
                "embedding": settings.embedding.model_copy(
                    update={"cache_path": settings.embedding.cache_dir(settings.home)}
                ),
            }
        )
        return _tools_search(args, everything, served)


def _tools_search(args: argparse.Namespace, settings: HubSettings, served: set[str] | None) -> int:
    """Rank the tools ``settings`` serves; ``served`` (catalog search) names the servers the real hub serves."""
    from hanzo_hub.hub.core import Hub
    from hanzo_hub.hub.search import ToolSearch, tool_describer

    exposure = settings.exposure
    if args.embedder:
        exposure = exposure.model_copy(update={"embedder": args.embedder})
    hub = Hub(settings)
    tools = tuple(hub.snapshot_tools())
    if not tools:
        print("no tools known: configure servers (hanzo-hub import, hanzo-hub catalog enable ID), or search the "
              "catalog's servers with --catalog", file=sys.stderr)  # fmt: skip
        print(json.dumps({"query": args.query, "tools": []}) if args.json else "no tools")
        return 1
    describe = tool_describer(hub)

    async def run() -> tuple[Any, list[Any]]:
        search = ToolSearch(exposure, home=settings.home, describe=describe, embedding=settings.embedding)
        try:
            return await search.find(args.query, tools, profile=args.profile)
        finally:
            await search.aclose()

    selection, _chosen = anyio.run(run)
    rows = []
    for c in selection.tools:
        server = describe(c.id)[0]
        rows.append({"name": c.id, "score": round(c.score, 4), "tokens": c.tokens, "server": server}
                    | ({"enabled": server in served} if served is not None else {}))  # fmt: skip
    if args.json:
        body = {
            "query": args.query,
            "tools": rows,
            "tokens": selection.tokens,
            "all_tools_tokens": selection.all_tokens,
            "llm_filter": selection.stage2,
            "note": selection.stage2_note,
            "query_adapter": selection.query_adapter,
            "timings_ms": selection.timings_ms,
        }
        print(json.dumps(body, indent=2))
        return 0
    for rank, row in enumerate(rows, 1):
        mark = ""
        if served is not None:  # which server to enable for it
            mark = "  enabled" if row["enabled"] else f"  hanzo-hub catalog enable {row['server']}"
        print(f"{rank:>2}. {row['name']:<60} score {row['score']:<8} {row['tokens']:>5} tokens{mark}")
    adapter = "on" if selection.query_adapter else "off"
    tokens = f"{selection.tokens} of {selection.all_tokens} tool tokens"
    print(f"{tokens}; LLM filter: {selection.stage2}; query adapter: {adapter}")
    return 0


def _cmd_prepare(args: argparse.Namespace) -> int:
    """Load every configured sentence-transformers model the way the hub does (export, check, int8 copy), so that
    the hub's first memory call or tool search opens the checked graph without torch."""
    import time

    from hanzo_hub.errors import EmbeddingError
    from hanzo_hub.vectors import build_embedder

    _configure_logging(args.log_level or "WARNING")
    settings = _settings(args)
    models: dict[str, Path | None] = {}
    if settings.memory.enabled and settings.memory.embedder == "sentence-transformers":
        models.setdefault("default", None)
    if settings.exposure.embedder == "sentence-transformers":
        path = settings.exposure.model_path
        models.setdefault(str(path) if path is not None else "default", path)
    if not models:
        print("no sentence-transformers embedder is configured: nothing to prepare")
        return 0
    cache = settings.embedding.cache_dir(settings.home)
    for name, path in models.items():
        started = time.perf_counter()
        embedder: Any = build_embedder("sentence-transformers", settings.embedding, home=settings.home, model_path=path)
        try:
            embedder.embed_sync(["prepare the embedding model"])
            embedder.embed_queries_sync(["prepare the query path"])
        except EmbeddingError as exc:
            print(f"hanzo-hub prepare: model {name}: {exc}", file=sys.stderr)
            return 1
        how = "already prepared" if not embedder.torch_loaded else "exported and checked"
        ready = embedder.runtime_in_use == "onnx"
        after = "later starts serve it without torch" if ready else "it runs on torch (no ONNX Runtime path)"
        print(f"model {name}: {how} in {cache} ({time.perf_counter() - started:.1f} s); {after}")
    return 0


def _cmd_token(args: argparse.Namespace) -> int:
    import secrets

    from hanzo_hub.transports.auth import token_digest

    token = secrets.token_urlsafe(32)
    print(f"token (shown once; give it to the client as 'Authorization: Bearer <token>'):\n  {token}\n")
    print("add to the hub's config file under auth.tokens:")
    print(json.dumps({"user": args.user, "sha256": token_digest(token)}))
    return 0


def _cmd_catalog(args: argparse.Namespace) -> int:
    return catalog_cli.run(args, _settings)


def _cmd_policy(args: argparse.Namespace) -> int:
    return policy_cli.run(args, _settings)


def _cmd_auth(args: argparse.Namespace) -> int:
    return auth_cli.run(args, _settings)


def _cmd_memory(args: argparse.Namespace) -> int:
    return memory_cli.run(args, _settings)


def _cmd_doctor(args: argparse.Namespace) -> int:
    _configure_logging(args.log_level or "ERROR")  # the findings are the report; a probe's start errors are in it
    return doctor_cli.run(args, _settings)


COMMANDS = {
    "serve": _cmd_serve,
    "import": _cmd_import,
    "snippet": _cmd_snippet,
    "token": _cmd_token,
    "prepare": _cmd_prepare,
    "tools": _cmd_tools,
    "catalog": _cmd_catalog,
    "secrets": _cmd_policy,
    "policy": _cmd_policy,
    "auth": _cmd_auth,
    "memory": _cmd_memory,
    "doctor": _cmd_doctor,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except ConfigError as exc:
        print(f"hanzo-hub: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
