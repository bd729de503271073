from servers._common import run
from servers.devops.server import mcp

run(mcp)
