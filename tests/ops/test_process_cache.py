"""The one helper for values kept per process (osmo.process_cache)."""

from __future__ import annotations

import threading

from osmo.process_cache import ProcessCache


def test_a_value_is_answered_only_for_the_version_it_was_kept_for():
    # given a value kept for pool 1 as of version (3, 1)
    cache: ProcessCache[int, str] = ProcessCache("test", size=4)
    cache.put(1, "idle index", (3, 1))
    # when / then: the same version finds it, another does not
    assert cache.get(1, (3, 1)) == "idle index"
    assert cache.get(1, (4, 1)) is None
    assert cache.get(2, (3, 1)) is None


def test_a_new_version_replaces_the_pools_entry_in_place():
    # given pool 1 kept as of version 3
    cache: ProcessCache[int, str] = ProcessCache("test", size=4)
    cache.put(1, "old", 3)
    # when the pool's next version is kept
    cache.put(1, "new", 4)
    # then only the new one is there: one entry per pool
    assert (cache.get(1, 3), cache.get(1, 4), len(cache)) == (None, "new", 1)


def test_the_least_recently_used_entry_goes_first():
    # given a full cache of two, whose first entry was read since
    cache: ProcessCache[str, int] = ProcessCache("test", size=2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    # when a third is kept
    cache.put("c", 3)
    # then the one not read since goes
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)


def test_threads_writing_at_once_never_exceed_the_size():
    # given a small cache and eight threads keeping 500 keys each
    cache: ProcessCache[tuple[int, int], int] = ProcessCache("test", size=16)

    def fill(thread: int) -> None:
        for key in range(500):
            cache.put((thread, key), key)
            cache.get((thread, key - 1))

    threads = [threading.Thread(target=fill, args=(n,)) for n in range(8)]
    # when they run
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # then the cache holds exactly its size
    assert len(cache) == 16
