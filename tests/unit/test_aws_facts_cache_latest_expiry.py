"""Review of issue 12: the on-disk facts cache trusts `$Latest`/`$Default` only for
aws.refreshInterval after they were read."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.aws.cache import VERSION, FactCache

NOW = 1_800_000_000.0


@pytest.mark.parametrize("read_at", [str(NOW + 86_400), "NaN", "Infinity"])
def test_an_alias_not_read_in_the_last_refresh_interval_is_not_trusted(tmp_path: Path, read_at: str) -> None:
    path = tmp_path / "facts.json"
    # a host whose clock ran a day ahead (or an NTP step back since); a hand-edited or damaged file
    path.write_text(
        f'{{"version": {VERSION}, "instanceTypes": {{}}, "templateVersions": {{}}, '
        f'"templateAliases": {{"id:lt-0abc@$Latest": ["p4d.24xlarge", {read_at}]}}}}'
    )
    cache = FactCache(path, clock=lambda: NOW)
    assert cache.template_type("id:lt-0abc@$Latest", True, 60.0) is None
