"""How many property cases ran and failed in this pytest process, per test (read by conftest's
terminal summary, and written to TILEGEMM_PROPERTY_JSON when that is set)."""

from __future__ import annotations

import collections

RAN: collections.Counter = collections.Counter()
FAILED: collections.Counter = collections.Counter()
