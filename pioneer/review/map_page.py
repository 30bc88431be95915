"""The context map's page: one self-contained HTML file drawn from a map's data.

:func:`render_html` takes a :class:`~pioneer.review.context_map.ContextMap` and gives a
page that opens from disk (inline CSS and a few lines of script, a
Content-Security-Policy that forbids any request and runs only the page's own scripts,
named by their sha256): the window by category, the request as a strip of labelled
blocks, the history budget, the provider rounds and a table of every block with its text
behind a click. Every figure on the page is a sum of the rows it stands for. Text from
the prompt is escaped, never markup. With ``live=True`` (``inspect --html --watch``) the
page reloads itself every second, keeping its scroll position and open texts.
:func:`write_page` writes it; :func:`render_error_page` is the page a live preview shows
while the prompt does not compile.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import InputError, Problem
from .context_map import NO_MODEL, Block, Budget, ContextMap, RoundRow, as_data

__all__ = ["CSP", "render_error_page", "render_html", "write_page"]

_CACHE_WORDS = ("read", "written", "uncached")


def write_page(path: Path, page: str) -> None:
    """Write a page to ``path`` (UTF-8) in one step, so a browser reloading it never reads
    half of it; a failure names the file."""
    partial = path.with_name(f".{path.name}.partial")
    try:
        partial.write_text(page, encoding="utf-8")
        partial.replace(path)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise InputError(Problem(f"cannot write the context map: {error.strerror or error}",
                                 file=str(path))) from None


def render_html(cmap: ContextMap, *, live: bool = False) -> str:
    """One self-contained page: inline CSS and script, no network, readable without JS."""
    data = as_data(cmap)
    totals = data["totals"]
    e = html.escape
    legend = "".join(
        f'<li><span class="swatch cache-{status}"></span>{status}: '
        f'<span id="plan-{status}">{totals["by_cache"][status]}</span> tokens</li>'
        for status in _CACHE_WORDS)
    notes = "".join(f"<li>{e(n)}</li>" for n in cmap.notes)
    # Every "<" as \u003c: no "</script>" can close the data block and no "<!--" can
    # start the parser's double-escaped state, which would swallow the page's script.
    embedded = json.dumps(data, sort_keys=True, ensure_ascii=False).replace("<", "\\u003c")
    model = (", no model given (the default model's window and minimum)"
             if cmap.model == NO_MODEL else f", model {e(cmap.model)}" if cmap.model else "")
    return _PAGE.format(
        title=e(cmap.title), profile=e(cmap.profile),
        profile_file=f" from <code>{e(cmap.profile_file)}</code>" if cmap.profile_file else "",
        fingerprint=e(cmap.profile_fingerprint[:12]),
        provider=e(cmap.provider), model=model, placement=e(cmap.placement),
        total=totals["tokens"], blocks=len(cmap.blocks),
        strip="\n".join(_strip_block(b) for b in cmap.blocks),
        rows="\n".join(_table_row(b, cmap.no_text) for b in cmap.blocks),
        texts=_texts_section(cmap),
        foot=_table_foot(cmap.blocks), legend=legend, window=_window_section(cmap),
        history=_history_figure(cmap.budget), rounds=_rounds_table(cmap.rounds), notes=notes,
        data=embedded, style=_STYLE, script=_SCRIPT, live=_LIVE if live else "",
        banner=_BANNER if live else "",
    )


def render_error_page(title: str, message: str, *, live: bool = True) -> str:
    """The page shown in place of the map while the prompt does not compile."""
    e = html.escape
    return _ERROR_PAGE.format(title=e(title), message=e(message), style=_STYLE,
                              live=_LIVE if live else "", banner=_BANNER if live else "")


def _describe(b: Block) -> str:
    source = ", ".join(f"{k} {v}" for k, v in b.source.items() if v)
    parts = [f"#{b.index} {b.kind} {b.id}", b.title, f"{b.stability}", _cache_words(b),
             f"{_n(b.tokens)} tokens", f"{_n(b.chars)} chars", source]
    if b.truncated:
        parts.append("truncated")
    parts += list(b.diagnostics)
    return " | ".join(parts)


def _cache_words(b: Block) -> str:
    read = b.split[0]
    if 0 < read < (b.tokens or 0):
        return f"cache {b.cache} ({read} of {b.tokens} read)"
    return f"cache {b.cache}"


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)


def _strip_block(b: Block) -> str:
    e = html.escape
    grow = max(b.tokens or 0, 1)
    attrs = {
        "index": b.index, "kind": b.kind, "category": b.category, "id": b.id, "title": b.title,
        "stability": b.stability, "cache": b.cache, "tokens": _n(b.tokens),
        "read": b.split[0], "written": b.split[1], "uncached": b.split[2],
        "chars": _n(b.chars), "truncated": "yes" if b.truncated else "no",
        "source": json.dumps(b.source, sort_keys=True), "diagnostics": "\n".join(b.diagnostics),
    }
    data = " ".join(f'data-{k}="{e(str(v))}"' for k, v in attrs.items())
    classes = f"block kind-{b.kind} stability-{b.stability} cache-{b.cache}" + (
        " truncated" if b.truncated else "")
    target = f"#text-{b.index}" if b.text is not None else f"#row-{b.index}"
    return (f'<a class="{classes}" href="{target}" style="flex-grow:{grow}" {data} '
            f'title="{e(_describe(b))}" aria-label="{e(_describe(b))}">'
            f'<span class="name">{e(b.title)}</span>'
            f'<span class="count">{_n(b.tokens)}</span></a>')


def _table_row(b: Block, no_text: str) -> str:
    e = html.escape
    source = "<br>".join(f"{e(k.replace('_', ' '))}: {e(v)}" for k, v in b.source.items() if v)
    notes = "<br>".join(e(d) for d in b.diagnostics)
    read = b.split[0]
    partly = f" ({read} of {b.tokens} read)" if 0 < read < (b.tokens or 0) else ""
    if b.text is not None:
        text = f'<a href="#text-{b.index}">text</a>'
    else:
        text = f'<span title="{e(no_text)}">-</span>' if no_text else "-"
    return (
        f'<tr id="row-{b.index}" class="cache-{b.cache}-row" data-index="{b.index}">'
        f"<td>{b.index}</td><td>{e(b.kind)}</td><td>{e(b.title)}</td>"
        f"<td><code>{e(b.id)}</code></td><td>{e(b.stability)}</td>"
        f'<td><span class="swatch cache-{b.cache}"></span>{e(b.cache)}{partly}</td>'
        f'<td class="num">{_n(b.tokens)}</td><td class="num">{_n(b.chars)}</td>'
        f"<td>{source}</td><td>{'yes' if b.truncated else ''}</td><td>{notes}</td>"
        f"<td>{text}</td></tr>"
    )


def _text_panel(b: Block) -> str:
    e = html.escape
    return (f'<details id="text-{b.index}" class="text"><summary>#{b.index} {e(b.title)} '
            f"({e(b.kind)}, {_n(b.tokens)} tokens)</summary>"
            f'<pre class="text">{e(b.text or "")}</pre></details>')


def _texts_section(cmap: ContextMap) -> str:
    panels = "\n".join(_text_panel(b) for b in cmap.blocks if b.text is not None)
    if not panels:
        return (f'<p id="no-text">No text: {_prose(cmap.no_text)}.</p>' if cmap.no_text
                else "")
    return panels


def _prose(text: str) -> str:
    """Plain text for a paragraph: escaped, with a `command` in backticks (as the data and
    the terminal write it) set as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def _table_foot(blocks: Sequence[Block]) -> str:
    tokens = sum(b.tokens or 0 for b in blocks)
    unknown = sum(1 for b in blocks if b.tokens is None)
    more = f" ({unknown} not known)" if unknown else ""
    return (f'<tr id="blocks-total"><th colspan="6">every block{more}</th>'
            f'<td class="num" id="blocks-tokens">{tokens}</td><td colspan="5"></td></tr>')


