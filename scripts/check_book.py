#!/usr/bin/env python3
"""Open every page of the built book in headless Chromium and check what a reader sees.

Serves the built site on 127.0.0.1 (a local HTTP server thread), drives Debian's
Chromium over the DevTools protocol (a single websocket; the only dependency is the
pure-Python ``websocket-client``), loads every ``.html`` page of the site and fails if

* an ``<img>`` does not load (``naturalWidth == 0``);
* a page has math (Sphinx's ``.math`` elements) that MathJax did not render into
  ``mjx-container`` elements, or that rendered as a TeX error (``mjx-merror``);
* an internal link points to a missing file or to an anchor that the target page
  does not define;
* the page requested anything from a host other than 127.0.0.1 (fonts, scripts,
  analytics, ...), or a local request failed (HTTP >= 400, or a load error);
* a script threw an uncaught exception.
* a figure a class projects (plots/_style.py's PROJECTED) would show labels under the
  style's PROJECTION_PX pixels at PROJECTION_VIEWPORT pixels wide: the smallest font the
  style allows, in the image file's pixels, times the width the browser draws the image at
  over the file's width (checked when the window is that wide, as by default).

Chromium is started with its host resolver closed to everything but 127.0.0.1, so an
outside request fails at once instead of leaving the machine; it is still recorded
(and reported) when the page tries it.

Usage::

    python scripts/check_book.py [SITE_DIR] [--screenshot DIR] [--chromium PATH]

SITE_DIR defaults to ``book/_build/html``. Prints one line per page and a summary;
exits 1 with the list of problems if any page fails, 2 if the check itself could not
run (no site, no Chromium, ...).

Needs: Debian's ``chromium`` package (``apt-get install -y chromium``) and
``pip install websocket-client``.
"""

from __future__ import annotations

import argparse
import base64
import functools
import http.server
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlsplit

try:
    import websocket  # websocket-client
except ImportError:  # pragma: no cover - reported to the user
    websocket = None

LOCAL_HOST = "127.0.0.1"
IGNORED_SCHEMES = {"data", "blob", "about", "javascript", "mailto", "chrome", "devtools", "chrome-extension"}
SKIP_DIRS = {"_static", "_sources", "_images", ".doctrees", "_downloads"}

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--disable-extensions",
    "--disable-default-apps",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--mute-audio",
    "--disable-features=Translate,MediaRouter,OptimizationHints,AutofillServerCommunication",
    # Every host but 127.0.0.1 resolves to nothing: nothing can leave the machine.
    f"--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE {LOCAL_HOST}",
]

# Runs in the page once it has loaded: waits for MathJax, images and fonts, then
# reports what is on the page.
PAGE_PROBE_JS = r"""
(async () => {
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  const within = (p, ms) => Promise.race([p, sleep(ms).then(() => 'timeout')]);
  let mathjax = 'absent';
  if (window.MathJax) {
    // Before the deferred script runs, window.MathJax is only the config object.
    for (let i = 0; i < 150 && !(MathJax.startup && MathJax.startup.promise); i++) await sleep(100);
    if (MathJax.startup && MathJax.startup.promise) {
      mathjax = await within(MathJax.startup.promise.then(() => 'ok', e => 'error: ' + e), 30000);
    } else {
      mathjax = 'never started (script not loaded?)';
    }
  }
  const imgs = Array.from(document.images);
  imgs.forEach(i => { i.loading = 'eager'; });
  await within(Promise.all(imgs.map(i => i.complete ? null : new Promise(r => {
    i.addEventListener('load', r); i.addEventListener('error', r);
  }))), 15000);
  if (document.fonts && document.fonts.ready) await within(document.fonts.ready, 10000);
  const maths = Array.from(document.querySelectorAll('.math'));
  const unrendered = maths.filter(e => !e.querySelector('mjx-container'))
                          .map(e => e.textContent.trim().slice(0, 80));
  const merrors = Array.from(document.querySelectorAll('mjx-merror'))
                       .map(e => (e.getAttribute('data-mjx-error') || e.textContent).slice(0, 120));
  const badImgs = imgs.filter(i => !(i.complete && i.naturalWidth > 0))
                      .map(i => i.getAttribute('src') || i.currentSrc || '(no src)');
  // A matplotlib figure glued or displayed without an image output shows its repr.
  const figText = (document.body ? document.body.innerText : '').match(/<Figure size \d+x\d+ with \d+ Axes>/g) || [];
  // Every image as laid out: the figure it belongs to, its file's width and the width it is drawn at.
  const shown = imgs.map(i => ({src: i.getAttribute('src') || '', figure: (i.closest('figure') || {}).id || '',
                                natural: i.naturalWidth, rendered: i.getBoundingClientRect().width}));
  const links = Array.from(document.querySelectorAll('a[href]'))
                     .map(a => ({raw: a.getAttribute('href'), abs: a.href}));
  const ids = Array.from(document.querySelectorAll('[id]')).map(e => e.id)
                   .concat(Array.from(document.querySelectorAll('a[name]')).map(a => a.name));
  // The page must fit the window: the innermost elements that reach past its right edge.
  const vw = document.documentElement.clientWidth;
  const wide = document.documentElement.scrollWidth > vw + 1 ? Array.from(document.querySelectorAll('body *'))
    .filter(e => e.getBoundingClientRect().right > vw + 1 && e.children.length === 0)
    .slice(0, 3).map(e => `<${e.tagName.toLowerCase()} class="${e.className}">` + (e.textContent || '').slice(0, 60)) : [];
  return {
    title: document.title, mathjax, nImgs: imgs.length, badImgs, wide,
    nMath: maths.length, nRendered: document.querySelectorAll('mjx-container').length,
    unrendered, merrors, links, ids, figText, shown,
    height: Math.max(document.documentElement.scrollHeight, document.body ? document.body.scrollHeight : 0),
  };
})()
"""


