from servers._common import run
from servers.data.server import mcp

run(mcp)
