from servers._common import run
from servers.system.server import mcp

run(mcp)
