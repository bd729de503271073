"""The fixture downstream served directly over streamable HTTP: the baseline of ``http_throughput``.

``python bench/_http_direct.py PORT [--json-response] [--stateless]`` serves ``tests.fixtures.downstream:build`` at
``/mcp`` with the same uvicorn settings the hub uses (no access log, no logging config), so the two differ only in
what sits behind the endpoint.
"""

from __future__ import annotations

import argparse
import os
import sys

import uvicorn

sys.path[0] = os.getcwd()  # run from the repository root, like ``python -m``, so ``tests`` imports

from tests.fixtures.downstream import build  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--json-response", action="store_true")
    parser.add_argument("--stateless", action="store_true")
    opts = parser.parse_args()
    app = build("fx-http").streamable_http_app(json_response=opts.json_response, stateless_http=opts.stateless)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=opts.port, log_level="warning", lifespan="on", access_log=False, log_config=None
    )
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
