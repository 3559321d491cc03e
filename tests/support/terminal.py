"""Children that take Ctrl-C as a foreground process of a terminal does.

A shell without job control starts a background command (`make test &`) with SIGINT and SIGQUIT
ignored, and an ignored signal stays ignored across fork and exec: a CLI started from such a test
run never sees the Ctrl-C a test sends it, and the test would judge the runner's shell, not the
tool. `preexec_fn=from_a_terminal` gives the child the dispositions a terminal's foreground job has.
"""

from __future__ import annotations

import signal


def from_a_terminal() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
