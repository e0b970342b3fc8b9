"""The report opened in headless Chromium (Debian's ``chromium``), driven over the DevTools protocol on a
pipe: the page loads with no console error, no uncaught exception, no failed or remote request, and
shows its plots. Skipped where chromium is not installed."""

from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "traces"))
from trace_tarballs import run_dir  # noqa: E402,F401  (a fixture)

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser") if shutil.which(n)), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install -y chromium)")

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--remote-debugging-pipe")
DOM_FACTS = """JSON.stringify({
  svgs: document.querySelectorAll('figure.plot svg').length,
  svgSizes: Array.from(document.querySelectorAll('figure.plot svg')).map(s => s.getBoundingClientRect().width),
  searchPlots: Array.from(document.querySelectorAll('#plot-space svg, #plot-roofline svg')).map(s => {
    const r = s.getBoundingClientRect();
    return {id: s.parentElement.id, width: r.width, height: r.height, marks: s.querySelectorAll('path, use').length};
  }),
  screenedRows: document.querySelectorAll('#screened tr').length,
  imgs: Array.from(document.images).map(i => i.complete && i.naturalWidth > 0),
  scripts: document.scripts.length,
  candidates: document.querySelectorAll('section.candidate').length,
  treeLinks: document.querySelectorAll('.tree a').length,
  diffs: document.querySelectorAll('pre.diff').length,
  title: document.title,
  h2: Array.from(document.querySelectorAll('h2')).map(h => h.textContent),
})"""


class Chromium:
    """A headless Chromium with the DevTools protocol on fds 3 (commands in) and 4 (replies out)."""

    def __init__(self, profile: Path):
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # Keep the child's ends above 4 so that dup2 onto 3 and 4 never clobbers them.
        ends = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser_r, from_browser_w)]
        os.close(to_browser_r)
        os.close(from_browser_w)

        def wire():
            os.dup2(ends[0], 3)
            os.dup2(ends[1], 4)

        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                     preexec_fn=wire, pass_fds=(3, 4), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        for fd in ends:
            os.close(fd)
        self._buf = b""
        self._next = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30) -> dict:
        self._next += 1
        msg = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        reply = self.wait(lambda m: m.get("id") == self._next, timeout)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait(self, matches, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buf:
                raw, self._buf = self._buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "method" in msg:
                    self.events.append(msg)
                if matches(msg):
                    return msg
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from chromium")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe")
                self._buf += chunk

    def drain(self, seconds: float) -> None:
        try:
            self.wait(lambda m: False, seconds)
        except TimeoutError:
            pass

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)


def open_page(path: Path, profile: Path) -> tuple[dict, list[str], list[str]]:
    """(DOM facts, problems: console errors, exceptions, failed loads, blocked content; remote URLs requested)."""
    browser = Chromium(profile)
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.send(f"{domain}.enable", session=session)
        browser.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
        browser.wait(lambda m: m.get("method") == "Page.loadEventFired" and m.get("sessionId") == session, 60)
        browser.drain(1.0)
        facts = browser.send("Runtime.evaluate", {"expression": DOM_FACTS, "returnByValue": True}, session=session)
        events = [e for e in browser.events if e.get("sessionId") == session]
    finally:
        browser.close()
    problems, remote = [], []
    for e in events:
        m, p = e["method"], e.get("params", {})
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
            problems.append(f"console.{p['type']}: {[a.get('value') for a in p.get('args', [])]}")
        elif m == "Runtime.exceptionThrown":
            problems.append(f"exception: {p['exceptionDetails'].get('text')}")
        elif m == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
            problems.append(f"log {p['entry']['level']}: {p['entry']['text']}")
        elif m == "Network.loadingFailed":
            problems.append(f"failed load: {p.get('errorText')}")
        elif m == "Network.requestWillBeSent":
            url = p["request"]["url"]
            if not url.startswith(("file:", "data:", "about:")):
                remote.append(url)
    return json.loads(facts["result"]["value"]), problems, remote


@pytest.mark.timeout(180)
def test_report_opens_in_chromium_with_its_plots_and_no_console_errors(run_dir, tmp_path):
    from agent.report.html import write_report
    from agent.trace.reader import read

    stored = read(run_dir)
    page = write_report(stored, tmp_path / "report.html")
    facts, problems, remote = open_page(page, tmp_path / "profile")
    assert problems == [] and remote == []
    assert facts["svgs"] >= 2 and all(w > 200 for w in facts["svgSizes"]), facts
    assert all(facts["imgs"]) and facts["scripts"] == 0
    assert facts["candidates"] == len(stored.entries) and facts["treeLinks"] == len(stored.entries)
    assert facts["diffs"] == len(stored.entries)
    assert facts["title"].startswith(f"kernelwright run {stored.id}")
    assert facts["h2"] == ["Result", "Validity envelope", "Cost", "Progress", "Search space and roofline", "Lineage",
                           "Candidates"]


@pytest.mark.timeout(180)
def test_the_browser_check_sees_console_errors_and_remote_requests(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><html><head><title>bad</title></head><body>"
                    "<img src='http://127.0.0.1:9/missing.png'><script>console.error('on purpose');</script>"
                    "<script>undefinedFunction();</script></body></html>")
    facts, problems, remote = open_page(page, tmp_path / "profile")
    assert any("on purpose" in p for p in problems)
    assert any(p.startswith("exception:") for p in problems)
    assert remote == ["http://127.0.0.1:9/missing.png"]
    assert facts["scripts"] == 2


@pytest.mark.timeout(300)
def test_a_searched_run_shows_its_search_space_and_roofline_plots(tmp_path, monkeypatch):
    import agent
    from agent.report.html import write_report
    from agent.trace.reader import read

    monkeypatch.setenv("KERNELWRIGHT_CACHE_DIR", str(tmp_path / "cache"))
    run = agent.optimize("vector_add", sandbox="fake", traces=tmp_path / "traces", run_id="search", progress=False)
    page = write_report(read(run.path), tmp_path / "report.html")
    facts, problems, remote = open_page(page, tmp_path / "profile")
    assert problems == [] and remote == []
    plots = {p["id"]: p for p in facts["searchPlots"]}
    assert set(plots) == {"plot-space", "plot-roofline"}, facts["searchPlots"]
    for p in plots.values():
        assert p["width"] > 300 and p["height"] > 150 and p["marks"] > 10, p
    assert facts["screenedRows"] == len(run.screened()) + 1
