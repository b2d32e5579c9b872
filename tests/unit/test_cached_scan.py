"""perfscout.state.entry_points.CachedScan: the cached, re-entrant-safe scan the codec and
rule registries share."""

from __future__ import annotations

import threading

from perfscout.state.entry_points import CachedScan, PluginEntry, PluginListing


def test_scans_once_until_cleared_and_ignores_plug_ins_when_disabled() -> None:
    calls = []

    def scan() -> tuple[dict[str, int], PluginListing]:
        calls.append(1)
        return {"a": 1}, PluginListing(group="g", loaded=[PluginEntry(id="a", value="m:a", distribution="d 1")])

    cache = CachedScan("g", scan, dict)
    assert cache.get() == {"a": 1} and cache.get() == {"a": 1} and len(calls) == 1
    listing = cache.listing()
    listing.loaded.clear()  # a copy: the cached listing is untouched
    assert [e.id for e in cache.listing().loaded] == ["a"]
    cache.clear(entry_points=False)
    assert cache.get() == {} and len(calls) == 1
    assert cache.listing() == PluginListing(group="g", enabled=False)
    cache.clear()
    assert cache.get() == {"a": 1} and len(calls) == 2


def test_a_lookup_from_inside_the_scan_sees_nothing_rather_than_scanning_again() -> None:
    seen = []

    def scan() -> tuple[tuple[str, ...], PluginListing]:
        seen.append((cache.get(), cache.listing()))  # a plug-in asking its registry on import
        return ("r",), PluginListing(group="g")

    cache: CachedScan[tuple[str, ...]] = CachedScan("g", scan, tuple)
    assert cache.get() == ("r",)
    assert seen == [((), PluginListing(group="g"))]


def test_a_failing_scan_is_not_cached_and_threads_share_one_scan() -> None:
    attempts = []
    gate = threading.Event()

    def scan() -> tuple[dict[str, int], PluginListing]:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("boom")
        gate.wait(5)
        return {"x": 1}, PluginListing(group="g")

    cache = CachedScan("g", scan, dict)
    try:
        cache.get()
    except RuntimeError:
        pass
    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.get())) for _ in range(4)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(10)
    assert results == [{"x": 1}] * 4 and len(attempts) == 2
