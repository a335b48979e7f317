"""tests/unit is pure code: no process started, no socket bound (tests/purity.py)."""

from tests.purity import no_process_or_server  # noqa: F401  (the folder's autouse fixture)
