"""``spotdiff review``'s server, in process on a free loopback port: the token (then its cookie) is required,
nothing outside OUT is served, and every decision is in the reviewer's file as soon as it is answered,
there after a restart; the sheets of SPEC and EqBen outputs, derived from their published files, are read
back by ``--from-review`` under a rule that synth.json records."""

from __future__ import annotations

import csv
import http.client
import io
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from spotdiff.benchmarks import get_benchmark
from spotdiff.cli import main
from spotdiff.errors import DataError
from spotdiff.review import session as session_module
from spotdiff.review.agreement import kappa
from spotdiff.review.server import ReviewServer
from spotdiff.review.session import ReviewSession
from spotdiff.review.sheet import ReviewItem, read_review, read_sheet, write_review


def call(server: ReviewServer, method: str, path: str, body=None, headers=None, token=True):
    """One request: (status, headers, body bytes); the token in the URL unless told otherwise; ``body`` as JSON
    (bytes: sent as they are)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    if token:
        path += ("&" if "?" in path else "?") + f"token={server.token}"
    data = None if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    sent = {"Content-Type": "application/json"} if body is not None else {}
    conn.request(method, path, body=data, headers={**sent, **(headers or {})})
    response = conn.getresponse()
    got = response.status, dict(response.getheaders()), response.read()
    conn.close()
    return got


@pytest.fixture
def serve():
    started = []

    def start(out: Path, reviewer: str = "alice") -> ReviewServer:
        server = ReviewServer(ReviewSession(out, reviewer)).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def decide(server, item_id, decision, texts=None):
    status, _, body = call(server, "POST", "/api/decide", {"id": item_id, "decision": decision, "texts": texts})
    assert status == 200, body
    return json.loads(body)


def test_the_page_needs_the_token_then_its_cookie(eqben_out, serve, caplog):
    caplog.set_level(logging.DEBUG)
    server = serve(eqben_out)
    for path in ("/", "/api/items", "/static/review.js", "/files/images/eqbenkubric_loc/00000_0.png"):
        status, _, body = call(server, "GET", path, token=False)
        assert status == 403 and b"token" in body, path
        assert call(server, "GET", path + "?token=" + "x" * len(server.token), token=False)[0] == 403
    status, headers, _ = call(server, "GET", "/")
    assert status == 303 and headers["location"] == "/"  # the token leaves the address bar
    cookie = headers["set-cookie"]
    assert f"spotdiff-review-{server.port}={server.token}" in cookie
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    jar = {"Cookie": cookie.split(";")[0]}
    status, headers, body = call(server, "GET", "/", headers=jar, token=False)
    assert status == 200 and b"review.js" in body
    assert "script-src 'self'" in headers["content-security-policy"] and headers["x-content-type-options"] == "nosniff"
    status, _, body = call(server, "GET", "/api/items", headers=jar, token=False)
    assert status == 200 and len(json.loads(body)["items"]) == 6
    # another host name (DNS rebinding) and a cross-site form (not JSON) are refused
    assert call(server, "GET", "/", headers={"Host": f"evil.example:{server.port}"})[0] == 400
    status, _, _ = call(server, "POST", "/api/decide", headers={**jar, "Content-Type": "text/plain"}, token=False)
    assert status == 415
    assert server.token not in caplog.text  # no request line is logged


_SECURITY = ("content-security-policy", "x-content-type-options", "referrer-policy", "cache-control")


def test_every_refusal_is_an_answer_with_the_security_headers(eqben_out, serve, caplog, monkeypatch):
    """A token that is not ASCII (``%C3%A9``, a byte that is not UTF-8) is refused as any wrong token is, not a
    500 with a traceback in the reviewer's terminal; every refusal carries the security headers."""
    server = serve(eqben_out)
    uvicorn_log = logging.getLogger("uvicorn.error")  # what the reviewer's terminal shows (it does not propagate)
    monkeypatch.setattr(uvicorn_log, "handlers", [*uvicorn_log.handlers, caplog.handler])
    port = server.port
    refusals = [
        ("GET", "/?token=%C3%A9", None, {}, 403),
        ("GET", "/api/items?token=%FF", None, {}, 403),
        ("GET", "/", None, {"Cookie": f"spotdiff-review-{port}=\u00e9"}, 403),
        ("GET", "/", None, {}, 403),
        ("GET", f"/?token={server.token}", None, {"Host": f"evil.example:{port}"}, 400),
        ("POST", f"/api/decide?token={server.token}", b"{}", {"Content-Type": "text/plain"}, 415),
        ("GET", f"/nothing?token={server.token}", None, {}, 404),
        ("GET", f"/api/decide?token={server.token}", None, {}, 405),
        ("POST", f"/api/decide?token={server.token}", {"id": "00000", "decision": "maybe"}, {}, 400),
    ]
    for method, path, body, headers, expected in refusals:
        status, got, _ = call(server, method, path, body, headers, token=False)
        assert status == expected, (path, headers, status)
        assert all(h in {k.lower() for k in got} for h in _SECURITY), (path, got)
    server.stop()  # its log is complete (an error is logged after its answer is sent)
    assert not caplog.records, caplog.text


