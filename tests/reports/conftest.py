"""tests/reports: the report pipeline in process (hand-made run directories, tests/rundirs.py, read,
compared and rendered as Markdown, HTML with plots and CSV). Pure code like tests/unit: no process
started, no socket bound (tests/purity.py)."""

from tests.purity import no_process_or_server  # noqa: F401  (the folder's autouse fixture)
