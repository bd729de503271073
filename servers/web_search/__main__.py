from servers._common import run
from servers.web_search.server import mcp

run(mcp)
