"""Read the built book as a reader does: every page of the table of contents in headless Chromium.

    python scripts/browse_book.py [--root .] [--html <root>/_build/html] [--screenshots <root>/_build/screenshots]

For each page that ``<root>/_toc.yml`` lists, the built page ``_build/html/<page>.html`` is opened in
Chromium and these problems are reported (the exit status is 1 when there is any):

* ``load``: the page does not exist or does not load;
* ``console``: an error in the browser console, an uncaught exception, or a file of the book that the
  page asks for and that is missing;
* ``network``: the page asks for something on the network other than MathJax (the check runs offline;
  a page that needs the network to show itself is broken for a reader without it, and untestable here);
* ``image``: an image that did not load (``naturalWidth`` 0);
* ``math``: MathJax did not load or typeset a formula, a formula is a TeX error or uses an undefined
  macro (MathJax shows those in red), or raw TeX (``$...$``, ``\\(...\\)``) is left in the text;
* ``colab``: a chapter made from a notebook (``<root>/<page>.ipynb``) whose Colab launch link is missing
  or does not open ``<repository.url>/blob/<branch>/<path_to_book>/<page>.ipynb`` (``_config.yml``);
* ``link``: a link inside the book to a missing file, or to an anchor the target page does not have;
* ``explorer``: an interactive explorer (``zslib.analysis.explorers``, a ``div.zs-explorer``) that does
  not respond: each of its controls is operated as a reader would (a menu choice, arrow keys on a
  slider) and what it shows (the HTML of its view, the images visible in it) must change, every image
  in it must load; where its view has dots to point at (``.zs-pt``), pointing at one must show a photo.
  A console error or a network request that the operation causes is reported as above.
* ``output``: a line of a code cell's output wider than its box (the reader would have to scroll sideways
  to read a sentence, or it is cut), a progress bar, or a local path of the build machine
  (``/work/``, ``/home/``, ``/tmp/``) anywhere on the page;
* ``table``: a table a reader cannot read whole (:data:`TABLES_JS`): one that reaches past a box that clips it,
  or past the page's column with no box around it that scrolls sideways, or a cell that clips its own text;
* ``data``: only when the build declared Flowers-102 present (``ZS_REQUIRE_DATA=1``, or ``require_data``):
  the text "not available here" or "skipped" on a page, or a section whose heading promises a figure on the
  photographs ("on the photographs", "on photographs", "on real flowers") that holds no image.

A full-page screenshot of each page is saved under ``_build/screenshots/`` for a person to look at.

The built pages load MathJax 3 from a CDN; the check answers those requests with a local copy of the
MathJax 3 package (``$ZS_MATHJAX``, default ``.vendor/mathjax`` of the repository; ``make mathjax`` fetches
it from the npm registry), so it needs no internet. Chromium is ``$ZS_CHROMIUM`` or the ``chromium``
on the PATH (Debian: ``apt-get install chromium``); it is driven through the Python package
``playwright`` (the ``test`` extra), which starts it with a fresh, temporary profile.
"""
from __future__ import annotations

import argparse
import contextlib
import html.parser
import mimetypes
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

REPO = Path(__file__).resolve().parents[1]

#: Flags Chromium needs on a machine with a closed network: without the background-networking ones it
#: keeps trying to reach Google's services and its connections are refused.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]

#: The address Sphinx loads MathJax 3 from (``mathjax_path``); the rest of the URL is a path inside the
#: npm package ``mathjax`` (``es5/tex-mml-chtml.js``, its fonts and extensions).
MATHJAX_CDN = re.compile(r"^https://cdn\.jsdelivr\.net/npm/mathjax@3[^/]*/(?P<path>[^?#]*)")

PAGE_TIMEOUT_MS = 30_000
VIEWPORT = {"width": 1280, "height": 900}


@dataclass(frozen=True)
class Problem:
    page: str  # the table-of-contents entry, e.g. "book/metrics"
    kind: str  # load, console, network, image, math, colab, link, explorer
    detail: str

    def __str__(self):
        return f"{self.page}: [{self.kind}] {self.detail}"


