"""advertisedListeners parsing and the choice of a lookup's listener."""

from __future__ import annotations

import pytest

from magnetar.broker.cluster.listeners import listener_urls, parse_listeners
from magnetar.broker.errors import ServiceNotReady
from magnetar.config import ConfigError, build_settings

LISTENERS = "internal:pulsar://10.0.0.1:6650,internal:http://10.0.0.1:8080,external:pulsar+ssl://broker.example:6651"


def test_parse_groups_urls_by_name_and_scheme() -> None:
    parsed = parse_listeners(LISTENERS)
    assert parsed["internal"].pulsar == "pulsar://10.0.0.1:6650" and parsed["internal"].http == "http://10.0.0.1:8080"
    assert parsed["external"].pulsar_ssl == "pulsar+ssl://broker.example:6651" and parsed["external"].pulsar is None


@pytest.mark.parametrize("bad", ["internal", "internal:ftp://x:1", ":pulsar://x:1", "a:pulsar://x:1,a:pulsar://y:2"])
def test_malformed_lists_are_refused_at_startup(bad: str) -> None:
    with pytest.raises(ConfigError, match="advertisedListeners"):
        build_settings({"advertisedListeners": bad})


def test_lookup_picks_named_then_internal_and_refuses_unknown() -> None:
    assert listener_urls("", "", None) is None
    named = listener_urls(LISTENERS, "internal", "external")
    assert named is not None and named.pulsar_ssl == "pulsar+ssl://broker.example:6651"
    default = listener_urls(LISTENERS, "internal", None)
    assert default is not None and default.pulsar == "pulsar://10.0.0.1:6650"
    with pytest.raises(ServiceNotReady, match="do not have nope listener"):
        listener_urls(LISTENERS, "internal", "nope")
    with pytest.raises(ServiceNotReady):
        listener_urls("", "", "external")
