"""The browser harness itself: Chromium admits the harness's own DevTools origin, which it is
told to allow, and refuses any other (so the flag, not a browser default, is what lets the
tests in: Debian's Chromium 150 refused the client's default origin)."""

from __future__ import annotations

import pytest

import chromium


def test_chromium_admits_the_harness_origin_and_refuses_another():
    chromium.browser_or_skip()
    with chromium.Browser() as browser:
        assert browser.product.split("/")[0] in ("Chrome", "Chromium", "HeadlessChrome")
        ws = browser.connect()  # the harness's origin
        ws.close()
        with pytest.raises(RuntimeError, match="refused the DevTools connection"):
            browser.connect(origin="http://elsewhere.example")
