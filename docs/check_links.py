#!/usr/bin/env python3
"""Checks every relative link and #anchor of the README and of the built book, offline.

    python3 docs/check_links.py [--readme README.md] [--book docs/book]

- In a Markdown file (the README): every `[text](target)`, `[text]: target` and `<a href>`
  outside code. A relative target must exist (file or directory, from the file's own
  directory); its `#anchor` must be a heading of the target Markdown file as GitHub names
  headings (lowercase, punctuation dropped, spaces to `-`, `-1`, `-2`... for repeats), or
  of the same file for a bare `#anchor`.
- In the built book (HTML, as mdbook wrote it): every `href` and `src`. A relative target
  must exist inside the book (a link that leaves it is broken once the book is published on
  its own), and its `#anchor` must be an `id` (or `name`) in the target page.
- External links (with a scheme: https:, mailto:...) are listed, never fetched: this
  machine reaches no network but package registries.

Exit 0 when nothing is broken, 1 otherwise (each broken link printed with its file), 2 for
bad usage. Standard library only; tested by docs/test_check_links.py.
"""

from __future__ import annotations

import argparse
import html.parser
import os
import re
import sys
import urllib.parse
from dataclasses import dataclass, field

SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


@dataclass
class Report:
    checked: int = 0
    broken: list[str] = field(default_factory=list)
    external: set[str] = field(default_factory=set)


# ---- Markdown -------------------------------------------------------------------------------

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HREF = re.compile(r"""<a\s[^>]*href\s*=\s*["']([^"']+)["']""", re.I)
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks."""
    out, fenced = [], None
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if m:
            if fenced is None:
                fenced = m.group(1)
            elif m.group(1) == fenced:
                fenced = None
            continue
        if fenced is None and not line.startswith("    "):
            out.append((number, line))
    return out


def markdown_links(text: str) -> list[tuple[int, str]]:
    """(line number, target) of every link outside code. A link may span two lines."""
    lines = prose_lines(text)
    found = []
    for i, (number, line) in enumerate(lines):
        # A link's text may wrap: read each line with the next one joined, and keep the
        # links that start on this line.
        joined = line
        if i + 1 < len(lines) and lines[i + 1][0] == number + 1:
            joined = line + "\n" + lines[i + 1][1]
        joined_no_code = CODE_SPAN.sub(lambda m: " " * len(m.group(0)), joined)
        for m in INLINE_LINK.finditer(joined_no_code):
            if m.start() < len(line):
                found.append((number, m.group(1)))
        plain = joined_no_code[: len(line)]
        m = REF_DEF.match(plain)
        if m:
            found.append((number, m.group(1)))
        for m in HREF.finditer(plain):
            found.append((number, m.group(1)))
    return found


def github_slugs(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file."""
    slugs, seen = set(), {}
    for _, line in prose_lines(text):
        m = re.match(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(2))  # a link's text
        title = re.sub(r"<[^>]+>", "", title)  # inline HTML
        slug = "".join(c for c in title.lower() if c.isalnum() or c in " -_").replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        slugs.add(slug if n == 0 else f"{slug}-{n}")
    return slugs


def check_markdown(path: str, report: Report) -> None:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    base = os.path.dirname(os.path.abspath(path))
    for number, target in markdown_links(text):
        report.checked += 1
        where = f"{path}:{number}: {target}"
        if SCHEME.match(target):
            report.external.add(target)
            continue
        file_part, _, anchor = target.partition("#")
        file_part = urllib.parse.unquote(file_part)
        resolved = os.path.normpath(os.path.join(base, file_part)) if file_part else os.path.abspath(path)
        if not os.path.exists(resolved):
            report.broken.append(f"{where}: no such file ({resolved})")
            continue
        if anchor and resolved.endswith(".md") and os.path.isfile(resolved):
            with open(resolved, encoding="utf-8") as f:
                slugs = github_slugs(f.read())
            if urllib.parse.unquote(anchor) not in slugs:
                report.broken.append(f"{where}: no heading #{anchor} in {resolved}")


# ---- HTML -----------------------------------------------------------------------------------


class _Page(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[int, str]] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value is None:
                continue
            if name == "id" or (name == "name" and tag == "a"):
                self.ids.add(value)
            elif name == "href" and tag in ("a", "link", "area"):
                self.links.append((self.getpos()[0], value))
            elif name == "src" and tag in ("img", "script", "iframe", "source"):
                self.links.append((self.getpos()[0], value))


def parse_page(path: str) -> _Page:
    page = _Page()
    with open(path, encoding="utf-8") as f:
        page.feed(f.read())
    page.close()
    return page


def check_book(book: str, report: Report) -> None:
    book = os.path.abspath(book)
    pages: dict[str, _Page] = {}
    for root, _, files in os.walk(book):
        for name in files:
            if name.endswith(".html"):
                path = os.path.join(root, name)
                pages[path] = parse_page(path)
    if not pages:
        report.broken.append(f"{book}: no HTML page (was the book built?)")
        return
    for path, page in sorted(pages.items()):
        rel = os.path.relpath(path, book)
        for number, target in page.links:
            report.checked += 1
            where = f"{book}/{rel}:{number}: {target}"
            if SCHEME.match(target) or target.startswith("//"):
                if not target.lower().startswith("javascript:"):
                    report.external.add(target)
                continue
            file_part, _, anchor = target.partition("#")
            file_part = urllib.parse.unquote(file_part.split("?", 1)[0])
            resolved = (
                os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            )
            if resolved != book and not resolved.startswith(book + os.sep):
                report.broken.append(f"{where}: leaves the book ({resolved})")
                continue
            if os.path.isdir(resolved):
                resolved = os.path.join(resolved, "index.html")
            if not os.path.exists(resolved):
                report.broken.append(f"{where}: no such file ({os.path.relpath(resolved, book)})")
                continue
            if anchor:
                target_page = pages.get(resolved)
                if target_page is None:
                    report.broken.append(f"{where}: #{anchor} in a file that is not a page")
                elif urllib.parse.unquote(anchor) not in target_page.ids:
                    report.broken.append(
                        f"{where}: no id #{anchor} in {os.path.relpath(resolved, book)}"
                    )


# ---- main -----------------------------------------------------------------------------------


def run(readmes: list[str], book: str | None, out=sys.stdout) -> int:
    report = Report()
    for readme in readmes:
        check_markdown(readme, report)
    if book is not None:
        check_book(book, report)
    for line in report.broken:
        print(f"BROKEN {line}", file=out)
    if report.external:
        print(f"external links, listed and not fetched ({len(report.external)}):", file=out)
        for target in sorted(report.external):
            print(f"  {target}", file=out)
    print(
        f"checked {report.checked} links: {len(report.broken)} broken",
        file=out,
    )
    return 1 if report.broken else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readme", action="append", default=[], help="a Markdown file (repeatable)")
    parser.add_argument("--book", help="the built book's directory (mdbook build's output)")
    args = parser.parse_args(argv)
    if not args.readme and not args.book:
        parser.error("give --readme FILE and/or --book DIR")
    for readme in args.readme:
        if not os.path.isfile(readme):
            parser.error(f"--readme {readme}: no such file")
    if args.book and not os.path.isdir(args.book):
        parser.error(f"--book {args.book}: no such directory (run `mdbook build docs` first)")
    return run(args.readme, args.book)


if __name__ == "__main__":
    sys.exit(main())