def test_nothing_outside_out_is_served(eqben_out, serve, tmp_path):
    secret = tmp_path / "secret.png"
    Image.new("RGB", (4, 4), "red").save(secret)
    (eqben_out / "images" / "link.png").symlink_to(secret)
    server = serve(eqben_out)
    status, headers, body = call(server, "GET", "/files/images/eqbenkubric_loc/00000_0.png")
    assert status == 200 and headers["content-type"] == "image/png"
    assert body == (eqben_out / "images/eqbenkubric_loc/00000_0.png").read_bytes()
    for path in (
        "/files/review.csv",  # inside OUT, but not an image the sheet names
        "/files/all_select.json",
        "/files/images/link.png",
        "/files/images/../../secret.png",
        "/files/%2e%2e/secret.png",
        "/files/" + str(secret),
        "/static/index.html",  # only the page's own script and style sheet
        "/static/..%2fsession.py",
        "/difference/99",
    ):
        status, _, body = call(server, "GET", path)
        assert status == 404 and body != secret.read_bytes(), path
    server.stop()
    # a sheet edited to name the link (inside OUT by name, outside by target) still serves nothing of it
    rows = list(csv.reader((eqben_out / "review.csv").open(encoding="utf-8")))
    rows[1][2] = "images/link.png"
    with (eqben_out / "review.csv").open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(rows)
    (eqben_out / "review.alice.csv").unlink()
    server = serve(eqben_out)
    assert call(server, "GET", "/files/images/link.png")[0] == 404
    assert call(server, "GET", "/difference/0")[0] == 404


def _full_disk(*args, **kwargs):
    raise OSError(28, "No space left on device")


def test_every_decision_is_saved_at_once_and_survives_a_restart(eqben_out, serve, monkeypatch):
    server = serve(eqben_out)
    mine = eqben_out / "review.alice.csv"
    assert [r.decision for r in read_sheet(mine, **_PAIRS)] == [None] * 6  # every item undecided at first
    decide(server, "00000", "accept")
    assert read_sheet(mine, **_PAIRS)[0].decision == "accept"  # on disk before the answer came back
    decide(server, "00001", "reject")
    answer = decide(server, "00002", "accept", {"caption1": "  An edited caption.  "})
    assert answer["item"]["texts"]["caption1"] == "An edited caption."
    assert answer["progress"] == {"total": 6, "decided": 3, "accepted": 2, "rejected": 1}
    decide(server, "00003", "reject")
    decide(server, "00003", None)  # undo: undecided again
    for bad in (
        {"id": "00004", "decision": "maybe"},
        {"id": "nope", "decision": "accept"},
        {"id": "00004", "decision": "accept", "texts": {"caption0": "two\nlines"}},
        {"id": "00004", "decision": "accept", "texts": {"caption0": " "}},
        {"id": "00004", "decision": "accept", "texts": {"verdict": "mine"}},
        ["not", "an", "object"],
    ):
        status, _, body = call(server, "POST", "/api/decide", bad)
        assert status == 400 and json.loads(body)["error"], bad
    with monkeypatch.context() as m:  # a decision that cannot be saved (a full disk) is refused, not taken as made
        m.setattr(session_module, "write_sheet", _full_disk)
        status, _, body = call(server, "POST", "/api/decide", {"id": "00004", "decision": "accept"})
        assert status == 400 and "cannot save the decision: No space left on device" in json.loads(body)["error"]
    assert json.loads(call(server, "GET", "/api/items")[2])["items"][4]["decision"] is None
    server.stop()
    rows = read_sheet(mine, **_PAIRS)
    assert [r.decision for r in rows] == ["accept", "reject", "accept", None, None, None]
    assert rows[2].cells["caption1"] == "An edited caption." and rows[2].cells["verdict"].startswith("kept")
    server = serve(eqben_out)  # a new server (a new token) takes the reviewer's decisions up
    items = json.loads(call(server, "GET", "/api/items")[2])["items"]
    assert [i["decision"] for i in items] == ["accept", "reject", "accept", None, None, None]
    edited = items[2]
    assert edited["texts"]["caption1"] == "An edited caption." != edited["original"]["caption1"]
    with pytest.raises(DataError, match="item '00003' is undecided") as err:  # --from-review wants a finished file
        read_review(mine, **_PAIRS)
    assert (err.value.record, err.value.field) == ("row 5", "decision")