# ----------------------------------------------------------------------------------------------------
# What the check needs


def chromium_path() -> str | None:
    """``$ZS_CHROMIUM`` if set, else the first Chromium (or Chrome) on the PATH."""
    env = os.environ.get("ZS_CHROMIUM", "").strip()
    if env:
        return env if Path(env).is_file() else None
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def mathjax_dir() -> Path:
    env = os.environ.get("ZS_MATHJAX", "").strip()
    return Path(env).expanduser() if env else REPO / ".vendor" / "mathjax"


def missing_requirements() -> list[str]:
    """What is missing to run the check, each with how to install it (empty: everything is there)."""
    missing = []
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("the Python package playwright (pip install -c constraints.txt -e '.[test]')")
    if chromium_path() is None:
        missing.append("Chromium (apt-get install chromium, or set ZS_CHROMIUM to a Chromium executable)")
    if not (mathjax_dir() / "es5" / "tex-mml-chtml.js").is_file():
        missing.append(f"MathJax 3 in {mathjax_dir()} (make mathjax, which needs npm; or set ZS_MATHJAX)")
    return missing


# ----------------------------------------------------------------------------------------------------
# The book's own description of itself


def toc_pages(root: Path) -> list[str]:
    """The entries of ``_toc.yml`` in reading order (root first), without suffix."""
    import yaml

    toc = yaml.safe_load((root / "_toc.yml").read_text())
    pages = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                pages.append(node["file"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(toc.get("parts", toc.get("chapters", [])))
    return [str(Path(p).with_suffix("")) if p.endswith((".md", ".ipynb")) else p for p in pages]


def colab_link(root: Path, page: str) -> str | None:
    """The Colab address of a page's notebook as ``_config.yml`` describes the repository, or ``None``
    when the book has no GitHub repository or no Colab launch button."""
    import yaml

    config = yaml.safe_load((root / "_config.yml").read_text()) or {}
    repo = config.get("repository") or {}
    colab = (config.get("launch_buttons") or {}).get("colab_url")
    url = str(repo.get("url", "")).rstrip("/")
    if not colab or not url.startswith("https://github.com/"):
        return None
    in_repo = "/".join(p for p in (str(repo.get("path_to_book") or "").strip("/"), f"{page}.ipynb") if p)
    return f"{colab.rstrip('/')}/github/{url.removeprefix('https://github.com/')}/blob/" \
           f"{repo.get('branch', 'main')}/{in_repo}"


class _Anchors(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.names: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for key, value in attrs:
            if key == "id" or (key == "name" and tag == "a"):
                self.names.add(value or "")


def anchors(path: Path, cache: dict) -> set[str]:
    """The ids (and ``<a name>``) a static HTML file defines."""
    if path not in cache:
        parser = _Anchors()
        parser.feed(path.read_text(errors="replace"))
        cache[path] = parser.names
    return cache[path]


# ----------------------------------------------------------------------------------------------------
# In the browser

# Wait for the images (lazy ones are made eager) and return each one's address and whether it loaded.
_IMAGES_JS = """async () => {
  const imgs = Array.from(document.images);
  imgs.forEach(i => { if (i.loading === 'lazy') i.loading = 'eager'; });
  await Promise.all(imgs.map(i => i.complete ? null : new Promise(done => {
    i.addEventListener('load', done); i.addEventListener('error', done); setTimeout(done, 15000); })));
  return imgs.map(i => ({src: i.getAttribute('src') || '', url: i.currentSrc || i.src,
                         ok: i.complete && i.naturalWidth > 0}));
}"""

# Wait for MathJax to finish, then report on every formula Sphinx marked (class "math") and on the text
# outside formulas and code, where raw TeX must not remain.
_MATH_JS = """async () => {
  const formulas = Array.from(document.querySelectorAll('.math'));
  const mj = window.MathJax;
  const loaded = !!(mj && mj.startup && mj.startup.promise);
  if (loaded) { try { await mj.startup.promise; } catch (e) { } }
  const report = formulas.map(f => {
    const errors = Array.from(f.querySelectorAll('mjx-merror'))
      .map(e => e.getAttribute('data-mjx-error') || e.textContent);
    // An undefined macro is typeset in red (MathJax's noundefined extension), not as an error.
    const undefinedMacros = Array.from(f.querySelectorAll('mjx-container [style*="color"]'))
      .filter(e => /color:\\s*red/.test(e.getAttribute('style'))).map(e => e.textContent);
    return {tex: f.textContent.slice(0, 120), typeset: !!f.querySelector('mjx-container'),
            errors, undefinedMacros};
  });
  const skip = 'pre, code, script, style, textarea, .math, mjx-container, .highlight, .cell_input';
  const main = document.querySelector('main') || document.body;
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  const texts = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!n.parentElement.closest(skip)) texts.push(n.textContent);
  }
  return {loaded, formulas: report, text: texts.join(' ')};
}"""

# What an explorer shows: its view's HTML and the images in it that are displayed, and whether they loaded.
_EXPLORER_VIEW_JS = """async (id) => {
  const view = document.getElementById(id).querySelector('.zs-view');
  const pics = Array.from(view.querySelectorAll('img, image'))
    .filter(e => getComputedStyle(e).display !== 'none' && getComputedStyle(e).visibility !== 'hidden');
  const imgs = pics.filter(e => e.tagName === 'IMG');
  await Promise.all(imgs.map(i => i.complete ? null : new Promise(done => {
    i.addEventListener('load', done); i.addEventListener('error', done); setTimeout(done, 5000); })));
  return {html: view.innerHTML, shown: pics.map(e => e.getAttribute('src') || e.getAttribute('href') || ''),
          broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).length};
}"""

_EXPLORERS_JS = """() => Array.from(document.querySelectorAll('.zs-explorer')).map(e => ({
  id: e.id, title: (e.firstElementChild || e).textContent.trim().slice(0, 60),
  controls: Array.from(e.querySelectorAll('[data-zs-control]')).map(c => ({
    tag: c.tagName.toLowerCase(), label: c.getAttribute('aria-label') || '',
    options: c.tagName === 'SELECT' ? c.options.length : (+c.max - +c.min + 1)})),
  dots: e.querySelectorAll('.zs-view .zs-pt').length}))"""

# The centre of a dot of an explorer's view that is not covered by another one (in view), or null.
_FREE_DOT_JS = """(id) => {
  for (const c of document.getElementById(id).querySelectorAll('.zs-view .zs-pt circle')) {
    c.scrollIntoView({block: 'center'});
    const r = c.getBoundingClientRect();
    const x = r.left + r.width / 2, y = r.top + r.height / 2;
    if (document.elementFromPoint(x, y) === c) return {x, y};
  }
  return null;
}"""

_LINKS_JS = """() => Array.from(document.querySelectorAll('a[href]'))
  .map(a => ({href: a.getAttribute('href'), url: a.href}))"""

# Output boxes of code cells whose content is wider than the box, and the text of the page's main part.
_OUTPUT_JS = """() => {
  const boxes = Array.from(document.querySelectorAll(
    '.cell_output .output.stream, .cell_output .output.text_plain, .cell_output .output.stream pre, ' +
    '.cell_output .output.text_plain pre'));
  const wide = boxes.filter(b => b.scrollWidth > b.clientWidth + 1)
    .map(b => ({width: b.scrollWidth, box: b.clientWidth,
                line: (b.textContent.split('\\n').sort((x, y) => y.length - x.length)[0] || '').slice(0, 100)}));
  const main = document.querySelector('main') || document.body;
  // the text a reader sees, without the source of code cells (code may name a path or the word "skipped")
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  const texts = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!el.closest('.cell_input, script, style') && el.checkVisibility()) texts.push(n.textContent);
  }
  const sections = Array.from(main.querySelectorAll('section')).map(sec => {
    const h = sec.querySelector(':scope > h1, :scope > h2, :scope > h3, :scope > h4');
    return {title: h ? h.textContent.replace(/#$/, '').trim() : '', images: sec.querySelectorAll('img').length};
  });
  return {wide, text: texts.join(' '), sections};
}"""

# Tables a reader cannot read whole: a table (or a cell of it) that reaches past a box that clips it, or past the
# page's main column with no box around it that scrolls. A table inside a box with overflow-x auto or scroll is
# read by scrolling that box and is fine.
TABLES_JS = """() => {
  const main = document.querySelector('main') || document.body;
  const column = main.getBoundingClientRect();
  const page = document.documentElement.clientWidth;
  const out = [];
  const text = t => (t.textContent || '').trim().replace(/\\s+/g, ' ').slice(0, 80);
  for (const t of main.querySelectorAll('table')) {
    if (!t.checkVisibility()) continue;
    // a searchable table's header row is a copy in a box that DataTables scrolls with the table's body
    if (t.closest('.dt-scroll-head, .dt-scroll-foot, .dataTables_scrollHead, .dataTables_scrollFoot')) continue;
    const r = t.getBoundingClientRect();
    let scrolls = false, cut = null;
    for (let a = t.parentElement; a && a !== document.body; a = a.parentElement) {
      const ox = getComputedStyle(a).overflowX;
      if (ox === 'auto' || ox === 'scroll') { scrolls = true; break; }
      if (ox === 'hidden' || ox === 'clip') {
        const ar = a.getBoundingClientRect();
        if (r.right > ar.right + 1 || r.left < ar.left - 1) { cut = a; break; }
      }
    }
    const clipped = Array.from(t.querySelectorAll('td, th')).filter(c => {
      const ox = getComputedStyle(c).overflowX;
      return (ox === 'hidden' || ox === 'clip') && c.scrollWidth > c.clientWidth + 1;
    });
    if (clipped.length) {
      out.push({why: `${clipped.length} cell(s) cut inside the table`, width: r.width, box: 0, text: text(clipped[0])});
    }
    if (scrolls) continue;
    if (cut) {
      out.push({why: 'cut off by a box that hides what overflows', width: r.width,
                box: cut.getBoundingClientRect().width, text: text(t)});
    } else if (r.right > Math.min(column.right, page) + 1) {
      out.push({why: 'wider than the page column, with no box that scrolls', width: r.width,
                box: Math.min(column.right, page) - r.left, text: text(t)});
    }
  }
  return out;
}"""


def check_tables(found: list, add) -> None:
    """Report each table of :data:`TABLES_JS` that a reader cannot read whole."""
    for t in found:
        add("table", f"a table is {t['why']} ({t['width']:.0f} px in {t['box']:.0f} px): '{t['text']}'")


#: A progress bar as tqdm draws it (``45%|####      | 9/20 [00:01<00:02, 4.1it/s]``) or its block characters.
PROGRESS = re.compile(r"\d+%\|[^|\n]{0,80}\||[\u2588\u2589\u258a\u258b\u258c\u258d\u258e\u258f]{3,}|\d+(?:\.\d+)?it/s\]")
#: A local path of the machine that built the book.
LOCAL_PATH = re.compile(r"(?<![\w.:/])/(?:work|home|tmp)/[^\s'\")]*")
#: The words of a section that was skipped for want of data.
SKIPPED = re.compile(r"not available here|skipped", re.I)
#: A section whose heading promises a figure on the photographs ("On the photographs: ...", "Fig. 4 on
#: photographs", "Grad-CAM on real flowers"); a section about real-data results in general ("Real photographs:
#: Flowers-102 ...") may hold tables only.
PHOTO_SECTION = re.compile(r"\bon (?:the )?photographs\b|\bon real flowers\b", re.I)


def data_declared() -> bool:
    """Whether this build declared Flowers-102 present (``ZS_REQUIRE_DATA=1``)."""
    return os.environ.get("ZS_REQUIRE_DATA", "").strip().lower() in ("1", "true", "yes")


def _check_output(found: dict, add, require_data: bool) -> None:
    for box in found["wide"]:
        add("output", f"an output line is wider than its box ({box['width']} px in {box['box']} px): "
                      f"'{box['line']}'")
    text = found["text"]
    for m in PROGRESS.finditer(text):
        add("output", f"a progress bar on the page: '{text[max(0, m.start() - 20):m.end() + 20].strip()}'")
        break
    for path in dict.fromkeys(LOCAL_PATH.findall(text)):
        add("output", f"a local path of the build machine on the page: '{path[:100]}'")
    if require_data:
        for m in SKIPPED.finditer(text):
            add("data", f"'{m.group(0)}' although the data was declared present: "
                        f"'{text[max(0, m.start() - 60):m.end() + 40].strip()}'")
        for sec in found["sections"]:
            if PHOTO_SECTION.search(sec["title"]) and not sec["images"]:
                add("data", f"the section '{sec['title'][:80]}' shows no image although the data was declared present")


RAW_TEX = re.compile(r"\$\$[^$]+?\$\$|\$[^$\s][^$\n]*?\$|\\\(.+?\\\)|\\\[.+?\\\]", re.S)


@contextlib.contextmanager
def open_chromium(executable: str | None = None):
    """Headless Chromium driven by Playwright (Playwright gives it a fresh temporary profile)."""
    from playwright.sync_api import sync_playwright

    executable = executable or chromium_path()
    if executable is None:
        raise RuntimeError("no Chromium found: " + "; ".join(missing_requirements()))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_FLAGS)
        try:
            yield browser
        finally:
            browser.close()


def _serve(route, mathjax: Path, outside: list[str]):
    """Answer MathJax's CDN requests from the local copy; refuse (and note) every other network request."""
    url = route.request.url
    m = MATHJAX_CDN.match(url)
    if m is None:
        outside.append(url)
        route.abort("internetdisconnected")
        return
    local = (mathjax / unquote(m.group("path"))).resolve()
    if not local.is_file() or not local.is_relative_to(mathjax.resolve()):
        outside.append(f"{url} (not in the local MathJax copy {mathjax})")
        route.fulfill(status=404, body="not in the local MathJax copy")
        return
    kind = mimetypes.guess_type(local.name)[0] or "application/octet-stream"
    route.fulfill(status=200, path=str(local), content_type=kind,
                  headers={"Access-Control-Allow-Origin": "*"})  # fonts from a file:// page need CORS


def check_page(context, root: Path, html_dir: Path, page: str, screenshot: Path | None,
               anchor_cache: dict, require_data: bool = False) -> list[Problem]:
    """Every check of the module docstring on one page."""
    problems: list[Problem] = []

    def add(kind, detail):
        problems.append(Problem(page, kind, detail))

    path = html_dir / f"{page}.html"
    if not path.is_file():
        add("load", f"no page {path.relative_to(html_dir)} in {html_dir}")
        return problems
    messages = []
    tab = context.new_page()
    tab.on("console", lambda m: messages.append(m) if m.type == "error" else None)
    tab.on("pageerror", lambda e: add("console", f"uncaught exception: {e}"))
    tab.on("requestfailed", lambda r: add("console", f"could not load {_show(r.url, html_dir)} "
                                                     f"({r.failure})") if r.url.startswith("file:") else None)
    try:
        tab.goto(path.as_uri(), wait_until="load", timeout=PAGE_TIMEOUT_MS)
    except Exception as e:  # a page that never finishes loading
        add("load", f"did not load: {str(e).splitlines()[0]}")
        tab.close()
        return problems

    for image in tab.evaluate(_IMAGES_JS):
        if not image["ok"]:
            add("image", f"image did not load: {image['src'] or _show(image['url'], html_dir)}")

    math = tab.evaluate(_MATH_JS)
    if math["formulas"] and not math["loaded"]:
        add("math", f"MathJax did not load; {len(math['formulas'])} formula(s) not typeset")
    for f in math["formulas"]:
        if math["loaded"] and not f["typeset"]:
            add("math", f"formula not typeset: '{f['tex']}'")
        for err in f["errors"]:
            add("math", f"TeX error '{err}' in '{f['tex']}'")
        for macro in f["undefinedMacros"]:
            add("math", f"undefined macro '{macro}' in '{f['tex']}'")
    for raw in RAW_TEX.findall(math["text"]):
        add("math", f"raw TeX left in the text: '{raw[:80]}'")

    expected = colab_link(root, page)
    links = tab.evaluate(_LINKS_JS)
    if expected is not None and (root / f"{page}.ipynb").is_file():
        colab = sorted({a["href"] for a in links if a["href"].startswith(expected.split("/github/")[0])})
        if not colab:
            add("colab", f"no Colab launch link (expected {expected})")
        for href in colab:
            if href != expected:
                add("colab", f"Colab link {href} should be {expected}")

    for link in links:
        _check_link(link, html_dir, anchor_cache, add)
    _check_output(tab.evaluate(_OUTPUT_JS), add, require_data)
    check_tables(tab.evaluate(TABLES_JS), add)

    for explorer in tab.evaluate(_EXPLORERS_JS):
        _operate_explorer(tab, explorer, add)

    for m in messages:
        where = (m.location or {}).get("url", "")
        if where.startswith(("file:", "http:", "https:")) and "Failed to load resource" in m.text:
            continue  # reported with its address: a file by the requestfailed handler, the network by _serve
        add("console", f"{m.text} ({_show(where, html_dir)})" if where else m.text)
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(screenshot), full_page=True)
    tab.close()
    return problems


def _operate_explorer(tab, explorer: dict, add) -> None:
    """Operate every control of one explorer (and point at one of its dots) and check that the view changes."""
    uid, title = explorer["id"], explorer["title"]
    view = lambda: tab.evaluate(_EXPLORER_VIEW_JS, uid)  # noqa: E731
    before = view()
    if before["broken"]:
        add("explorer", f"explorer '{title}': {before['broken']} image(s) in its view did not load")
    if not explorer["controls"]:
        add("explorer", f"explorer '{title}' has no control")
    for k, control in enumerate(explorer["controls"]):
        if control["options"] < 2:
            continue  # nothing to move
        handle = tab.locator(f"#{uid} [data-zs-control='{k}']")
        try:
            if control["tag"] == "select":
                current = handle.evaluate("c => c.selectedIndex")
                handle.select_option(index=(current + 1) % control["options"])
            else:
                handle.focus()
                current = int(handle.input_value())
                tab.keyboard.press("ArrowLeft" if current == control["options"] - 1 else "ArrowRight")
        except Exception as e:
            add("explorer", f"explorer '{title}': could not operate '{control['label']}': {str(e).splitlines()[0]}")
            continue
        after = view()
        if after["html"] == before["html"] and after["shown"] == before["shown"]:
            add("explorer", f"explorer '{title}': moving '{control['label']}' did not change what it shows")
        if after["broken"]:
            add("explorer", f"explorer '{title}': after moving '{control['label']}', {after['broken']} image(s) "
                            "did not load")
        before = after
    if explorer["dots"]:
        tab.mouse.move(0, 0)
        resting = view()["shown"]
        spot = tab.evaluate(_FREE_DOT_JS, uid)
        if spot is None:
            add("explorer", f"explorer '{title}': no dot can be pointed at (every one is covered)")
            return
        tab.mouse.move(spot["x"], spot["y"])
        pointed = view()["shown"]
        if len(pointed) <= len(resting):
            add("explorer", f"explorer '{title}': pointing at a dot showed no photo")
        tab.mouse.move(0, 0)


def _show(url: str, html_dir: Path) -> str:
    """A file:// address as a path relative to the HTML folder; anything else as it is."""
    if url.startswith("file:"):
        p = Path(unquote(urlsplit(url).path))
        with contextlib.suppress(ValueError):
            return p.relative_to(html_dir.resolve()).as_posix()
    return url


def _check_link(link: dict, html_dir: Path, cache: dict, add) -> None:
    url = link["url"]
    if not url.startswith("file:"):
        return  # http(s), mailto, javascript: outside the book; the Colab link is checked on its own
    parts = urlsplit(url)
    target = Path(unquote(parts.path))
    try:
        target.resolve().relative_to(html_dir.resolve())
    except ValueError:
        add("link", f"link {link['href']!r} leads outside the built book ({target})")
        return
    if target.is_dir():
        target = target / "index.html"
    if not target.is_file():
        add("link", f"link {link['href']!r}: no file {_show(target.as_uri(), html_dir)}")
        return
    fragment = unquote(parts.fragment)
    if fragment and target.suffix == ".html" and fragment not in anchors(target, cache):
        add("link", f"link {link['href']!r}: {_show(target.as_uri(), html_dir)} has no anchor #{fragment}")


def check_book(root: Path, html_dir: Path | None = None, screenshots: Path | None = None, *,
               browser=None, pages: list[str] | None = None, mathjax: Path | None = None,
               timings: dict | None = None, require_data: bool | None = None) -> list[Problem]:
    """Load every page of the book at ``root`` (``_toc.yml``, ``_config.yml``) from ``html_dir`` (default
    ``root/_build/html``) and return the problems found; screenshots go to ``screenshots`` (default
    ``root/_build/screenshots``). ``browser``: a Playwright browser to reuse (one is started otherwise);
    each call gets a fresh browser context, so no state carries over between calls. ``timings``, if given,
    receives the seconds each page took. ``require_data`` (default: ``ZS_REQUIRE_DATA=1``): the data was
    declared present, so skipped photo sections are problems."""
    root = Path(root).resolve()
    require_data = data_declared() if require_data is None else require_data
    html_dir = Path(html_dir or root / "_build" / "html").resolve()
    screenshots = Path(screenshots or root / "_build" / "screenshots")
    mathjax = Path(mathjax or mathjax_dir())
    if browser is None:
        with open_chromium() as b:
            return check_book(root, html_dir, screenshots, browser=b, pages=pages, mathjax=mathjax,
                              timings=timings, require_data=require_data)
    outside: list[str] = []
    context = browser.new_context(viewport=VIEWPORT, service_workers="block")
    context.route(lambda url: url.startswith(("http:", "https:")), lambda route: _serve(route, mathjax, outside))
    cache: dict = {}
    problems: list[Problem] = []
    try:
        for page in pages or toc_pages(root):
            start = time.perf_counter()
            outside.clear()
            found = check_page(context, root, html_dir, page, screenshots / f"{page}.png", cache, require_data)
            found += [Problem(page, "network", f"asks the network for {u}") for u in dict.fromkeys(outside)]
            problems += found
            if timings is not None:
                timings[page] = time.perf_counter() - start
    finally:
        context.close()
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(REPO), help="the book's folder (with _toc.yml and _config.yml)")
    parser.add_argument("--html", default=None, help="the built HTML (default <root>/_build/html)")
    parser.add_argument("--screenshots", default=None, help="default <root>/_build/screenshots")
    args = parser.parse_args(argv)
    missing = missing_requirements()
    if missing:
        print("Cannot check the book in a browser; install " + "; ".join(missing), file=sys.stderr)
        return 2
    root = Path(args.root)
    timings: dict[str, float] = {}
    problems = check_book(root, args.html, args.screenshots, timings=timings)
    for page, seconds in timings.items():
        bad = sum(p.page == page for p in problems)
        print(f"  {seconds:5.1f} s  {'ok' if not bad else f'{bad} problem(s)':14s} {page}")
    shots = Path(args.screenshots or root / "_build" / "screenshots")
    print(f"screenshots: {shots}")
    for p in problems:
        print(p)
    print(f"{len(timings)} page(s), {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
