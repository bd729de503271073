from servers._common import run
from servers.api.server import mcp

run(mcp)
