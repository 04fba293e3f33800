"""The page: sections of tables, figures and notes, written as one HTML document with inline
CSS, every figure inlined (SVG markup or a base64 PNG), and a short inline script that marks each
figure data-rendered="yes" once its image decoded (or its SVG has a non-empty box) and "no"
otherwise, with a banner listing the failures. Nothing is loaded from anywhere."""

import base64
import html
import io
import math
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

matplotlib.rcParams.update({"svg.fonttype": "path", "figure.dpi": 100, "font.size": 9,
                            "svg.hashsalt": "moesim"})

CSS = """
body{font-family:sans-serif;max-width:1150px;margin:1em auto;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ccc;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0;font-size:.85em}
td,th{border:1px solid #ddd;padding:2px 6px;text-align:right}
th{background:#f3f3f3}td.l,th.l{text-align:left}
figure{margin:.8em 0}figcaption{font-size:.85em;color:#555;max-width:1000px}
p.na{color:#8a5a00;background:#fff6e0;padding:.4em .6em;display:inline-block}
p.note{font-size:.85em;color:#555}
#render-status.bad{background:#fdd;padding:.5em}
nav a{margin-right:1em;font-size:.9em}
#deployment{border:1px solid #ccc;padding:.4em .8em;margin:.6em 0}
#deployment p{margin:.2em 0}
#verdict{font-weight:bold;padding:.4em .8em}
#verdict.meets{background:#e3f4e3}#verdict.misses{background:#fde2e2}#verdict.unknown{background:#f3f3f3}
"""

SCRIPT = """
window.addEventListener('load', function () {
  var bad = [];
  document.querySelectorAll('figure[data-kind]').forEach(function (f) {
    var ok = false;
    var img = f.querySelector('img');
    var svg = f.querySelector('svg');
    if (img) ok = img.complete && img.naturalWidth > 0;
    else if (svg) { var b = svg.getBoundingClientRect(); ok = b.width > 0 && b.height > 0 &&
                    svg.querySelectorAll('path,rect,text,use').length > 0; }
    f.setAttribute('data-rendered', ok ? 'yes' : 'no');
    if (!ok) bad.push(f.id);
  });
  var s = document.getElementById('render-status');
  s.setAttribute('data-figures', String(document.querySelectorAll('figure[data-kind]').length));
  s.setAttribute('data-failed', bad.join(' '));
  if (bad.length) { s.className = 'bad'; s.textContent = 'figures not rendered: ' + bad.join(', '); }
  document.body.setAttribute('data-report-checked', 'yes');
});
"""


def esc(x):
    return html.escape(str(x), quote=True)


def fmt(v, digits=4):
    """A number for people: n/a for None/NaN, integers as integers, else `digits` significant."""
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int,)) or (isinstance(v, float) and v.is_integer() and abs(v) < 1e15):
        if isinstance(v, float) and math.isnan(v):
            return "n/a"
        return f"{int(v):,}"
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return "n/a"
        return f"{v:.{digits}g}"
    return str(v)


def fmt_bytes(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{int(v)} B"


def _svg_markup(fig):
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _png_data_uri(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", dpi=100, metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


class Page:
    def __init__(self, title, subtitle=""):
        self.title = title
        self.subtitle = subtitle
        self.parts = []
        self.sections = []
        self.figure_ids = []
        self._svg_idx = 0
        self.deployment_lines = []
        self.verdict = None  # (kind: "meets" | "misses" | "unknown", text)

    def describe(self, lines, verdict_kind, verdict_text):
        """The top of the page: the deployment (lines of text) and the SLO verdict banner, whose
        kind ("meets", "misses" or "unknown") colours it; drawn above the first section."""
        self.deployment_lines = list(lines)
        self.verdict = (verdict_kind, verdict_text)

    def section(self, sid, title):
        self.sections.append((sid, title))
        self.parts.append(f'<h2 id="{esc(sid)}">{esc(title)}</h2>')

    def note(self, text):
        self.parts.append(f'<p class="note">{esc(text)}</p>')

    def table(self, header, rows, tid=None, left_cols=1):
        out = [f'<table{f" id={chr(34)}{esc(tid)}{chr(34)}" if tid else ""}><tr>']
        out += [f'<th class="{"l" if i < left_cols else ""}">{esc(h)}</th>'
                for i, h in enumerate(header)]
        out.append("</tr>")
        for r in rows:
            out.append("<tr>" + "".join(
                f'<td class="{"l" if i < left_cols else ""}">{esc(c)}</td>'
                for i, c in enumerate(r)) + "</tr>")
        out.append("</table>")
        self.parts.append("".join(out))

    def figure(self, fid, fig, caption, fmt_="svg"):
        """Inlines matplotlib figure `fig` (closed afterwards) as SVG or PNG under id `fid`."""
        self.figure_ids.append(fid)
        if fmt_ == "svg":
            # Ids matplotlib writes would collide between figures of one page: prefix them.
            body = _svg_markup(fig)
            self._svg_idx += 1
            pre = f"f{self._svg_idx}_"
            body = re.sub(r'id="([^"]+)"', lambda m: f'id="{pre}{m.group(1)}"', body)
            body = re.sub(r'(xlink:href|href)="#([^"]+)"',
                          lambda m: f'{m.group(1)}="#{pre}{m.group(2)}"', body)
            body = re.sub(r'url\(#([^)]+)\)', lambda m: f'url(#{pre}{m.group(1)})', body)
        else:
            body = f'<img alt="{esc(caption)}" src="{_png_data_uri(fig)}">'
        plt.close(fig)
        self.parts.append(f'<figure id="{esc(fid)}" data-kind="{fmt_}">{body}'
                          f"<figcaption>{esc(caption)}</figcaption></figure>")

    def missing(self, fid, reason):
        """A figure without data: says why (e.g. "n/a: no requests completed"), draws nothing."""
        self.figure_ids.append(fid)
        self.parts.append(f'<div id="{esc(fid)}" class="figure-na" data-na="yes">'
                          f'<p class="na">n/a: {esc(reason)}</p></div>')

    def _top(self):
        if not self.deployment_lines and not self.verdict:
            return ""
        out = ['<div id="deployment">'] + [f"<p>{esc(line)}</p>" for line in
                                           self.deployment_lines] + ["</div>"]
        if self.verdict:
            kind, text = self.verdict
            out.append(f'<p id="verdict" class="{esc(kind)}" data-verdict="{esc(kind)}">'
                       f"{esc(text)}</p>")
        return "".join(out)

    def render(self):
        nav = " ".join(f'<a href="#{esc(s)}">{esc(t)}</a>' for s, t in self.sections)
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<title>{esc(self.title)}</title><style>{CSS}</style></head><body>"
                f"<h1>{esc(self.title)}</h1><p class=\"note\">{esc(self.subtitle)}</p>"
                + self._top()
                + f"<nav>{nav}</nav><div id=\"render-status\"></div>"
                + "\n".join(self.parts)
                + f"<script>{SCRIPT}</script></body></html>\n")
