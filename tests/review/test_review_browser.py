"""The review page in a real headless Chromium (the ``chromium`` fixture: skipped without it, required when
``SPOTDIFF_REQUIRE_BROWSER=1``): the token is required, keys accept, reject, edit and undo, a reload opens at
the first undecided item, the reviewer's file holds every decision, and two reviewers' kappa is the one
worked by hand; one reviewer's keys in two tabs lose nothing (a second server for them is refused); SPEC sets
show the boxes of the objects that change."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spotdiff.review.agreement import agreement
from spotdiff.review.server import ReviewServer
from spotdiff.review.session import ReviewSession
from spotdiff.review.sheet import read_sheet

_PAIRS = {"image_fields": ("image0", "image1"), "text_fields": ("caption0", "caption1")}


def _wait(driver, condition, what: str):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, 20).until(lambda d: condition(d), message=what)


def _current(driver) -> str:
    return driver.execute_script("return document.getElementById('item').dataset.id || ''")


def _open(driver, url: str) -> None:
    driver.get(url)
    _wait(driver, lambda d: d.execute_script("return document.body.dataset.ready === '1'"), "the page loads")


def _press(driver, keys: str, then: str | None = None) -> None:
    """Type ``keys`` on the page; wait until item ``then`` is shown."""
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).send_keys(keys).perform()
    if then is not None:
        _wait(driver, lambda d: _current(d) == then, f"item {then} after {keys!r}")


def _saved(path: Path, decisions: list[str | None]) -> None:
    """Wait until the reviewer's file holds ``decisions`` (the page answers once the file is written)."""
    import time

    deadline = time.monotonic() + 20
    while [r.decision for r in read_sheet(path, **_PAIRS)] != decisions:
        assert time.monotonic() < deadline, [r.decision for r in read_sheet(path, **_PAIRS)]
        time.sleep(0.05)


def _errors(driver) -> list:
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


@pytest.mark.slow
def test_review_with_the_keyboard_in_chromium(chromium, eqben_out):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver = chromium
    alice = ReviewServer(ReviewSession(eqben_out, "alice")).start()
    mine = eqben_out / "review.alice.csv"
    try:
        driver.get(f"http://127.0.0.1:{alice.port}/")  # without the token
        assert "403" in driver.find_element(By.TAG_NAME, "body").text
        assert all("403 (Forbidden)" in e["message"] for e in _errors(driver))  # read, so cleared
        _open(driver, alice.url)
        assert "token" not in driver.current_url  # it went into an HttpOnly cookie
        assert _current(driver) == "00000"
        loaded = "return Array.from(document.images).map(i => i.complete && i.naturalWidth > 0)"
        _wait(driver, lambda d: d.execute_script(loaded) == [True, True, True], "the pair and its pixel difference")
        _press(driver, "a", then="00001")
        _saved(mine, ["accept", None, None, None, None, None])
        _press(driver, "r", then="00002")
        _press(driver, "e")
        fields = _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#texts input"), "the text inputs")
        assert driver.switch_to.active_element == fields[0]
        fields[1].clear()
        fields[1].send_keys("An edited caption.", Keys.ENTER)
        _wait(driver, lambda d: not d.find_elements(By.CSS_SELECTOR, "#texts input"), "the edit is saved")
        _press(driver, "a", then="00003")
        _press(driver, "a", then="00004")
        _press(driver, "u", then="00003")  # undo: 00003 undecided again
        _saved(mine, ["accept", "reject", "accept", None, None, None])
        assert read_sheet(mine, **_PAIRS)[2].cells["caption1"] == "An edited caption."
        _press(driver, Keys.ARROW_LEFT, then="00002")
        assert "An edited caption." in driver.find_element(By.ID, "images").text
        driver.refresh()  # a reload opens at the first undecided item
        _wait(driver, lambda d: _current(d) == "00003", "a reload resumes at 00003")
        assert driver.find_element(By.ID, "progress").text.startswith("3 of 6 decided")
        _press(driver, "2")  # the filter of undecided items
        position = (By.ID, "position")
        _wait(driver, lambda d: d.find_element(*position).text == "item 1 of 3 shown", "the undecided filter")
        _press(driver, "1")
        _press(driver, "a", then="00004")
        _press(driver, "r", then="00005")
        _press(driver, "a")
        alice_votes = ["accept", "reject", "accept", "accept", "reject", "accept"]
        _saved(mine, alice_votes)
        _press(driver, "4", then="00001")  # the filter of rejected items
        _wait(driver, lambda d: d.find_element(*position).text == "item 1 of 2 shown", "the rejected filter")
        _press(driver, "j", then="00004")
        _press(driver, "3")  # set aside by the check: none (the canvas pairs have no check)
        _wait(driver, lambda d: d.find_element(By.ID, "empty").is_displayed(), "no item set aside")
        _press(driver, "1")
        errors = _errors(driver)
        assert not errors, [e["message"] for e in errors]
        keep = os.environ.get("SPOTDIFF_SCREENSHOT_DIR")
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            _press(driver, "jj", then="00002")
            _wait(driver, lambda d: d.execute_script(loaded) == [True, True, True], "the images, for the picture")
            driver.save_screenshot(str(Path(keep) / "review.png"))
    finally:
        alice.stop()
    bob = ReviewServer(ReviewSession(eqben_out, "bob")).start()
    try:
        _open(driver, bob.url)
        assert _current(driver) == "00000"
        for key, then in zip("aaarr", ["00001", "00002", "00003", "00004", "00005"], strict=True):
            _press(driver, key, then=then)
        _press(driver, "a")
        _saved(eqben_out / "review.bob.csv", ["accept", "accept", "accept", "reject", "reject", "accept"])
    finally:
        bob.stop()
    report = agreement(eqben_out)
    # by hand: p_o = 4/6; each accepts 4 of 6, so p_e = (4/6)^2 + (2/6)^2 = 5/9; kappa = (2/3 - 5/9) / (4/9)
    assert report["kappa"] == pytest.approx(0.25) and report["method"] == "Cohen's kappa"
    assert [d["id"] for d in report["disagreements"]] == ["00001", "00003"]


