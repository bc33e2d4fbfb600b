"""MkDocs hooks (registered in mkdocs.yml).

- Before every build, write the generated reference pages (docs/gen_reference.py), so
  `mkdocs build` alone is up to date.
- In every page, code in a table cell (a config key, a flag with its arguments, a
  command) keeps each piece between spaces, and each dotted name of a key, on one line
  (``<span class="nobr">``, docs/stylesheets/extra.css) with a line-break opportunity
  (``<wbr>``) after each dot and slash: a narrow column breaks ``simulate.n_samples`` after
  ``simulate.`` and ``--allow-discovery-overlap`` not at all, never inside a name; a
  part over 32 characters (a JSON value) may still break anywhere. A copied key carries no break
  character.
"""

import html
import importlib.util
import re
from pathlib import Path

TABLE_CELL = re.compile(r"(<td[^>]*>)(.*?)(</td>)", re.S)
CODE = re.compile(r"<code>(.*?)</code>", re.S)
#: parts longer than this (characters; a JSON value) may break anywhere (``anybr``), so
#: no cell forces its table wider than the page
LONGEST_UNBROKEN = 32


def on_pre_build(config, **kwargs):
    path = Path(__file__).with_name("gen_reference.py")
    spec = importlib.util.spec_from_file_location("gen_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write()


def unbreakable_code(inner: str) -> str:
    """The HTML inside one <code> element (text and entities, no tags) with each piece
    between spaces, and each part of it ending in a dot or slash, in a nobr span, a <wbr>
    after each dot and slash."""
    if "<" in inner:                      # already marked up: leave it as it is
        return inner

    def piece(word: str) -> str:
        parts = [p for p in re.split(r"(?<=[./])", word) if p]
        return "<wbr>".join(f'<span class="{"nobr" if len(p) <= LONGEST_UNBROKEN else "anybr"}">'
                            f"{p}</span>" for p in parts)

    words = html.unescape(inner).split(" ")
    return " ".join(piece(html.escape(w, quote=False)) for w in words if w)


def on_page_content(html_text, **kwargs):
    return TABLE_CELL.sub(lambda m: m.group(1) + CODE.sub(
        lambda c: "<code>" + unbreakable_code(c.group(1)) + "</code>", m.group(2)) + m.group(3),
        html_text)
