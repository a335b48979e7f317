"""A level run that adds itself to the run history when it ends (``--history-release``).

The run directory is complete once summary.json is written (:func:`fourfold.levels.hooks.finish_test`);
then ``fourfold history add`` runs in a child process, as a user would run it: the load generator's
process never imports the report machinery (pandas, scipy), and the store (a URL may hold a
password: ``--history`` is a secret option) reaches the child through ``$FOURFOLD_HISTORY``, never
its command line. A failure is reported and the run's own exit code stands: the run is measured
and kept either way, and ``fourfold history add`` can add it later.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

__all__ = ["ADD_TIMEOUT_S", "add_to_history"]

log = logging.getLogger(__name__)
ADD_TIMEOUT_S = 600.0


def add_to_history(run_dir: Path, release: str, store: str, tags: str) -> bool:
    """``fourfold history add run_dir --release release`` in a child process; True when it was added."""
    command = [sys.executable, "-m", "fourfold", "history", "add", str(run_dir), "--release", release]
    for tag in (t.strip() for t in tags.split(",")):
        if tag:
            command += ["--tag", tag]
    env = {**os.environ, "FOURFOLD_HISTORY": store} if store else dict(os.environ)
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=ADD_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.error("fourfold: the run was not added to the history: %s", exc)
        return False
    for line in done.stdout.splitlines():
        print(f"fourfold: {line}", flush=True)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        log.error("fourfold: the run was not added to the history (%s); add it later with "
                  "fourfold history add %s --release %s", why, run_dir, release)
        return False
    return True