@pytest.mark.slow
def test_one_reviewer_in_two_tabs_loses_nothing(chromium, eqben_out, review_elsewhere):
    """bob's keys in two tabs of one server: each tab's decisions are in his file, and each tab counts the
    other's; bob's second terminal is refused, naming the first (it would rewrite the file from what it held)."""
    from selenium.webdriver.common.by import By

    driver = chromium
    server = ReviewServer(ReviewSession(eqben_out, "bob")).start()
    mine = eqben_out / "review.bob.csv"
    try:
        _open(driver, server.url)
        first = driver.current_window_handle
        _press(driver, "a", then="00001")
        _saved(mine, ["accept", None, None, None, None, None])
        started, status, err = review_elsewhere(eqben_out, "bob")
        assert (started, status) == ("", 2) and f"in use by another spotdiff review (pid {os.getpid()} on " in err
        driver.switch_to.new_window("tab")
        second = driver.current_window_handle
        _open(driver, server.url)
        assert _current(driver) == "00001"  # the first undecided: the other tab's decision is known
        _press(driver, "r", then="00002")
        driver.switch_to.window(first)
        _press(driver, "j", then="00002")
        _press(driver, "a", then="00003")
        progress = (By.ID, "progress")
        _wait(driver, lambda d: d.find_element(*progress).text.startswith("3 of 6 decided"), "both tabs counted")
        driver.switch_to.window(second)
        _press(driver, "j", then="00003")
        _press(driver, "r", then="00004")
        _saved(mine, ["accept", "reject", "accept", "reject", None, None])
        assert driver.find_element(*progress).text.startswith("4 of 6 decided")
        assert not _errors(driver)
    finally:
        server.stop()


@pytest.mark.slow
def test_spec_sets_show_the_objects_that_change(chromium, spec_out):
    from selenium.webdriver.common.by import By

    server = ReviewServer(ReviewSession(spec_out, "alice")).start()
    try:
        _open(chromium, server.url)
        assert _current(chromium) == "relative_spatial/00000"  # the sheet lists the sets in SPEC's order
        _press(chromium, "j", then="count/00000")
        # 1 + ... + 9 apples, boxed once each image has loaded; changed: all but the first image's apple
        boxes = ".box", ".box.changed"
        counts = lambda d: tuple(len(d.find_elements(By.CSS_SELECTOR, css)) for css in boxes)  # noqa: E731
        _wait(chromium, lambda d: counts(d) == (45, 36), "the boxes of the nine images")
        assert len(chromium.find_elements(By.CSS_SELECTOR, "#images figcaption mark")) > 0  # "are two apples"
        assert not _errors(chromium)
    finally:
        server.stop()
