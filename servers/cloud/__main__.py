from servers._common import run
from servers.cloud.server import mcp

run(mcp)
