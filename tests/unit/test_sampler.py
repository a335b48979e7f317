"""--metrics-url: repeatable or comma separated, "off" wins (the sampler against real HTTP servers is in
tests/integration/test_sampler_servers.py)."""

from __future__ import annotations

import pytest

from fourfold.levels.options import Settings, metrics_url_list


@pytest.mark.parametrize(("given", "urls"), [
    ([], ()),
    (["http://a/metrics"], ("http://a/metrics",)),
    (["http://a/metrics", "http://b:9400/metrics"], ("http://a/metrics", "http://b:9400/metrics")),
    ("http://a/metrics, http://b:9400/metrics", ("http://a/metrics", "http://b:9400/metrics")),
    (["http://a/metrics,http://b/metrics", "http://a/metrics"], ("http://a/metrics", "http://b/metrics")),
    (["off"], ("off",)),
    (["http://a/metrics", "OFF"], ("off",)),
])
def test_metrics_url_is_repeatable_or_comma_separated(given, urls):
    assert metrics_url_list(given) == urls

    class Options:
        metrics_url = given
    assert metrics_url_list(Settings.from_options(Options()).metrics_url) == urls
