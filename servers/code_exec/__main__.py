from servers._common import run
from servers.code_exec.server import mcp

run(mcp)
