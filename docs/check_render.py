"""Check the built documentation site as a reader sees it, in headless Chromium.

Usage: ``python docs/check_render.py SITE_DIR [--shots DIR]`` after ``mkdocs build``.

Every page is opened at two window widths (1280 and 820 CSS pixels) with a small script
added that measures the laid-out page, and the check fails (exit 1, one line a problem)
where:

- a code block or a table is wider than its box (a line or a column runs past the
  page's edge, or hides behind a scroll bar);
- code in a table cell (a config key, a flag) breaks onto a new line inside a name,
  anywhere but after a dot, a space, a slash, a comma or an equals sign;
- a paragraph holds the text of a list item (``... 3. One trait``, ``... - **conda**``):
  a list that ran into the paragraph above it.

With ``--shots DIR`` it also writes a PNG of each page at 1280 pixels, to look at.
:func:`list_layout_problems` checks a page's Markdown for the usual cause of the last
problem before anything is built (tests/test_docs.py runs it on every page).
Chromium is found as ``chromium`` or ``chromium-browser`` on PATH.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

LIST_ITEM = re.compile(r"^( *)([-*+]|\d+\.) +\S")
FENCE = re.compile(r"^ *(```|~~~)")


def list_layout_problems(text: str) -> list[tuple[int, str]]:
    """(line, why) of each place Python-Markdown (MkDocs) would render a list otherwise
    than its text reads: a list right after a paragraph line (it joins the paragraph),
    and a paragraph or code block after a blank line inside a list item indented by
    less than 4 spaces past the item's marker (it leaves the list, and the items after
    it join the paragraph)."""
    found, open_items, prev = [], [], "blank"
    in_fence = False
    for number, line in enumerate(text.split("\n"), 1):
        indent = len(line) - len(line.lstrip(" "))
        if in_fence:
            in_fence = not FENCE.match(line)
            continue
        if not line.strip():
            prev = "blank"
            continue
        if line.lstrip().startswith("#"):        # a heading ends every block
            open_items, prev = [], "blank"
            continue
        item = LIST_ITEM.match(line)
        if item:
            if prev == "paragraph":
                found.append((number, "a list item needs a blank line before it here (it "
                                      "joins the paragraph above)"))
            while open_items and open_items[-1] >= indent:
                open_items.pop()
            open_items.append(indent)
            prev = "item"
            continue
        if prev == "blank":
            while open_items and indent <= open_items[-1]:
                open_items.pop()
            if open_items and indent < open_items[-1] + 4:
                found.append((number, "inside a list item, indent this by 4 spaces past "
                                      "the item's marker"))
                open_items.clear()
        if FENCE.match(line):
            in_fence = True
        if prev == "blank" or prev == "paragraph":
            prev = "paragraph"
    return found


WIDTHS = (1280, 820)
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars"]

#: Runs after the page has laid out; writes what it found into <body data-render-check>.
MEASURE = r"""
<script>
window.addEventListener("load", () => {
  const found = [];
  document.querySelectorAll(".md-typeset pre > code").forEach((code) => {
    if (code.scrollWidth > code.clientWidth + 1) {
      found.push("code block wider than the page: " + code.textContent.split("\n")[0].slice(0, 60));
    }
  });
  document.querySelectorAll(".md-typeset__scrollwrap").forEach((wrap) => {
    if (wrap.scrollWidth > wrap.clientWidth + 1) {
      const head = wrap.querySelector("th, td");
      found.push("table wider than the page (its right part hidden): " +
                 (head ? head.textContent.trim().slice(0, 40) : ""));
    }
  });
  const allowed = new Set([".", " ", "/", ",", "="]);
  document.querySelectorAll(".md-typeset table code").forEach((code) => {
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    let text = "", tops = [];
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (let i = 0; i < node.length; i++) {
        const range = document.createRange();
        range.setStart(node, i); range.setEnd(node, i + 1);
        const rect = range.getBoundingClientRect();
        text += node.data[i]; tops.push(rect.height ? rect.top : null);
      }
    }
    let last = null;
    for (let i = 0; i < text.length; i++) {
      if (tops[i] === null) continue;
      if (last !== null && tops[i] > last + 2 && !allowed.has(text[i - 1]) && text[i] !== " ") {
        found.push("table code broken inside a name: " + text.slice(0, i) + " | " + text.slice(i));
        break;
      }
      last = tops[i];
    }
  });
  const listy = /(^|[.:)]\s+)(\d+\.\s+[A-Z`*]|-\s+\*\*)/;
  document.querySelectorAll(".md-typeset p").forEach((p) => {
    if (p.closest("table, pre, .admonition-title")) return;
    const m = p.textContent.match(listy);
    if (m) found.push("a list item runs into a paragraph: ..." +
                      p.textContent.slice(Math.max(0, m.index - 30), m.index + 30).replace(/\s+/g, " "));
  });
  document.body.setAttribute("data-render-check", JSON.stringify(found));
});
</script>
"""


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("check_render: no chromium on PATH (apt-get install chromium)")


def page_problems(browser: str, page: Path, width: int, profile: Path) -> list[str]:
    """The problems the measuring script finds on ``page`` (a copy with MEASURE added)
    laid out at ``width`` CSS pixels."""
    out = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                          f"--window-size={width},1000", "--virtual-time-budget=5000",
                          "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    match = re.search(r'data-render-check="([^"]*)"', out)
    if not match:
        return ["the measuring script did not run (no data-render-check in the page)"]
    return json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&")
                      .replace("&lt;", "<").replace("&gt;", ">"))


def check_site(site: Path, shots: Path | None = None) -> list[str]:
    """Every problem on every page of the built ``site``, as "page (width): problem"."""
    browser, problems = chromium(), []
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "site"
        shutil.copytree(site, copy)
        for page in sorted(copy.rglob("*.html")):
            if page.name == "404.html" or "search" in page.parts:
                continue
            page.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
            name = str(page.relative_to(copy))
            for width in WIDTHS:
                problems += [f"{name} ({width} px): {p}"
                             for p in page_problems(browser, page, width, Path(tmp) / "profile")]
            if shots is not None:
                shots.mkdir(parents=True, exist_ok=True)
                png = shots / (name.replace("/", "_").removesuffix(".html") + ".png")
                subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={Path(tmp) / 'profile'}",
                                "--window-size=1280,2400", f"--screenshot={png}", page.as_uri()],
                               capture_output=True, timeout=120)
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", type=Path, help="the built site (mkdocs build --site-dir)")
    parser.add_argument("--shots", type=Path, default=None, help="write a PNG of each page here")
    args = parser.parse_args(argv)
    problems = check_site(args.site, args.shots)
    for line in problems:
        print(f"check_render: {line}")
    print(f"check_render: {len(problems)} problem(s) in {args.site}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