_PAIRS = {"image_fields": ("image0", "image1"), "text_fields": ("caption0", "caption1")}


def _post_streamed(server: ReviewServer, body: bytes, *, chunked: bool) -> tuple[int, set[str]]:
    """POST ``body`` to /api/decide, sent from a thread while this one reads the answer (a server may answer
    before the body ends, and close); the answer's status and header names."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    length = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {len(body)}"
    head = (f"POST /api/decide?token={server.token} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
            f"Content-Type: application/json\r\n{length}\r\n\r\n").encode()  # fmt: skip
    parts = [body[k : k + (1 << 20)] for k in range(0, len(body), 1 << 20)]
    framed = [b"%x\r\n%s\r\n" % (len(p), p) for p in parts] + [b"0\r\n\r\n"] if chunked else parts

    def send() -> None:
        try:
            for part in [head, *framed]:
                sock.sendall(part)
        except OSError:  # the server answered and closed: the rest is not read
            pass

    sender = threading.Thread(target=send)
    sender.start()
    try:
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, {k.lower() for k, _ in response.getheaders()}
    finally:
        sock.close()
        sender.join()


def test_a_refused_decision_changes_nothing(eqben_out, serve):
    """Each write below is refused before anything changes (the body bounded, 413; the rest 400 or 403), and the
    session goes on: the next decision is saved and read back by --from-review."""
    server = serve(eqben_out)
    decide(server, "00000", "accept")
    before = (eqben_out / "review.alice.csv").read_bytes()
    valid = {"id": "00001", "decision": "accept"}
    origin = f"http://127.0.0.1:{server.port}"
    refused = [
        (b'{"id": "00001", "decision": "accept", "texts": {"caption0": "a \\ud800 cat"}}', {}, 400),  # lone surrogate
        (b'{"id": "00001", "texts": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", {}, 400),  # nested 100,000 deep
        ({**valid, "texts": {"caption0": "a cat " * 40_000}}, {}, 400),  # 240,000 characters: no sheet reads it
        (valid, {"Origin": "http://evil.example"}, 403),
        (valid, {"Origin": f"http://127.0.0.1:{server.port + 1}"}, 403),  # another site on this machine
        (valid, {"Origin": origin, "Sec-Fetch-Site": "cross-site"}, 403),
        (valid, {"Sec-Fetch-Site": "same-site"}, 403),
    ]
    for body, headers, expected in refused:
        status, _, answer = call(server, "POST", "/api/decide", body, headers)
        assert status == expected, (str(body)[:80], headers, answer[:200])
        assert (eqben_out / "review.alice.csv").read_bytes() == before
    big = json.dumps({**valid, "pad": "x" * 24_000_000}).encode()  # 24 MB
    for chunked in (False, True):  # its length declared, or not
        status, headers = _post_streamed(server, big, chunked=chunked)
        assert status == 413 and set(_SECURITY) <= headers
    items = json.loads(call(server, "GET", "/api/items")[2])["items"]
    assert [i["decision"] for i in items] == ["accept", None, None, None, None, None]
    assert items[1]["texts"] == items[1]["original"]
    headers = {"Origin": origin, "Sec-Fetch-Site": "same-origin"}  # what a browser sends from the page itself
    status, _, _ = call(server, "POST", "/api/decide", {**valid, "texts": {"caption0": "A cat."}}, headers)
    assert status == 200
    for k in range(2, 6):
        decide(server, f"{k:05d}", "reject")
    assert len(read_review(server.session.file, **_PAIRS).accepted) == 2
    assert read_sheet(server.session.file, **_PAIRS)[1].cells["caption0"] == "A cat."


def test_a_text_the_item_lacks_is_refused(spec_out, serve, tmp_path):
    """A SPEC set of K images has K texts: text K (empty in the sheet) cannot be written, or --from-review would
    refuse the whole file."""
    server = serve(spec_out)
    item = next(i for i in json.loads(call(server, "GET", "/api/items")[2])["items"] if i["id"].startswith("rel"))
    k = len(item["texts"])
    status, _, body = call(server, "POST", "/api/decide", {"id": item["id"], "decision": "accept",
                                                           "texts": {f"text{k}": "one more text"}})  # fmt: skip
    assert status == 400 and f"text{k}" in json.loads(body)["error"]
    decide(server, item["id"], "accept", {f"text{k - 1}": "an edited text"})
    decide(server, "count/00000", "reject")
    final = tmp_path / "final"
    assert main(["synth", "spec", "--from-review", str(server.session.file), "--out", str(final)]) == 0
    assert get_benchmark("spec")(final).load("relative_spatial")[0].texts[k - 1] == "an edited text"


def test_a_sheet_that_would_not_read_back_is_not_written(eqben_out, serve, monkeypatch, tmp_path):
    """Past the page's own bound, what is written is read back before it replaces the file: a cell longer than
    the CSV reader's field limit is refused, the file and the session unchanged; an engine's sheet too."""
    item = ReviewItem("0", {"image": "images/a.png"}, {"p1": "a cat " * 40_000}, "consistent", True)
    with pytest.raises(DataError, match=r"review.csv: the sheet would not read back \(field larger than field limit"):
        write_review(tmp_path, [item], image_fields=("image",), text_fields=("p1",), title="VISLA")
    assert list(tmp_path.iterdir()) == [tmp_path / "eqben"]  # no sheet, no temporary file
    monkeypatch.setattr(session_module, "MAX_TEXT", 10**6)
    server = serve(eqben_out)
    decide(server, "00000", "accept")
    before = (eqben_out / "review.alice.csv").read_bytes()
    long = {"id": "00001", "decision": "accept", "texts": {"caption0": "a cat " * 40_000}}
    status, _, body = call(server, "POST", "/api/decide", long)
    assert status == 400 and "would not read back" in json.loads(body)["error"]
    assert (eqben_out / "review.alice.csv").read_bytes() == before
    assert [p.name for p in eqben_out.glob(".review.alice.csv.*")] == []  # no temporary file left
    items = json.loads(call(server, "GET", "/api/items")[2])["items"]
    assert items[1]["decision"] is None and items[1]["texts"] == items[1]["original"]
    decide(server, "00001", "reject")
    assert [r.decision for r in read_sheet(server.session.file, **_PAIRS)][:2] == ["accept", "reject"]


def test_a_pair_shows_its_pixel_difference(eqben_out, serve):
    server = serve(eqben_out)
    status, headers, body = call(server, "GET", "/difference/0")
    assert status == 200 and headers["content-type"] == "image/png"
    shown = np.asarray(Image.open(io.BytesIO(body)).convert("RGB"), dtype=int)
    a, b = (np.asarray(Image.open(eqben_out / f"images/eqbenkubric_loc/00000_{k}.png").convert("RGB"), dtype=int)
            for k in range(2))  # fmt: skip
    differs = np.abs(a - b).max(axis=2) > 0
    assert differs.any() and (~differs).any()
    red, green, blue = shown[..., 0], shown[..., 1], shown[..., 2]
    assert (red[~differs] == green[~differs]).all() and (green == blue).all()  # grey where nothing changed
    assert (red[differs] > green[differs]).all()  # red wherever the images differ


def test_youcook2_frames_are_shown_as_png_and_read_back_by_eqben_video(tmp_path, serve):
    """EQ-YouCook2 frames are .npy arrays in BGR order (as EqBen released them): the page shows them as PNG, in
    RGB, and eqben-video --from-review (no --annotations or --videos needed) copies the accepted pairs."""
    out = tmp_path / "yc2"
    frames = out / "images" / "eqbenyoucook2" / "vid"
    frames.mkdir(parents=True)
    rng = np.random.default_rng(0)
    arrays = [rng.integers(0, 256, (6, 8, 3), dtype=np.uint8) for _ in range(3)]
    for k, array in enumerate(arrays):
        np.save(frames / f"{k:03d}.npy", array)
    pairs = [{"image0": f"eqbenyoucook2/vid/{a:03d}.npy", "image1": f"eqbenyoucook2/vid/{b:03d}.npy",
              "caption0": f"Step {a}.", "caption1": f"Step {b}."} for a, b in [(0, 1), (1, 2)]]  # fmt: skip
    (out / "all_select.json").write_text(json.dumps(pairs), encoding="utf-8")
    server = serve(out)
    status, headers, body = call(server, "GET", "/files/images/eqbenyoucook2/vid/001.npy")
    assert status == 200 and headers["content-type"] == "image/png"
    assert (np.asarray(Image.open(io.BytesIO(body))) == arrays[1][:, :, ::-1]).all()  # BGR -> RGB
    assert call(server, "GET", "/difference/1")[0] == 200
    decide(server, "00000", "reject")
    decide(server, "00001", "accept")
    final = tmp_path / "final"
    assert main(["synth", "eqben-video", "--from-review", str(server.session.file), "--out", str(final)]) == 0
    assert json.loads((final / "all_select.json").read_text()) == pairs[1:]
    assert (final / "images" / pairs[1]["image1"]).read_bytes() == (out / "images" / pairs[1]["image1"]).read_bytes()


def test_spec_sets_get_a_sheet_and_their_changed_objects_marked(spec_out, tmp_path):
    session = ReviewSession(spec_out, "alice")
    assert session.kind.name == "SPEC sets" and (spec_out / "review.csv").is_file()
    count = next(i for i in session.items() if i["id"] == "count/00000")
    assert len(count["images"]) == 9 and list(count["texts"]) == [f"text{k}" for k in range(9)]
    boxes = [image["boxes"] for image in count["images"]]
    assert [len(b) for b in boxes] == list(range(1, 10))  # k + 1 apples in image k
    # the apple of the first image is in every image, in the same place: unchanged; every other one changes
    assert [sum(box["changed"] for box in b) for b in boxes] == list(range(9))
    rel = next(i for i in session.items() if i["id"] == "relative_spatial/00000")
    roles = {(box["role"], box["changed"]) for b in (image["boxes"] for image in rel["images"]) for box in b}
    assert roles == {("target", True), ("reference", False)}  # the target moves around a fixed reference
    session.decide("count/00000", "reject")
    session.decide("relative_spatial/00000", "accept", {"text1": "a photo of an edited caption"})
    final = tmp_path / "final"
    assert main(["synth", "spec", "--from-review", str(session.file), "--out", str(final)]) == 0
    assert not (final / "count").exists()
    (case,) = get_benchmark("spec")(final).load("relative_spatial")
    assert case.texts[1] == "a photo of an edited caption" and len(case.images) == 4
    record = json.loads((final / "synth.json").read_text())
    assert record["options"]["review_rule"] == "all" and record["summary"]["cases"] == {"relative_spatial": 1}
    assert record["summary"]["review"] == [str(session.file)] and record["summary"]["rejected"] == 1


def test_a_visla_sheet_is_reviewed_and_read_back_by_visla(tmp_path, capsys):
    out = tmp_path / "visla"
    (out / "images").mkdir(parents=True)
    Image.new("RGB", (8, 8), "blue").save(out / "images" / "a.jpg")
    items = [
        ReviewItem(str(k), {"image": "images/a.jpg"}, {"p1": f"A cat {k}.", "p2": f"A feline {k}.", "n": "A dog."},
                   verdict, ok)
        for k, (verdict, ok) in enumerate([("consistent", True), ("failed: validation: no answer", False)])
    ]  # fmt: skip
    write_review(out, items, image_fields=("image",), text_fields=("p1", "p2", "n"), title="VISLA")
    session = ReviewSession(out, "alice")
    assert session.kind.name == "VISLA Generic triplets"
    shown = session.items()
    assert [i["suggested"] for i in shown] == ["accept", "reject"]  # the second was set aside by the check
    assert shown[1]["verdict"] == "failed: validation: no answer" and shown[0]["difference"] is False
    session.decide("0", "reject")
    session.decide("1", "accept", {"p2": "A feline, written by a person."})
    final = tmp_path / "final"
    assert main(["synth", "visla", "--from-review", str(session.file), "--out", str(final)]) == 0
    lines = (final / "Generic_VISLA.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[1:] == ["a.jpg\tA cat 1.\tA feline, written by a person.\tA dog."]


def _three_reviewers(out: Path) -> list[Path]:
    """alice, bob and carol on six pairs: 00000 all accept (bob edits caption1), 00001 two of three accept,
    00002 one of three, 00003-00005 all reject."""
    votes = {"alice": "AAARRR", "bob": "AARRRR", "carol": "ARRRRR"}
    files = []
    for name, pattern in votes.items():
        with ReviewSession(out, name) as session:
            for k, vote in enumerate(pattern):
                texts = {"caption1": "Bob's caption."} if name == "bob" and k == 0 else None
                session.decide(f"{k:05d}", "accept" if vote == "A" else "reject", texts)
        files.append(session.file)
    return files


@pytest.mark.parametrize(("rule", "kept"), [("all", 1), ("majority", 2)])
def test_from_review_takes_a_rule_and_records_it(eqben_out, tmp_path, rule, kept):
    files = _three_reviewers(eqben_out)
    final = tmp_path / "final"
    argv = ["synth", "eqben", "--from-review", *map(str, files), "--review-rule", rule, "--out", str(final)]
    assert main(argv) == 0
    pairs = json.loads((final / "all_select.json").read_text())
    sheet = json.loads((eqben_out / "all_select.json").read_text())
    assert [p["image0"] for p in pairs] == [p["image0"] for p in sheet[:kept]]
    assert pairs[0]["caption1"] == "Bob's caption."  # the one edit wins over the sheet's text
    record = json.loads((final / "synth.json").read_text())
    assert record["options"]["review_rule"] == rule and record["options"]["from_review"] == list(map(str, files))
    assert record["summary"]["review_rule"] == rule and record["summary"]["rejected"] == 6 - kept
    image = pairs[0]["image0"]
    assert (final / "images" / image).read_bytes() == (eqben_out / "images" / image).read_bytes()


def test_from_review_refuses_unfinished_or_conflicting_reviews(eqben_out, tmp_path, capsys):
    files = _three_reviewers(eqben_out)
    carol = ReviewSession(eqben_out, "carol")
    carol.decide("00000", "accept", {"caption1": "Carol's caption."})
    argv = ["synth", "eqsd", "--from-review", *map(str, files), "--out", str(tmp_path / "a")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "record 00000, field 'caption1': reviewers who accepted item '00000' wrote different values" in err
    assert "Bob's caption." in err and "Carol's caption." in err and "Traceback" not in err
    carol.decide("00004", None)
    assert main([*argv[:-1], str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert f"file {files[2]}, record row 6, field 'decision': item '00004' is undecided" in err


def test_kappa_by_hand_and_by_scikit_learn():
    from sklearn.metrics import cohen_kappa_score

    # ten items, two reviewers (0 accept, 1 reject): both accept 5, A only 2, B only 1, both reject 2
    table = [(0, 0)] * 5 + [(0, 1)] * 2 + [(1, 0)] + [(1, 1)] * 2
    codes = np.array(table)
    # p_o = 7/10; p_e = 7/10 * 6/10 + 3/10 * 4/10 = 0.54; kappa = (0.7 - 0.54) / (1 - 0.54) = 8/23
    assert kappa(codes) == ("Cohen's kappa", pytest.approx(8 / 23))
    assert kappa(codes)[1] == pytest.approx(cohen_kappa_score(codes[:, 0], codes[:, 1]))
    # three reviewers on four items: P_i = 1/3, 1, 1, 1/3 -> P = 2/3; p = (1/2, 1/2) -> P_e = 1/2; kappa = 1/3
    three = np.array([[0, 0, 1], [0, 0, 0], [1, 1, 1], [0, 1, 1]])
    assert kappa(three) == ("Fleiss' kappa", pytest.approx(1 / 3))
    # every decision the same: chance agreement is perfect and kappa undefined, not 0/0 or a warning
    assert kappa(np.zeros((4, 2), dtype=int)) == ("Cohen's kappa", None)
    assert kappa(np.zeros((4, 3), dtype=int)) == ("Fleiss' kappa", None)
    assert kappa(np.zeros((0, 2), dtype=int)) == ("Cohen's kappa", None)


def test_agreement_cli_reports_kappa_and_the_disagreements(eqben_out, capsys):
    assert main(["review", str(eqben_out), "--agreement"]) == 2  # no sheet, no reviewer yet
    assert "no review sheet" in capsys.readouterr().err
    _three_reviewers(eqben_out)
    assert main(["review", str(eqben_out), "--agreement", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["reviewers"] == ["alice", "bob", "carol"] and report["method"] == "Fleiss' kappa"
    # by hand (Fleiss): P_i = 1, 1/3, 1/3, 1, 1, 1 -> P = 7/9; p_accept = 6/18 -> P_e = 1/9 + 4/9 = 5/9;
    # kappa = (7/9 - 5/9) / (1 - 5/9) = 1/2
    assert report["kappa"] == pytest.approx(0.5)
    assert [d["id"] for d in report["disagreements"]] == ["00001", "00002"]
    assert report["disagreements"][0]["decisions"] == {"alice": "accept", "bob": "accept", "carol": "reject"}
    (eqben_out / "review.carol.csv").unlink()
    with ReviewSession(eqben_out, "bob") as bob:
        bob.decide("00005", None)
    assert main(["review", str(eqben_out), "--agreement"]) == 0
    out = capsys.readouterr().out
    # alice AAARR, bob AARRR on the five decided by both: p_o = 4/5, p_e = 3/5 * 2/5 + 2/5 * 3/5 = 12/25
    assert "items decided by every reviewer: 5 of 6 (1 left out" in out and "Cohen's kappa: 0.615" in out
    assert "00002: alice accept, bob reject" in out and "00001" not in out


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_the_command_prints_a_url_with_a_token_and_stops_on_ctrl_c_or_sigterm(eqben_out, signum):
    """Stopped by Ctrl-C or by SIGTERM (``kill``, a closed session manager), it ends the same way: exit 0 and
    the summary line with the command that reads the file back."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "spotdiff", "review", str(eqben_out), "--reviewer", "dana"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        lines = [proc.stdout.readline() for _ in range(4)]
        url = lines[3].strip()
        assert url.startswith("http://127.0.0.1:") and "?token=" in url, lines
        assert str(eqben_out / "review.dana.csv") in lines[1]
        host, rest = url[len("http://") :].split("/", 1)
        conn = http.client.HTTPConnection(host, timeout=30)
        conn.request("GET", "/" + rest)
        assert conn.getresponse().status == 303
        conn.close()
    finally:
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "0 of 6 decided" in out and "spotdiff synth eqben --from-review" in out
    token = url.split("token=")[1]
    assert token not in out + err  # printed once, at the start, and logged nowhere


