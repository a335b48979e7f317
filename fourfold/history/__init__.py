"""Team memory: runs kept release by release (:mod:`.store`, :mod:`.entry`), a metric's trend and a run
checked against the recent past (:mod:`.check`, :mod:`.trend`); ``fourfold history`` (docs/history.md)."""