def _pct(value: float) -> str:
    return f"{100 * value:.2f}%"


def _window_section(cmap: ContextMap) -> str:
    """The window by category (the request's, the reply's reserve, what is free): a
    stacked bar and a table whose rows sum to the window."""
    e = html.escape
    budget = cmap.budget
    rows = cmap.categories()
    window = max(budget.context_window, 1)
    bar = "".join(
        f'<div class="part part-{row["category"]}" style="width:'
        f'{min(100.0, max(0.0, 100 * row["tokens"] / window)):.2f}%" '
        f'title="{e(row["label"])}: {row["tokens"]} tokens"></div>'
        for row in rows if row["category"] != "over")
    body = "".join(
        f'<tr data-category="{row["category"]}"><td><span class="swatch part-'
        f'{row["category"]}"></span>{e(row["label"])}</td><td class="num">{row["tokens"]}</td>'
        f'<td class="num">{_pct(row["share"])}</td><td>{e(row["detail"])}</td></tr>'
        for row in rows)
    model = f"model <code>{e(cmap.model)}</code>: " if cmap.model and (
        cmap.model != NO_MODEL) else ""
    minimum = ""
    if cmap.minimum_tokens is not None:
        prefix = sum(b.tokens or 0 for b in cmap.blocks
                     if b.kind == "tools" or b.stability == "stable")
        verdict = "long enough to cache" if prefix >= cmap.minimum_tokens else (
            "too short: nothing is cached until the request reaches the minimum")
        minimum = (f' The provider caches prefixes of at least <strong id="minimum-tokens">'
                   f"{cmap.minimum_tokens}</strong> tokens; the tools and stable text here "
                   f'come to <span id="stable-prefix">{prefix}</span> tokens, {verdict}.')
    return (
        f'<div class="window" id="window" role="img" aria-label="the context window by '
        f'category">{bar}</div>'
        f'<p id="window-text">{model}context window <strong id="context-window">'
        f"{budget.context_window}</strong> tokens (from {e(budget.window_from)}).{minimum}</p>"
        '<table id="categories"><thead><tr><th>category</th><th>tokens</th>'
        "<th>share of the window</th><th>what</th></tr></thead>"
        f"<tbody>{body}</tbody><tfoot><tr><th>context window</th>"
        f'<td class="num" id="categories-total">{sum(row["tokens"] for row in rows)}</td>'
        f'<td class="num">{_pct(sum(row["share"] for row in rows))}</td><td></td></tr>'
        "</tfoot></table>"
    )