class CheckError(RuntimeError):
    """The check could not run at all (as opposed to a page failing it)."""


# --------------------------------------------------------------------------- server


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - signature from the base class
        pass


def start_server(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer((LOCAL_HOST, 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="book-server", daemon=True).start()
    return server, f"http://{LOCAL_HOST}:{server.server_address[1]}"


# ------------------------------------------------------------------------- chromium


def find_chromium(explicit: str | None) -> str:
    """The Chromium binary: the one named (``--chromium``, else ``$CHROMIUM``), which must run,
    or else the first of the usual names on the PATH. A named one that is missing is an error,
    never replaced by another Chromium: the check would report a browser the user did not ask for."""
    for named, how in ((explicit, "--chromium"), (os.environ.get("CHROMIUM"), "CHROMIUM")):
        if named:
            path = shutil.which(named) or (named if Path(named).is_file() and os.access(named, os.X_OK) else None)
            if path is None:
                raise CheckError(f"{how} {named}: no such executable; give the path of a Chromium binary (e.g. "
                                 "/usr/bin/chromium), or leave it out to use `chromium` from the PATH")
            return path
    candidates = ["chromium", "chromium-browser", "google-chrome", "/usr/bin/chromium"]
    for c in candidates:
        if not c:
            continue
        path = shutil.which(c) or (c if Path(c).is_file() else None)
        if path:
            return path
    raise CheckError("Chromium not found. Install it with `apt-get install -y chromium`, "
                     "or pass --chromium /path/to/chromium (or set CHROMIUM).")


def launch_chromium(binary: str, profile_dir: Path, width: int, height: int) -> tuple[subprocess.Popen, str]:
    log = open(profile_dir / "chromium.log", "wb")
    args = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile_dir / 'profile'}",
            "--remote-debugging-port=0", f"--window-size={width},{height}", "about:blank"]
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    port_file = profile_dir / "profile" / "DevToolsActivePort"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        if port_file.is_file():
            lines = port_file.read_text().split()
            if len(lines) >= 2:
                return proc, f"ws://{LOCAL_HOST}:{lines[0]}{lines[1]}"
        time.sleep(0.1)
    proc.kill()
    tail = (profile_dir / "chromium.log").read_bytes()[-2000:].decode(errors="replace")
    raise CheckError(f"Chromium did not start its DevTools endpoint ({binary}).\n{tail}")


