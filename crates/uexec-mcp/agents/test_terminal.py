"""The screen model of terminal.py on output as Claude Code's Ink writes it (words placed by
absolute columns, lines redrawn after a cursor-up, escape sequences cut between two reads):
`python3 -m unittest test_terminal` (run.sh runs it before the agents)."""

from __future__ import annotations

import sys
import unittest

sys.dont_write_bytecode = True

from terminal import Screen, plain, split_incomplete  # noqa: E402


class ScreenModel(unittest.TestCase):
    def test_words_placed_by_column(self):
        s = Screen(40, 5)
        s.feed("\x1b[2G\x1b[38;5;211mUnable\x1b[9Gto\x1b[12Gconnect\x1b[39m\r\r\n")
        self.assertEqual(s.text(), " Unable to connect")

    def test_a_redrawn_line_replaces_the_old_one(self):
        s = Screen(40, 5)
        s.feed("  ❯ * answer: Type something…\r\n    Accept    Decline\r\n")
        s.feed("\x1b[2A\r\x1b[2K  ❯ ✔ answer: y\r\n")
        self.assertEqual(s.text().splitlines(), ["  ❯ ✔ answer: y", "    Accept    Decline"])

    def test_scrolls_at_the_bottom(self):
        s = Screen(10, 2)
        s.feed("one\r\ntwo\r\nthree")
        self.assertEqual(s.text().splitlines(), ["two", "three"])

    def test_the_alternate_screen_starts_empty(self):
        s = Screen(10, 3)
        s.feed("old\r\n\x1b[?1049hnew")
        self.assertEqual(s.text(), "new")


class Stream(unittest.TestCase):
    def test_plain_text_keeps_words_apart(self):
        self.assertEqual(plain("\x1b[2GMCP\x1b[6Gserver\x1b]11;?\x07 x"), " MCP server x")

    def test_an_escape_cut_between_two_reads_is_held_back(self):
        done, held = split_incomplete("ab\x1b[3")
        self.assertEqual((done, held), ("ab", "\x1b[3"))
        done, held = split_incomplete(held + "8;5;211mc")
        self.assertEqual((done, held), ("\x1b[38;5;211mc", ""))


if __name__ == "__main__":
    unittest.main()