def _history_figure(budget: Budget) -> str:
    e = html.escape
    history_budget = max(budget.history_budget, 1)
    tokens = budget.history_tokens
    width = f"{min(100.0, 100 * tokens / history_budget):.2f}%"
    share = tokens / budget.history_budget if budget.history_budget else 0
    mode = f", history mode {e(budget.history_mode)}" if budget.history_mode else ""
    counted = ("as the turn's history decision counted them (each message with its "
               "per-message overhead, as <code>pioneer explain</code> prints them; the strip "
               "counts the request body, without it)" if budget.history_counted == "budgeter"
               else "as the request body carries them (the history blocks of the strip)")
    rows = "".join(f'<tr><td>{e(message)}</td><td class="num">{t}</td></tr>'
                   for message, t in budget.history)
    return (
        f'<p class="axis">history budget (dashed: 80%, where summarising starts)</p>'
        f'<div class="window" id="history-window" role="img" aria-label="history '
        f'{tokens} of a {budget.history_budget}-token budget, summarising at '
        f'{budget.history_threshold}"><div class="used history" style="width:{width}">'
        f'</div><div class="line" style="left:80%" title="80%: summarising starts at '
        f'{budget.history_threshold} tokens"></div></div>'
        f'<p id="budget-text">History <strong id="history-tokens">{tokens}</strong> tokens '
        f"{counted}, of a {budget.history_budget}-token budget ({100 * share:.1f}%); "
        f"summarising starts at 80%, {budget.history_threshold} tokens{mode}.</p>"
        f'<details id="history-rows"><summary>{len(budget.history)} history messages'
        '</summary><table><thead><tr><th>message</th><th>tokens</th></tr></thead>'
        f"<tbody>{rows}</tbody><tfoot><tr><th>history</th><td class=\"num\">{tokens}</td>"
        "</tr></tfoot></table></details>"
    )


