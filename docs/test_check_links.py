#!/usr/bin/env python3
"""Tests of docs/check_links.py on fixtures: a broken link or anchor must fail the check,
good ones must pass, and external links are listed, not fetched.

    python3 -m unittest docs/test_check_links.py
"""

import io
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_links  # noqa: E402

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_links.py")


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


GOOD_README = """# uexec

## Build, run, test

See [the book](docs/src/intro.md), its [walk](docs/src/intro.md#a-walk-step-by-step),
[this section](#build-run-test), a [wrapped
link](docs/src/intro.md) and [the site](https://example.com/never-fetched).

```sh
[not a link](nowhere.md)   # in a code block
```

`[not a link either](nowhere.md)` in a code span.
"""

INTRO = """# Intro

## A walk, step by step

## Build, run, test
"""


class MarkdownTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name
        write(self.root, "docs/src/intro.md", INTRO)

    def tearDown(self):
        self.dir.cleanup()

    def check(self, readme_text):
        readme = write(self.root, "README.md", readme_text)
        out = io.StringIO()
        code = check_links.run([readme], None, out=out)
        return code, out.getvalue()

    def test_good_links_pass_and_external_ones_are_listed(self):
        code, out = self.check(GOOD_README)
        self.assertEqual(code, 0, out)
        self.assertIn("checked 5 links: 0 broken", out)
        self.assertIn("  https://example.com/never-fetched", out)

    def test_a_missing_file_fails(self):
        code, out = self.check(GOOD_README + "\nAnd [a typo](docs/src/intor.md).\n")
        self.assertEqual(code, 1, out)
        self.assertIn("README.md:15: docs/src/intor.md: no such file", out)

    def test_a_missing_heading_fails(self):
        code, out = self.check(GOOD_README + "\n[Gone](docs/src/intro.md#a-run-step-by-step)\n")
        self.assertEqual(code, 1, out)
        self.assertIn("no heading #a-run-step-by-step", out)

    def test_a_missing_anchor_in_the_same_file_fails(self):
        code, out = self.check(GOOD_README + "\n[Up](#build-run-tests)\n")
        self.assertEqual(code, 1, out)
        self.assertIn("no heading #build-run-tests", out)

    def test_repeated_headings_get_numbered_anchors(self):
        slugs = check_links.github_slugs("# A\n## Notes\n## Notes\n## `uexec run`: a *quick* one\n")
        self.assertEqual(slugs, {"a", "notes", "notes-1", "uexec-run-a-quick-one"})


PAGE = """<!DOCTYPE html><html><head>
<link rel="stylesheet" href="css/style.css">
<script src="book.js"></script></head><body>
<h1 id="intro">Intro</h1>
<a href="other.html#part">other</a> <a href="#intro">up</a>
<a href="https://example.com/x">out</a> <a href="javascript:void(0)">menu</a>
{extra}
</body></html>
"""


class BookTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.book = os.path.join(self.dir.name, "book")
        write(self.book, "css/style.css", "")
        write(self.book, "book.js", "")
        write(self.book, "other.html", '<html><body><h2 id="part">Part</h2></body></html>')

    def tearDown(self):
        self.dir.cleanup()

    def check(self, extra=""):
        write(self.book, "index.html", PAGE.format(extra=extra))
        out = io.StringIO()
        return check_links.run([], self.book, out=out), out.getvalue()

    def test_a_good_book_passes(self):
        code, out = self.check()
        self.assertEqual(code, 0, out)
        self.assertIn("  https://example.com/x", out)
        self.assertNotIn("javascript", out)

    def test_a_missing_page_fails(self):
        code, out = self.check('<a href="gone.html">gone</a>')
        self.assertEqual(code, 1, out)
        self.assertIn("gone.html: no such file", out)

    def test_a_missing_id_fails(self):
        code, out = self.check('<a href="other.html#whole">x</a>')
        self.assertEqual(code, 1, out)
        self.assertIn("no id #whole in other.html", out)

    def test_a_link_that_leaves_the_book_fails(self):
        write(self.dir.name, "outside.md", "")
        code, out = self.check('<a href="../outside.md">x</a>')
        self.assertEqual(code, 1, out)
        self.assertIn("leaves the book", out)

    def test_an_empty_book_fails(self):
        empty = os.path.join(self.dir.name, "empty")
        os.makedirs(empty)
        out = io.StringIO()
        self.assertEqual(check_links.run([], empty, out=out), 1)

    def test_the_command_exits_1_on_a_broken_link_and_2_on_bad_usage(self):
        write(self.book, "index.html", PAGE.format(extra='<a href="#nowhere">x</a>'))
        done = subprocess.run(
            [sys.executable, CHECKER, "--book", self.book], capture_output=True, text=True
        )
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn("BROKEN", done.stdout)
        done = subprocess.run(
            [sys.executable, CHECKER, "--book", os.path.join(self.dir.name, "nope")],
            capture_output=True,
            text=True,
        )
        self.assertEqual(done.returncode, 2)
        self.assertIn("--book", done.stderr)


if __name__ == "__main__":
    unittest.main()
