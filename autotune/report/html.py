"""report.html: the markdown report as one self-contained page (plots inlined as base64)."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

STYLE = "\n".join(
    (
        "body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}",
        ".table{overflow-x:auto;margin:.8em 0}table{border-collapse:collapse;font-size:13px}",
        "td,th{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}",
        "th{background:#f3f3f3}th.num{text-align:right}",
        "td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}",
        "pre{background:#f5f5f5;padding:1em;overflow-x:auto;font-size:12px}",
        "img{max-width:100%;height:auto;display:block;margin:.5em 0}h1{font-size:1.6em}",
        "h2{border-bottom:1px solid #ddd}",
    )
)


def _inline(text: str, base: Path) -> str:
    text = html.escape(text, quote=False)
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    text = re.sub(r"`(.+?)`", r"<code>\1</code>", text)
    text = re.sub(r"(?<!\w)_([^_\n]+?)_(?!\w)", r"<i>\1</i>", text)  # _emphasis_, not snake_case

    def image(m: re.Match) -> str:
        path = base / m.group(2)
        if not path.is_file():
            return f"[missing plot {html.escape(m.group(2))}]"
        data = base64.b64encode(path.read_bytes()).decode()
        return f'<img alt="{m.group(1)}" src="data:image/png;base64,{data}">'

    return re.sub(r"!\[(.*?)\]\((.+?)\)", image, text)


def _table(rows: list[list[str]], base: Path) -> str:
    """A markdown table as HTML; a `---:` alignment cell right-aligns its column (numbers)."""
    rule = next((r for r in rows[1:2] if all(set(c) <= set("-:") and c for c in r)), None)
    right = [c.endswith(":") for c in rule] if rule else []
    head, body = rows[0], [r for r in rows[1:] if r is not rule]

    def cells(row: list[str], tag: str) -> str:
        return "".join(
            f"<{tag} class='num'>{_inline(c, base)}</{tag}>"
            if i < len(right) and right[i]
            else f"<{tag}>{_inline(c, base)}</{tag}>"
            for i, c in enumerate(row)
        )

    rows_html = "".join(f"<tr>{cells(r, 'td')}</tr>" for r in body)
    return f"<div class='table'><table><tr>{cells(head, 'th')}</tr>{rows_html}</table></div>"


def markdown_to_html(markdown: str, base: Path, title: str) -> str:
    out, lines, i = [], markdown.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.append("<pre>" + html.escape("\n".join(lines[i + 1 : j])) + "</pre>")
            i = j + 1
            continue
        if line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append([c.strip() for c in lines[i].strip("|").split("|")])
                i += 1
            out.append(_table(rows, base))
            continue
        heading = re.match(r"(#{1,3}) (.*)", line)
        if heading:
            level = len(heading.group(1))
            out.append(f"<h{level}>{_inline(heading.group(2), base)}</h{level}>")
        elif line.strip():  # a paragraph: consecutive text lines, joined as markdown joins them
            j = i + 1
            while j < len(lines) and lines[j].strip() and not re.match(r"(```|\||#{1,3} )", lines[j]):
                j += 1
            out.append(f"<p>{_inline(' '.join(lines[i:j]), base)}</p>")
            i = j
            continue
        i += 1
    body = "\n".join(out)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body>\n{body}\n</body></html>\n"
    )
