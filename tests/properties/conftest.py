"""tests/properties: properties that must hold for any input (hypothesis draws hundreds per test:
random bytes, odd structures, every option's extreme values, any split of a stream). Pure code like
tests/unit: no process started, no socket bound (tests/purity.py)."""

from tests.purity import no_process_or_server  # noqa: F401  (the folder's autouse fixture)
