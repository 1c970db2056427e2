"""The file cache the README's run command uses: quicker writes, same files, still bounded."""

from __future__ import annotations

import pickle
import zlib
from pathlib import Path

from django.core.cache.backends.filebased import FileBasedCache

from sessions_site.cache import QuickFileCache


def _files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.djcache"))


def test_files_read_back_with_either_class(tmp_path):
    quick = QuickFileCache(str(tmp_path), {})
    plain = FileBasedCache(str(tmp_path), {})
    value = {"rows": [("a1b2c3d4", None, "message", "user")] * 2000, "html": "<li>é</li>" * 500}
    quick.set("from-quick", value, 60)
    plain.set("from-plain", value, 60)
    assert plain.get("from-quick") == value
    assert quick.get("from-plain") == value
    # What was written is zlib's fastest level (the format is Django's own).
    (path,) = [
        p for p in _files(tmp_path) if p.name == quick._key_to_file("from-quick").split("/")[-1]
    ]
    with path.open("rb") as f:
        pickle.load(f)  # the expiry
        body = f.read()
    assert body == zlib.compress(pickle.dumps(value, pickle.HIGHEST_PROTOCOL), 1)


def test_the_folder_stays_bounded(tmp_path):
    cache = QuickFileCache(str(tmp_path), {"OPTIONS": {"MAX_ENTRIES": 20, "CULL_FREQUENCY": 2}})
    for k in range(200):
        cache.set(f"key-{k}", k, 60)
        assert len(_files(tmp_path)) <= 20 + QuickFileCache.CULL_EVERY
    assert cache.get("key-199") == 199
