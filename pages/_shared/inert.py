"""Names, ids and labels a run wrote, made inert for each place that would interpret them.

Pure string functions (no Streamlit, no plotly), so the pages, the chart builders and the
offline HTML report share them:

- ``reveal_id``: every invisible, bidi or control character (newlines too: a name is one line)
  shown as ⟨U+XXXX⟩, so an id cannot read as a different id or status.
- ``md``: for the Streamlit calls that render markdown (titles, headers, metric labels, button
  labels, toasts, alerts, captions, expander labels, tabs, progress text). Every ASCII
  punctuation character is backslash-escaped (links, images, emphasis, ``:red[…]`` directives,
  ``:material/…:`` icons and emoji short codes, ``$`` KaTeX, raw HTML), and bare URLs and e-mail
  addresses, which GitHub-flavoured markdown links after escapes are resolved, are broken with
  a word joiner (U+2060, zero width) so no link element is made.
- ``plot``: for plotly text (titles, tick labels, annotations, hover text), which interprets a
  subset of HTML (``<b>``, ``<span style>``, ``<a href>``, ``<br>``): ``& < >`` become entities,
  which plotly shows as the characters.
"""

from __future__ import annotations

import html
import re

from scoring.text import reveal

_PUNCT = re.compile(r"([!-/:-@\[-`{-~])")
# Where remark-gfm would start a link after escapes are resolved: a scheme or "www." at a word
# start, and the "@" of an address. A word joiner before the scheme (or after the "@") keeps it
# text: the literal linker needs whitespace or punctuation before a URL, a word character after "@".
_AUTOLINK = re.compile(r"(?i)(https?|ftp|mailto|xmpp|www)(?=\\[:.])|(?<=\\@)")


def reveal_id(text: object, *, lines: bool = False) -> str:
    """``text`` on one line (or its own lines, with ``lines``), every invisible, bidi or control
    character shown as ⟨U+XXXX⟩ (``scoring.text``'s one definition of them)."""
    return reveal(str(text), keep="\n\t" if lines else "")[0]


def md(text: object, *, lines: bool = False) -> str:
    """``text`` as inert markdown: shown literally by every Streamlit call that renders markdown.
    With ``lines`` its line breaks are kept (messages), else shown as ⟨U+000A⟩ (names)."""
    escaped = _PUNCT.sub(r"\\\1", reveal_id(text, lines=lines))
    return _AUTOLINK.sub(lambda m: "\u2060" + (m.group(1) or ""), escaped)


def plot(text: object) -> str:
    """``text`` as inert plotly text: ``<``, ``>`` and ``&`` shown, not interpreted."""
    return html.escape(reveal_id(text), quote=False)