def _rounds_table(rounds: Sequence[RoundRow]) -> str:
    if not rounds:
        return ""
    rows = []
    for r in rounds:
        planned = r.planned
        reported = r.reported or {}

        def cell(values: Mapping[str, int], key: str) -> str:
            return f'<td class="num">{values[key]}</td>' if key in values else "<td>-</td>"

        rows.append(
            f'<tr id="round-{r.round}"><td>{r.round}</td>'
            + "".join(cell(planned, k) for k in _CACHE_WORDS)
            + "".join(cell(reported, k) for k in ("input_tokens", "cache_read_input_tokens",
                                                   "cache_creation_input_tokens",
                                                   "output_tokens"))
            + _window_cells(r.window)
            + "</tr>")
    return (
        '<section aria-labelledby="rounds-h"><h2 id="rounds-h">Provider rounds</h2>'
        '<table id="rounds"><thead><tr><th rowspan="2">round</th>'
        '<th colspan="3">planned tokens</th><th colspan="4">reported by the provider</th>'
        '<th colspan="5">fitting the window</th></tr>'
        "<tr><th>read</th><th>written</th><th>uncached</th><th>input</th><th>cache read</th>"
        "<th>cache written</th><th>output</th><th>window</th><th>estimated input</th>"
        "<th>reserve</th><th>ratio (samples)</th><th>tool results cleared</th></tr></thead>"
        "<tbody>" + "".join(rows) + "</tbody></table></section>"
    )


def _window_cells(window: Mapping[str, Any] | None) -> str:
    """A round's fit to the window: the window, the estimated input, the reply's reserve,
    the ratio with its samples and the tool results cleared (dashes when not kept)."""
    if window is None:
        return "<td>-</td>" * 5
    return (f'<td class="num">{window["context_window"]}</td>'
            f'<td class="num">{window["estimated_input_tokens"]}</td>'
            f'<td class="num">{window["reserve_tokens"]}</td>'
            f'<td class="num">{window["ratio"]:.3f} ({window["ratio_samples"]})</td>'
            f'<td class="num">{window["cleared_tool_results"]}</td>')


# Okabe-Ito colours (distinct for the common colour-vision deficiencies); the stability
# of a block is also drawn as a pattern and every state is written out in the table.
_STYLE = """
:root { --read: #0072B2; --written: #E69F00; --uncached: #999999; --ink: #1b1b1b; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, sans-serif; color: var(--ink); margin: 1.5rem; }
h1 { font-size: 1.3rem; margin: 0 0 .3rem; } h2 { font-size: 1.05rem; margin: 1.4rem 0 .4rem; }
.strip { display: flex; height: 64px; border: 1px solid #444; gap: 1px; background: #444; }
.block { flex-basis: 0; min-width: 4px; display: block; overflow: hidden;
  background: var(--uncached); color: var(--ink); text-decoration: none; }
.block .name, .block .count { display: block; white-space: nowrap; overflow: hidden;
  text-overflow: ellipsis; font-size: 11px; line-height: 15px; padding: 0 3px;
  background: rgba(255,255,255,.85); }
.block .count { font-variant-numeric: tabular-nums; }
.block.cache-read { background-color: var(--read); }
.block.cache-written { background-color: var(--written); }
.block.stability-dynamic { background-image: repeating-linear-gradient(45deg,
  rgba(255,255,255,.55) 0 3px, transparent 3px 8px); }
.block.stability-conversation { background-image: repeating-linear-gradient(90deg,
  rgba(0,0,0,.28) 0 2px, transparent 2px 6px); }
.block.truncated { box-shadow: inset 0 -6px 0 #000; }
.block:focus, .block:hover { outline: 3px solid #000; outline-offset: -3px; }
.swatch { display: inline-block; width: .9em; height: .9em; margin-right: .3em;
  vertical-align: -.1em; border: 1px solid #444; background: var(--uncached); }
.swatch.cache-read { background: var(--read); }
.swatch.cache-written { background: var(--written); }
.legend { list-style: none; padding: 0; display: flex; gap: 1.2rem; flex-wrap: wrap; }
#details { min-height: 3.2em; border-left: 4px solid #444; padding: .3rem .6rem;
  background: #f4f4f4; white-space: pre-wrap; }
table { border-collapse: collapse; width: 100%; margin-top: .5rem; }
th, td { border: 1px solid #ccc; padding: .2rem .4rem; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr:target, tr.current { background: #fff3c4; }
details.text { margin: .2rem 0; } details.text > summary { cursor: pointer; }
details.text:target > summary { background: #fff3c4; }
pre.text { white-space: pre-wrap; max-height: 32em; overflow: auto; margin: .3rem 0 .6rem;
  padding: .4rem .6rem; background: #f7f7f7; border: 1px solid #ddd; }
.window { position: relative; display: flex; height: 22px; border: 1px solid #444;
  background: #fff; }
.window .used { position: absolute; left: 0; top: 0; bottom: 0; }
.window .used.history { background: var(--written); }
.part-system { background: #56B4E9; } .part-tools { background: #009E73; }
.part-history { background: #CC79A7; } .part-turn { background: #D55E00; }
.part-reserve { background: repeating-linear-gradient(45deg, #bbb 0 3px, #eee 3px 6px); }
.part-free, .part-over { background: #fff; }
.axis { margin: .4rem 0 .1rem; font-size: .85em; color: #444; }
.window .line { position: absolute; top: -4px; bottom: -4px; width: 0;
  border-left: 2px dashed #000; }
.live { background: #e8f4fa; border-left: 4px solid var(--read); padding: .3rem .6rem; }
pre.error { white-space: pre-wrap; background: #fdecea; border-left: 4px solid #b00020;
  padding: .5rem .8rem; }
"""

