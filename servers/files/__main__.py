from servers._common import run
from servers.files.server import mcp

run(mcp)
