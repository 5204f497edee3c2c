"""``advertisedListeners`` / ``internalListenerName``: the URLs a lookup answers with, per listener name.

A client that names a listener (``listener_name`` in the official client, ``advertised_listener_name`` in
LOOKUP, ``listenerName`` over HTTP) gets that listener's URL; without a name, the internal listener's. The
format is Pulsar's: ``name:pulsar://host:port,name:pulsar+ssl://host:port,name:http://host:port``.
"""

from __future__ import annotations

from dataclasses import dataclass

from magnetar.broker.errors import ServiceNotReady

SCHEMES = ("pulsar", "pulsar+ssl", "http", "https")


@dataclass(frozen=True, slots=True)
class ListenerUrls:
    pulsar: str | None = None
    pulsar_ssl: str | None = None
    http: str | None = None
    https: str | None = None


def parse_listeners(text: str) -> dict[str, ListenerUrls]:
    """``name:url,...`` -> URLs per name; ValueError names a malformed item (one URL per scheme per name)."""
    found: dict[str, dict[str, str]] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, url = item.partition(":")
        scheme = url.partition("://")[0]
        if not sep or not name or "://" not in url or scheme not in SCHEMES or not url.partition("://")[2]:
            raise ValueError(f"expected name:scheme://host:port with scheme {'/'.join(SCHEMES)}, got {item!r}")
        urls = found.setdefault(name, {})
        if scheme in urls:
            raise ValueError(f"listener {name!r} has two {scheme} URLs")
        urls[scheme] = url
    return {name: ListenerUrls(u.get("pulsar"), u.get("pulsar+ssl"), u.get("http"), u.get("https"))
            for name, u in found.items()}


def listener_urls(advertised: str, internal_name: str, requested: str | None) -> ListenerUrls | None:
    """The URLs for a lookup naming ``requested`` (None/empty: the internal listener); None when no
    listeners are configured. A name the broker does not have is refused, as Pulsar does."""
    listeners = parse_listeners(advertised)
    if not listeners:
        if requested:
            raise ServiceNotReady(f"the broker do not have {requested} listener")
        return None
    name = requested or internal_name or next(iter(listeners))
    if name not in listeners:
        raise ServiceNotReady(f"the broker do not have {name} listener")
    return listeners[name]
