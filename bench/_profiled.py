"""Run a module under a cProfile that signals switch on and off, so only the steady state is profiled.

``python bench/_profiled.py OUT.prof cpu|wall -m MODULE [ARGS...]``: SIGUSR1 starts profiling the main thread, SIGUSR2
stops it and writes ``OUT.prof``. Start-up (imports, the handshake) stays out of the numbers. ``cpu`` times the main
thread's CPU (``time.thread_time``); ``wall`` times wall clock, so it also shows where the thread lost the CPU.
"""

from __future__ import annotations

import cProfile
import os
import runpy
import signal
import sys
import time
from typing import Any


def main() -> None:
    out, clock, flag, module, *args = sys.argv[1:]
    if flag != "-m" or clock not in ("cpu", "wall"):
        raise SystemExit("usage: _profiled.py OUT.prof cpu|wall -m MODULE [ARGS...]")
    profiler = cProfile.Profile(time.thread_time) if clock == "cpu" else cProfile.Profile()

    def start(signum: int, frame: Any) -> None:
        profiler.enable()

    def stop(signum: int, frame: Any) -> None:
        profiler.disable()
        profiler.dump_stats(out)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    sys.argv = [module, *args]
    sys.path[0] = os.getcwd()  # as ``python -m`` does, not the directory of this script
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
