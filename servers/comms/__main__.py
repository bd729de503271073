from servers._common import run
from servers.comms.server import mcp

run(mcp)