_SCRIPT = """
(function () {
  var blocks = Array.prototype.slice.call(document.querySelectorAll('.strip .block'));
  var details = document.getElementById('details');
  function show(block) {
    var d = block.dataset, source = JSON.parse(d.source), lines = [];
    var partly = (+d.read > 0 && d.cache !== 'read') ? ' (' + d.read + ' read)' : '';
    lines.push('#' + d.index + ' ' + d.kind + '  ' + d.id + '  ' + d.title);
    lines.push(d.stability + ', cache ' + d.cache + partly + ', ' + d.tokens + ' tokens, ' +
               d.chars + ' chars' + (d.truncated === 'yes' ? ', truncated' : ''));
    Object.keys(source).forEach(function (k) { lines.push(k + ': ' + source[k]); });
    if (d.diagnostics) { lines.push(d.diagnostics); }
    details.textContent = lines.join('\\n');
    document.querySelectorAll('tr.current').forEach(function (r) {
      r.classList.remove('current'); });
    var row = document.getElementById('row-' + d.index);
    if (row) { row.classList.add('current'); }
  }
  blocks.forEach(function (block, i) {
    block.addEventListener('mouseenter', function () { show(block); });
    block.addEventListener('focus', function () { show(block); });
    block.addEventListener('click', function () {
      var text = document.getElementById('text-' + block.dataset.index);
      if (text) { text.open = true; }
    });
    block.addEventListener('keydown', function (event) {
      var step = {ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1}[event.key];
      if (event.key === 'Home') { step = -i; } else if (event.key === 'End') {
        step = blocks.length - 1 - i; }
      if (step === undefined) { return; }
      var next = blocks[Math.max(0, Math.min(blocks.length - 1, i + step))];
      next.focus();
      event.preventDefault();
    });
  });
  document.documentElement.classList.add('js');
})();
"""