def test_a_reviewer_is_served_by_one_review_at_a_time(eqben_out, review_elsewhere):
    """Two ``spotdiff review OUT --reviewer bob`` (two terminals, or two people under one name) would each rewrite
    the file from what they hold: the second is refused in one line naming the first; another reviewer is not,
    and once the first ends, bob starts again where he was."""
    with ReviewSession(eqben_out, "bob") as bob:
        bob.decide("00000", "accept")
        started, status, err = review_elsewhere(eqben_out, "bob")
        assert (started, status) == ("", 2), (started, err)
        holder = f"pid {os.getpid()} on {socket.gethostname()} since "
        assert f"review.bob.csv is in use by another spotdiff review ({holder}" in err and "--reviewer" in err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        with ReviewSession(eqben_out, "carol"):
            pass
        assert [r.decision for r in read_sheet(bob.file, **_PAIRS)] == ["accept", None, None, None, None, None]
    with ReviewSession(eqben_out, "bob") as again:  # released: bob starts again where he was
        assert again.decide("00001", "reject")["decision"] == "reject" and again.decisions["00000"] == "accept"


def test_a_bad_reviewer_name_or_folder_is_one_clear_line(eqben_out, tmp_path, capsys):
    assert main(["review", str(eqben_out), "--reviewer", "../../x"]) == 2
    assert "reviewer name '../../x'" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["review", str(tmp_path / "empty"), "--reviewer", "a"]) == 2
    assert "no review sheet (review.csv) and no SPEC or EqBen output" in capsys.readouterr().err
    with ReviewSession(eqben_out, "a"):
        pass
    (eqben_out / "review.a.csv").write_text("id,decision\n1,accept\n", encoding="utf-8")
    assert main(["review", str(eqben_out), "--reviewer", "a"]) == 2
    assert "review.a.csv, record row 1: unexpected header" in capsys.readouterr().err