class CDP:
    """A minimal DevTools-protocol client over one websocket (flattened sessions)."""

    def __init__(self, ws_url: str, on_event):
        self.ws = websocket.create_connection(ws_url, suppress_origin=True, timeout=30)
        self.on_event = on_event
        self._next_id = 0

    def _recv(self, deadline: float) -> dict:
        self.ws.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            return json.loads(self.ws.recv())
        except websocket.WebSocketTimeoutException:
            raise TimeoutError from None

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 60.0) -> dict:
        self._next_id += 1
        msg_id = self._next_id
        msg = {"id": msg_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        deadline = time.monotonic() + timeout
        while True:
            try:
                m = self._recv(deadline)
            except TimeoutError:
                raise TimeoutError(f"no answer to {method} within {timeout:.0f} s") from None
            if m.get("id") == msg_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error'].get('message')}")
                return m.get("result", {})
            if "method" in m:
                self.on_event(m)

    def pump(self, until, timeout: float) -> bool:
        """Dispatch events until ``until()`` is true or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        while not until():
            if time.monotonic() >= deadline:
                return False
            try:
                m = self._recv(deadline)
            except TimeoutError:
                return until()
            if "method" in m:
                self.on_event(m)
        return True

    def close(self):
        try:
            self.ws.close()
        except Exception:
            pass


# ---------------------------------------------------------------------------- pages


@dataclass
class PageRecord:
    rel: str
    loaded: bool = False
    external: list[str] = field(default_factory=list)
    local_failures: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    probe: dict = field(default_factory=dict)
    redirect: str | None = None
    problems: list[str] = field(default_factory=list)
    projected: list[str] = field(default_factory=list)  # "fig-key 13.1 px" per projected figure measured


class _RefreshFinder(HTMLParser):
    def __init__(self):
        super().__init__()
        self.target: str | None = None

    def handle_starttag(self, tag, attrs):
        a = {k.lower(): (v or "") for k, v in attrs}
        if tag == "meta" and a.get("http-equiv", "").lower() == "refresh":
            content = a.get("content", "")
            if "url=" in content.lower():
                self.target = content[content.lower().index("url=") + 4:].strip().strip("'\"")


def redirect_target(path: Path) -> str | None:
    """The URL of a ``<meta http-equiv="refresh">`` redirect page (jupyter-book's index.html)."""
    finder = _RefreshFinder()
    finder.feed(path.read_text(encoding="utf-8", errors="replace")[:4000])
    return finder.target


class _IdCollector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if v and (k == "id" or (tag == "a" and k == "name")):
                self.ids.add(v)


@functools.lru_cache(maxsize=None)
def static_ids(path: Path) -> frozenset[str]:
    parser = _IdCollector()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return frozenset(parser.ids)


def list_pages(site: Path) -> list[str]:
    pages = []
    for p in sorted(site.rglob("*.html")):
        rel = p.relative_to(site)
        if rel.parts[0] in SKIP_DIRS:
            continue
        pages.append(rel.as_posix())
    return pages


def resolve_local(site: Path, url_path: str) -> Path:
    rel = unquote(url_path).lstrip("/")
    target = site / rel
    if url_path.endswith("/") or target.is_dir():
        target = target / "index.html"
    return target


def is_local_url(url: str, base: str) -> bool:
    parts, base_parts = urlsplit(url), urlsplit(base)
    return parts.scheme in ("http", "https") and parts.netloc == base_parts.netloc


def png_dpi(path: Path) -> float:
    """Pixels per inch a PNG file records (its pHYs chunk); 100 (matplotlib's default) without one."""
    data = path.read_bytes()[:4096]
    at = data.find(b"pHYs")
    if at < 0:
        return 100.0
    ppu_x, _, unit = struct.unpack(">IIB", data[at + 4:at + 13])
    return ppu_x * 0.0254 if unit == 1 else 100.0


def projection_style() -> tuple[dict[str, tuple[str, ...]], Callable[[float, float], float], int, int]:
    """(figures a class projects by page, the style's smallest font in points for a figure of a given
    width and dpi, the smallest label in pixels, the window width it holds at) from the book's
    figure style (activation_wave.plots._style): the check measures what the style promises."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
    from activation_wave.plots import _style

    return _style.PROJECTED, _style.projection_pt, _style.PROJECTION_PX, _style.PROJECTION_VIEWPORT


def projection_problems(site: Path, rel: str, shown: list[dict], width: int, measured: list[str]) -> list[str]:
    """The figures a class projects on page ``rel`` (the style's list), measured as drawn: a label
    of the style's smallest font is ``pt * dpi / 72`` pixels in the image file, times the width the
    browser draws the image at over the file's width. Fails below the style's pixels (checked at
    the style's window width only; ``measured`` gets one line per figure)."""
    figures, pt_for, least_px, viewport = projection_style()
    wanted = figures.get(rel.removesuffix(".html"), ())
    if not wanted or width != viewport:
        return []
    problems = []
    for fig_id in wanted:
        img = next((i for i in shown if i.get("figure") == fig_id and i.get("natural")), None)
        if img is None:
            problems.append(f"projected figure {fig_id}: not on the page")
            continue
        path = resolve_local(site, urlsplit(urljoin(f"/{rel}", img["src"])).path)
        dpi = png_dpi(path) if path.suffix == ".png" and path.is_file() else 100.0
        natural, rendered = float(img["natural"]), float(img["rendered"])
        pt = pt_for(natural / dpi, dpi)  # the style's smallest font for a figure this wide
        px = pt * dpi / 72.0 * rendered / natural
        measured.append(f"{fig_id} {px:.1f} px (image {natural:.0f} px wide, drawn at {rendered:.0f})")
        if px < least_px - 0.05:
            problems.append(f"projected figure {fig_id}: its smallest labels are drawn {px:.1f} px tall at "
                            f"{width} px wide (the style promises {least_px} px; the image of {natural:.0f} px "
                            f"is drawn at {rendered:.0f} px: raise CONTENT_PX's measurement in plots/_style.py)")
    return problems


class BookChecker:
    def __init__(self, site: Path, chromium: str, screenshot_dir: Path | None,
                 width: int, height: int, max_shot_height: int, page_timeout: float):
        self.site = site
        self.chromium = chromium
        self.shots = screenshot_dir
        self.width, self.height = width, height
        self.max_shot_height = max_shot_height
        self.page_timeout = page_timeout
        self.current: PageRecord | None = None
        self.loaded_flag = False
        self.requests: dict[str, str] = {}
        self.auto_favicon: set[str] = set()

    # -- events ---------------------------------------------------------------
    def on_event(self, m: dict) -> None:
        method, p = m.get("method"), m.get("params", {})
        rec = self.current
        if method == "Page.loadEventFired":
            self.loaded_flag = True
        if rec is None:
            return
        if method == "Network.requestWillBeSent":
            url = p.get("request", {}).get("url", "")
            self.requests[p.get("requestId", "")] = url
            scheme = urlsplit(url).scheme
            if scheme in IGNORED_SCHEMES or not scheme:
                return
            host = urlsplit(url).hostname
            if host != LOCAL_HOST:
                rec.external.append(url)
            elif urlsplit(url).path == "/favicon.ico" and p.get("type") == "Other":
                self.auto_favicon.add(p.get("requestId", ""))
        elif method == "Network.responseReceived":
            resp = p.get("response", {})
            url, status = resp.get("url", ""), int(resp.get("status", 0))
            if p.get("requestId") in self.auto_favicon:
                return  # the browser asks for /favicon.ico by itself; the page did not
            if status >= 400 and urlsplit(url).hostname == LOCAL_HOST:
                rec.local_failures.append(f"HTTP {status} {url}")
        elif method == "Network.loadingFailed":
            url = self.requests.get(p.get("requestId", ""), "")
            if (p.get("canceled") or urlsplit(url).hostname != LOCAL_HOST
                    or p.get("requestId") in self.auto_favicon):
                return  # outside requests are already reported as such
            rec.local_failures.append(f"{p.get('errorText', 'failed')} {url}")
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            text = d.get("exception", {}).get("description") or d.get("text", "exception")
            rec.exceptions.append(f"{text.splitlines()[0]} ({d.get('url', '')}:{d.get('lineNumber', '?')})")
        elif method == "Runtime.consoleAPICalled" and p.get("type") == "error":
            args = p.get("args", [])
            rec.console_errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in args)[:200])

    # -- run ------------------------------------------------------------------
    def run(self) -> list[PageRecord]:
        pages = list_pages(self.site)
        if not pages:
            raise CheckError(f"no .html pages under {self.site}")
        server, base = start_server(self.site)
        tmp = Path(tempfile.mkdtemp(prefix="check_book_"))
        proc = None
        cdp = None
        records: list[PageRecord] = []
        try:
            proc, ws_url = launch_chromium(self.chromium, tmp, self.width, self.height)
            cdp = CDP(ws_url, self.on_event)
            target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Network"):
                cdp.call(f"{domain}.enable", session=session)
            cdp.call("Network.setCacheDisabled", {"cacheDisabled": True}, session=session)
            cdp.call("Emulation.setDeviceMetricsOverride",
                     {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
                     session=session)
            for rel in pages:
                try:
                    rec = self.check_page(cdp, session, base, rel)
                except (websocket.WebSocketException, ConnectionError) as exc:
                    log = (tmp / "chromium.log").read_bytes()[-2000:].decode(errors="replace")
                    raise CheckError(f"lost the connection to Chromium while checking {rel}: {exc}\n{log}") from None
                records.append(rec)
            self.check_links(records, base)
        finally:
            self.current = None
            if cdp:
                cdp.close()
            if proc:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            server.shutdown()
            server.server_close()
            shutil.rmtree(tmp, ignore_errors=True)
        return records

    def check_page(self, cdp: CDP, session: str, base: str, rel: str) -> PageRecord:
        rec = PageRecord(rel)
        redirect = redirect_target(self.site / rel)
        if redirect is not None:
            # A redirect stub: loading it would probe the page it forwards to. Check
            # that the target exists instead (as a link from this page).
            rec.redirect = redirect
            rec.probe = {"links": [{"raw": redirect, "abs": urljoin(f"{base}/{rel}", redirect)}]}
            rec.loaded = True
            return rec
        self.current = rec
        self.loaded_flag = False
        url = f"{base}/{rel}"
        try:
            nav = cdp.call("Page.navigate", {"url": url}, session=session)
            if nav.get("errorText"):
                rec.problems.append(f"navigation failed: {nav['errorText']}")
                return rec
            if not cdp.pump(lambda: self.loaded_flag, self.page_timeout):
                rec.problems.append(f"page did not finish loading within {self.page_timeout:.0f} s")
            res = cdp.call("Runtime.evaluate",
                           {"expression": PAGE_PROBE_JS, "awaitPromise": True, "returnByValue": True},
                           session=session, timeout=self.page_timeout + 60)
            if "exceptionDetails" in res:
                rec.problems.append(f"page probe failed: {res['exceptionDetails'].get('text')}")
                return rec
            rec.probe = res["result"]["value"]
            rec.loaded = True
            cdp.pump(lambda: False, 0.3)  # collect late network events
            if self.shots:
                self.screenshot(cdp, session, rec)
        except (TimeoutError, RuntimeError) as exc:
            rec.problems.append(f"DevTools error: {exc}")
        finally:
            self.current = None

        pr = rec.probe
        for src in pr.get("badImgs", []):
            rec.problems.append(f"image did not load: {src}")
        if pr.get("nMath", 0):
            if pr.get("mathjax") != "ok":
                rec.problems.append(f"page has math but MathJax is {pr.get('mathjax')!r}")
            if pr.get("nRendered", 0) == 0:
                rec.problems.append(f"page has {pr['nMath']} math elements but no mjx-container (math not rendered)")
            for tex in pr.get("unrendered", [])[:10]:
                rec.problems.append(f"math not rendered: {tex!r}")
        for t in dict.fromkeys(pr.get("figText", [])):
            rec.problems.append(f"figure shown as text {t!r}: the notebook saved no image/png for it "
                                "(was matplotlib's inline backend off?)")
        for el in pr.get("wide", []):
            rec.problems.append(f"page wider than the window (it scrolls sideways), e.g. {el!r}")
        for err in pr.get("merrors", []):
            rec.problems.append(f"MathJax error: {err}")
        rec.problems += projection_problems(self.site, rel, pr.get("shown", []), self.width, rec.projected)
        for u in dict.fromkeys(rec.external):
            rec.problems.append(f"request to outside host: {u}")
        for f in dict.fromkeys(rec.local_failures):
            rec.problems.append(f"local request failed: {f}")
        for e in dict.fromkeys(rec.exceptions):
            rec.problems.append(f"uncaught script error: {e}")
        return rec

    def screenshot(self, cdp: CDP, session: str, rec: PageRecord) -> None:
        # The whole page at the window's width: scroll back to the origin (the probe may have
        # scrolled) and make the viewport as tall as the page, then capture what a reader's
        # window would show. (captureBeyondViewport with a clip shifted some pages sideways
        # and cut the sidebar off.)
        height = int(min(max(rec.probe.get("height", self.height), self.height), self.max_shot_height))
        cdp.call("Runtime.evaluate", {"expression": "window.scrollTo(0, 0)"}, session=session)
        cdp.call("Emulation.setDeviceMetricsOverride",
                 {"width": self.width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=session)
        try:
            cdp.pump(lambda: False, 0.2)  # let the page lay out at the new height
            shot = cdp.call("Page.captureScreenshot", {"format": "png"}, session=session, timeout=120)
        finally:
            cdp.call("Emulation.clearDeviceMetricsOverride", {}, session=session)
        name = rec.rel[:-len(".html")].replace("/", "__") + ".png"
        (self.shots / name).write_bytes(base64.b64decode(shot["data"]))

    def check_links(self, records: list[PageRecord], base: str) -> None:
        dom_ids = {r.rel: set(r.probe.get("ids", [])) for r in records if r.loaded and r.redirect is None}
        for rec in records:
            seen = set()
            for link in rec.probe.get("links", []):
                abs_url = link.get("abs") or ""
                if abs_url in seen:
                    continue
                seen.add(abs_url)
                scheme = urlsplit(abs_url).scheme
                if scheme in IGNORED_SCHEMES or not is_local_url(abs_url, base):
                    continue  # outside links are fine to *show*; only requests are checked
                page_url, frag = urldefrag(abs_url)
                target = resolve_local(self.site, urlsplit(page_url).path)
                if not target.is_file():
                    rec.problems.append(f"broken link {link.get('raw')!r}: no file {target.relative_to(self.site)}")
                    continue
                frag = unquote(frag)
                if not frag or target.suffix != ".html":
                    continue
                rel = target.relative_to(self.site).as_posix()
                ids = dom_ids.get(rel) or static_ids(target)
                if frag not in ids:
                    rec.problems.append(f"broken anchor {link.get('raw')!r}: no id {frag!r} in {rel}")


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site", nargs="?", default="book/_build/html", help="built site (default: book/_build/html)")
    ap.add_argument("--screenshot", metavar="DIR", type=Path, help="save a PNG of every page into DIR")
    ap.add_argument("--chromium", metavar="PATH", help="Chromium binary (default: $CHROMIUM or `chromium`)")
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=900)
    ap.add_argument("--max-shot-height", type=int, default=8000, help="cap on screenshot height in px")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds for one page to load")
    args = ap.parse_args(argv)

    site = Path(args.site).resolve()
    try:
        if websocket is None:
            raise CheckError("the Python package websocket-client is missing: pip install websocket-client")
        if not (site / "index.html").is_file():
            raise CheckError(f"{site} has no index.html; build the book first "
                             "(jupyter-book build book -W --path-output book) or pass the site folder")
        chromium = find_chromium(args.chromium)
        if args.screenshot:
            args.screenshot.mkdir(parents=True, exist_ok=True)
        checker = BookChecker(site, chromium, args.screenshot, args.width, args.height,
                              args.max_shot_height, args.timeout)
        t0 = time.monotonic()
        records = checker.run()
    except CheckError as exc:
        print(f"check_book: cannot run: {exc}", file=sys.stderr)
        return 2

    failed = [r for r in records if r.problems]
    for r in records:
        pr = r.probe
        stats = (f"imgs={pr.get('nImgs', 0)} math={pr.get('nRendered', 0)}/{pr.get('nMath', 0)} "
                 f"links={len(pr.get('links', []))}")
        status = "FAIL" if r.problems else "ok  "
        if r.redirect is not None:
            stats = f"redirect -> {r.redirect}"
        print(f"{status} {r.rel:<45} {stats}" + (f"  ({len(r.problems)} problems)" if r.problems else ""))
        for m in r.projected:
            print(f"       projected figure: {m}")
        for c in dict.fromkeys(r.console_errors):
            print(f"       console error (not counted): {c}")
    print()
    print(f"check_book: {len(records)} pages, {len(records) - len(failed)} ok, {len(failed)} failed "
          f"({time.monotonic() - t0:.1f} s){'; screenshots in ' + str(args.screenshot) if args.screenshot else ''}")
    if failed:
        print("\nProblems:")
        for r in failed:
            for p in r.problems:
                print(f"  {r.rel}: {p}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
