from servers._common import run
from servers.ml.server import mcp

run(mcp)
