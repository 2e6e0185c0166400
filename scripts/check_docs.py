"""Open every page of the built documentation in headless Chromium, offline.

Usage::

    python scripts/check_docs.py [docs/_build/html] [--chromium /usr/bin/chromium]

Two checks, each problem printed on its own line:

* every HTML and CSS file is read for scripts, styles, fonts, images or
  frames that would be loaded from another host;
* the site is served from 127.0.0.1 and each page opened in the
  distribution's Chromium (driven by Playwright, with ``executable_path``: no
  browser is downloaded) with every request to another host aborted. A page
  fails on a console error, an uncaught exception, a failed or refused
  request, an image wider than the content column (or than its container),
  a code block, signature or equation wider than the column, or an
  equation that MathJax left as LaTeX.

It installs nothing: Chromium comes from the package manager (``apt-get
install chromium`` on Debian), Playwright from the ``docs`` extra. Prints the
number of pages checked and of problems found; exits with 1 if any.
"""

import argparse
import functools
import http.server
import re
import shutil
import sys
import threading
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

# A desktop window on which pydata-sphinx-theme shows both sidebars and its
# content column at its full width (720 px).
VIEWPORT = {"width": 1440, "height": 900}
# Attributes that make the browser fetch something, by tag.
RESOURCE_ATTRIBUTES = {
    "script": ["src"],
    "img": ["src", "srcset"],
    "source": ["src", "srcset"],
    "iframe": ["src"],
    "embed": ["src"],
    "object": ["data"],
    "video": ["src", "poster"],
    "audio": ["src"],
}
# <link rel=...> values whose href is fetched.
FETCHED_LINKS = {"stylesheet", "preload", "modulepreload", "icon", "prefetch", "manifest"}
CSS_URL = re.compile(r"""(?:url\(\s*['"]?|@import\s+['"])((?:https?:)?//[^'")\s]+)""", re.I)

# Run in each page once it has loaded (and MathJax has typeset it).
LAYOUT_CHECKS = """() => {
  const problems = [];
  const article = document.querySelector("article.bd-article") || document.body;
  const style = getComputedStyle(article);
  const column = article.clientWidth - parseFloat(style.paddingLeft)
    - parseFloat(style.paddingRight);
  for (const img of article.querySelectorAll("img")) {
    if (!img.complete || img.naturalWidth === 0) {
      problems.push(`image not loaded: ${img.getAttribute("src")}`);
      continue;
    }
    if (img.offsetParent === null) continue;  // hidden (e.g. a closed dropdown)
    const rendered = img.getBoundingClientRect().width;
    const container = img.parentElement.clientWidth;
    if (img.naturalWidth > column + 1) {
      problems.push(`image ${img.getAttribute("src")} is ${img.naturalWidth} px wide, ` +
        `the column ${Math.round(column)} px (shown at ` +
        `${Math.round(100 * rendered / img.naturalWidth)} %)`);
    } else if (rendered > container + 1) {
      problems.push(`image ${img.getAttribute("src")} (${Math.round(rendered)} px) ` +
        `overflows its container (${container} px)`);
    }
  }
  const scrollers = article.querySelectorAll("pre, dt.sig, mjx-container");
  for (const element of scrollers) {
    if (element.offsetParent === null) continue;
    const width = Math.max(element.scrollWidth, element.getBoundingClientRect().width);
    if (width > column + 1) {
      const text = element.textContent.trim().split("\\n")[0].slice(0, 60);
      problems.push(`${element.tagName.toLowerCase()} wider than the column ` +
        `(${Math.round(width)} > ${Math.round(column)} px): ${text}`);
    }
  }
  for (const math of article.querySelectorAll(".math")) {
    if (!math.querySelector("mjx-container") && !math.closest("mjx-container")) {
      problems.push(`equation not rendered: ${math.textContent.trim().slice(0, 60)}`);
    }
  }
  return problems;
}"""
WAIT_FOR_MATHJAX = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
}"""


class _Resources(HTMLParser):
    """Collect the URLs an HTML page makes the browser fetch, and its inline CSS."""

    def __init__(self):
        super().__init__()
        self.urls, self.css, self._in_style = [], [], False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        names = RESOURCE_ATTRIBUTES.get(tag, [])
        if tag == "link" and FETCHED_LINKS & set((attrs.get("rel") or "").lower().split()):
            names = ["href"]
        for name in names:
            for value in (attrs.get(name) or "").split(","):
                if value.strip():
                    self.urls.append(value.split()[0])
        if attrs.get("style"):
            self.css.append(attrs["style"])
        self._in_style = tag == "style"

    def handle_endtag(self, tag):
        self._in_style = False

    def handle_data(self, data):
        if self._in_style:
            self.css.append(data)


def is_external(url):
    parts = urlsplit(url)
    return bool(parts.netloc) or parts.scheme in {"http", "https"}


def static_problems(site):
    """Scripts, styles, fonts, images and frames that HTML or CSS files load from elsewhere."""
    problems = []
    for path in sorted(site.rglob("*.html")):
        parser = _Resources()
        parser.feed(path.read_text(encoding="utf-8", errors="replace"))
        external = [url for url in parser.urls if is_external(url)]
        external += [m.group(1) for css in parser.css for m in CSS_URL.finditer(css)]
        problems += [f"{path.relative_to(site)}: loads {url}" for url in external]
    for path in sorted(site.rglob("*.css")):
        text = path.read_text(encoding="utf-8", errors="replace")
        found = [m.group(1) for m in CSS_URL.finditer(text)]
        problems += [f"{path.relative_to(site)}: loads {url}" for url in found]
    return problems


def serve(site):
    """Serve ``site`` on a free port of 127.0.0.1 from a daemon thread; return its URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/"


