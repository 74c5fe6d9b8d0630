"""The checks of scenarios.py on texts agents really handed back (recorded from runs), so a
check that cannot fail would show here: `python3 -m unittest test_scenarios` (run.sh runs it
before the agents)."""

from __future__ import annotations

import sys
import unittest

sys.dont_write_bytecode = True

from mock_model import Record, Call  # noqa: E402
from scenarios import exit_stated, has_line, plain_text, session_stated, unknown_session_error  # noqa: E402

# Claude Code with a server that sends structuredContent: it shows the model the JSON.
CLAUDE_JSON = '{"chunk_id":"6384ec","original_token_count":5,"output":"print(6*7)\\r\\n42\\r\\n>>> ","session_id":91350,"wall_time_seconds":1.0006}'
# Codex 0.171.0 with the same server: its header, then the JSON.
CODEX_JSON = 'Wall time: 1.1072 seconds\nOutput:\n{"chunk_id":"3b76fb","exit_code":0,"original_token_count":5,"output":">>> ","wall_time_seconds":1.0}'
# Text-only results, as a terminal shows them (a PTY ends lines with CR LF).
TEXT_RUNNING = "Chunk ID: e101b8\nWall time: 2.0013 seconds\nProcess running with session ID 23975\nOriginal token count: 5\nOutput:\nprint(6*7)\r\n42\r\n>>> "
TEXT_EXITED = "Chunk ID: c5387d\nWall time: 2.1589 seconds\nProcess exited with code 0\nOriginal token count: 4\nOutput:\ntick 2\ntick 3\n"


class PlainText(unittest.TestCase):
    def test_a_json_object_shown_by_claude_code_fails(self):
        self.assertIsNotNone(plain_text(CLAUDE_JSON))

    def test_json_after_codex_header_fails(self):
        self.assertIsNotNone(plain_text(CODEX_JSON))

    def test_escaped_line_breaks_in_a_non_json_line_fail(self):
        self.assertIsNotNone(plain_text("Output: tick 1\\ntick 2"))

    def test_terminal_text_passes(self):
        self.assertIsNone(plain_text(TEXT_RUNNING))
        self.assertIsNone(plain_text(TEXT_EXITED))


class Facts(unittest.TestCase):
    def test_a_line_42_is_found_only_as_its_own_line(self):
        self.assertIsNone(has_line("42")(TEXT_RUNNING))
        self.assertIsNotNone(has_line("42")(CLAUDE_JSON))
        self.assertIsNotNone(has_line("42")("4242\n"))

    def test_session_id_in_words_not_in_json(self):
        self.assertIsNone(session_stated(TEXT_RUNNING))
        self.assertIsNotNone(session_stated(CLAUDE_JSON))

    def test_exit_code_in_words_and_its_value(self):
        self.assertIsNone(exit_stated(0)(TEXT_EXITED))
        self.assertIsNotNone(exit_stated(1)(TEXT_EXITED))
        self.assertIsNotNone(exit_stated()(CODEX_JSON))

    def test_unknown_session_error_names_the_session(self):
        check = unknown_session_error(999999)
        self.assertIsNone(check("write_stdin failed: Unknown process id 999999"))
        self.assertIsNotNone(check("write_stdin failed: Unknown process id"))
        self.assertIsNotNone(check("Process running with session ID 999999"))


class SessionIdForThePoll(unittest.TestCase):
    def test_read_from_text_and_from_json(self):
        call = Call("exec_command", {}, "")
        self.assertEqual(Record(call, text=TEXT_RUNNING).session_id(), 23975)
        self.assertEqual(Record(call, text=CLAUDE_JSON).session_id(), 91350)
        self.assertIsNone(Record(call, text=TEXT_EXITED).session_id())


if __name__ == "__main__":
    unittest.main()