# The live preview reloads the page from disk every second: a page opened from a file
# can make no request to learn whether it changed. What the reader had open (texts, the
# focused block, the scroll position) is kept across the reload.
_LIVE_SCRIPT = """
(function () {
  var key = 'pioneer-map ' + location.pathname;
  function save() {
    var open = Array.prototype.map.call(document.querySelectorAll('details[open]'),
      function (d) { return d.id; });
    var focused = document.activeElement && document.activeElement.dataset ?
      document.activeElement.dataset.index : null;
    try { sessionStorage.setItem(key, JSON.stringify(
      {x: window.scrollX, y: window.scrollY, open: open, focused: focused})); } catch (e) {}
  }
  window.addEventListener('DOMContentLoaded', function () {
    var state = null;
    try { state = JSON.parse(sessionStorage.getItem(key) || 'null'); } catch (e) {}
    if (state) {
      state.open.forEach(function (id) {
        var d = id && document.getElementById(id); if (d) { d.open = true; } });
      if (state.focused !== null) {
        var b = document.querySelector('.strip .block[data-index="' + state.focused + '"]');
        if (b) { b.focus({preventScroll: true}); }
      }
      window.scrollTo(state.x, state.y);
    }
    document.documentElement.setAttribute('data-live', 'on');
    setInterval(function () { save(); location.reload(); }, 1000);
  });
})();
"""
_LIVE = ('<noscript><meta http-equiv="refresh" content="2"></noscript>\n'
         f"<script>{_LIVE_SCRIPT}</script>")

_BANNER = ('<p class="live" id="live">Live preview: <code>pioneer inspect --watch</code> '
           "rewrites this page whenever a profile, template, identity file or input changes, "
           "and the page reloads itself.</p>")



def _script_hash(script: str) -> str:
    """A CSP source naming an inline script by the sha256 of its exact text."""
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return f"'sha256-{digest}'"


#: The page's policy: no request of any kind, inline styles, and only the page's own two
#: scripts, each named by its hash; any other script (one an escaping slip let into the
#: page, an event handler attribute, a ``javascript:`` link) is not run.
CSP = ("default-src 'none'; style-src 'unsafe-inline'; "
       f"script-src {_script_hash(_SCRIPT)} {_script_hash(_LIVE_SCRIPT)}; img-src data:")

_HEAD = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{title}}: context map</title>
<style>{{style}}</style>
{{live}}
</head>
"""

_PAGE = _HEAD + """<body>
<header>
<h1>{title}: context map</h1>
{banner}
<p id="summary">Profile <code>{profile}</code>{profile_file} (fingerprint {fingerprint}), provider
{provider}{model}, dynamic text placement {placement}: <strong id="total-tokens">{total}</strong>
tokens in {blocks} blocks, in the order the provider receives them.</p>
</header>
<main>
<section aria-labelledby="window-h">
<h2 id="window-h">Context window</h2>
{window}
</section>
<section aria-labelledby="map-h">
<h2 id="map-h">The request, block by block</h2>
<p>Each block's width is its share of the tokens. Colour: expected cache status; stripes:
dynamic text (diagonal) or conversation (vertical); a dark bottom edge: cut to its budget.
Tab or the arrow keys move between blocks; a click (or Enter) opens the block's text.</p>
<nav class="strip" id="strip" aria-label="blocks in provider order">
{strip}
</nav>
<ul class="legend">{legend}</ul>
<div id="details" aria-live="polite">Hover over or focus a block for its details.</div>
</section>
<section aria-labelledby="budget-h">
<h2 id="budget-h">History budget</h2>
{history}
</section>
{rounds}
<section aria-labelledby="blocks-h">
<h2 id="blocks-h">Every block</h2>
<table id="blocks">
<thead><tr><th>#</th><th>kind</th><th>title</th><th>id</th><th>stability</th><th>cache</th>
<th>tokens</th><th>chars</th><th>source</th><th>truncated</th><th>diagnostics</th><th>text</th>
</tr></thead>
<tbody>
{rows}
</tbody>
<tfoot>{foot}</tfoot>
</table>
</section>
<section aria-labelledby="texts-h">
<h2 id="texts-h">The text of each block</h2>
<p>Exactly the text each block was counted from; the page shows it as text, never as
markup.</p>
{texts}
</section>
<section aria-labelledby="notes-h"><h2 id="notes-h">Notes</h2><ul>{notes}</ul></section>
</main>
<script type="application/json" id="context-map-data">{data}</script>
<script>{script}</script>
</body>
</html>
"""

_ERROR_PAGE = _HEAD + """<body>
<header><h1>{title}: context map</h1>{banner}</header>
<main>
<h2>The prompt does not compile</h2>
<pre class="error" id="error">{message}</pre>
<p>The page comes back as soon as the files compile again.</p>
</main>
</body>
</html>
"""