def browser_problems(site, chromium):
    """Open every page in headless Chromium with the network outside 127.0.0.1 cut off."""
    from playwright.sync_api import sync_playwright

    root = serve(site)
    # Every page; _static/ holds the theme's template fragments, not pages.
    pages = sorted(
        path.relative_to(site).as_posix()
        for path in site.rglob("*.html")
        if path.relative_to(site).parts[0] != "_static"
    )
    problems = []
    with sync_playwright() as playwright:
        # --no-sandbox: Chromium's sandbox refuses to start as root (CI runs as root).
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        context = browser.new_context(viewport=VIEWPORT, service_workers="block")

        def only_local(route):
            if route.request.url.startswith(root):
                route.continue_()
            else:
                current.append(f"request to another host: {route.request.url}")
                route.abort("blockedbyclient")

        context.route("**/*", only_local)
        page = context.new_page()
        current = []
        page.on(
            "console",
            lambda msg: msg.type == "error" and current.append(f"console error: {msg.text}"),
        )
        page.on("pageerror", lambda exc: current.append(f"uncaught exception: {exc}"))
        page.on(
            "requestfailed",
            lambda req: req.url.startswith(root)
            and current.append(f"request failed: {req.url} ({req.failure})"),
        )
        page.on(
            "response",
            lambda resp: resp.status >= 400
            and current.append(f"HTTP {resp.status}: {resp.url}"),
        )
        for name in pages:
            current.clear()
            page.goto(root + name, wait_until="load")
            page.evaluate(WAIT_FOR_MATHJAX)
            page.wait_for_load_state("networkidle")
            current += page.evaluate(LAYOUT_CHECKS)
            problems += [f"{name}: {problem}" for problem in dict.fromkeys(current)]
        browser.close()
    return len(pages), problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", nargs="?", default="docs/_build/html", type=Path)
    parser.add_argument(
        "--chromium",
        default=shutil.which("chromium") or shutil.which("chromium-browser"),
        help="the Chromium executable (default: chromium on the PATH)",
    )
    args = parser.parse_args(argv)
    if not (args.site / "index.html").is_file():
        parser.error(f"no built site in {args.site} (build it first: make docs)")
    if not args.chromium:
        parser.error("no Chromium: install it (apt-get install -y chromium) or pass --chromium")
    problems = static_problems(args.site)
    n_pages, found = browser_problems(args.site, args.chromium)
    problems += found
    for problem in problems:
        print(problem)
    print(f"{n_pages} pages checked in Chromium, {len(problems)} problems found")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
