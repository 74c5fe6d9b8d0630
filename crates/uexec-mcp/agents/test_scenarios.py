"""The checks of scenarios.py on texts agents really handed back (recorded from runs), so a
check that cannot fail would show here: `python3 -m unittest test_scenarios` (run.sh runs it
before the agents)."""

from __future__ import annotations

import sys
import unittest

sys.dont_write_bytecode = True

from approval import refused_naming, rows_match  # noqa: E402
from mock_model import Record, Call  # noqa: E402
from scenarios import (exit_stated, has_line, names_no_session, task_started, plain_text, result_of_notification,  # noqa: E402
                       session_named, session_stated, task_notification, terminated, transcript_named, unknown_session_error,
                       wall_time_at_least)

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

# Interactive Claude Code 2.1.332 with 0660bdc's uexec: what it tells the model of a task it
# moved to the background, and the model's next turn once the task completed (the
# notification: the result's structuredContent, the first window and the wall time lost).
CLAUDE_TASK_STARTED = ('MCP tool "uexec/exec_command" started server-side task 16e591ab-8ba8-481b-89fb-90c58f624574. '
                       "It was moved to the background as task kzn751s76 and keeps running on the server; you'll "
                       "receive a notification with the result when it completes, and you can keep working in the "
                       'meantime. To stop it, use TaskStop with task_id "kzn751s76"; the result arrives as a task notification.')
CLAUDE_NOTIFICATION_JSON = """<system-reminder>
[SYSTEM NOTIFICATION - NOT USER INPUT]
This is an automated background-task event, NOT a message from the user.

<task-notification>
<task-id>kzn751s76</task-id>
<status>completed</status>
<summary>MCP task 16e591ab-8ba8-481b-89fb-90c58f624574 (uexec/exec_command) completed.</summary>
<result>
{"chunk_id":"e7d96e","cpu_seconds":0.004,"exit_code":0,"original_token_count":3,"output":"tick\\ndone\\n","reason":"exited","transcript":"/tmp/x/home/.local/state/uexec/sessions/7900-22ffe4","wall_time_seconds":0}
</result>
</task-notification>
</system-reminder>"""
# The same notification with a result in words, as issue 38 asks for.
CLAUDE_NOTIFICATION_TEXT = CLAUDE_NOTIFICATION_JSON.replace(
    CLAUDE_NOTIFICATION_JSON[CLAUDE_NOTIFICATION_JSON.index("{"):CLAUDE_NOTIFICATION_JSON.index("}") + 1],
    "Session ID 7900 exited with code 0\nWall time: 3.0125 seconds\nTranscript: /tmp/x/sessions/7900-22ffe4\n"
    "Output:\nfinished")


class Tasks(unittest.TestCase):
    def test_a_task_started_is_no_session_id(self):
        self.assertIsNone(names_no_session(CLAUDE_TASK_STARTED))
        self.assertIsNotNone(names_no_session(TEXT_RUNNING))

    def test_a_task_started_is_told_as_one(self):
        self.assertIsNone(task_started(CLAUDE_TASK_STARTED))
        self.assertIsNotNone(task_started(TEXT_RUNNING))
        # 0660bdc, which did not know the argument yet.
        self.assertIsNotNone(task_started("exec_command failed: invalid arguments: background: unknown field "
                                          "(expected one of: cmd, workdir)"))

    def test_the_notification_is_found_and_its_result_read(self):
        self.assertIsNone(task_notification(CLAUDE_NOTIFICATION_JSON))
        self.assertIsNotNone(task_notification(CLAUDE_TASK_STARTED))
        self.assertIsNotNone(task_notification(CLAUDE_NOTIFICATION_JSON.replace("completed</status>", "failed</status>")))

    def test_a_json_result_in_the_notification_fails_every_fact(self):
        text = CLAUDE_NOTIFICATION_JSON
        self.assertIsNotNone(result_of_notification(plain_text)(text))
        self.assertIsNotNone(session_named(text))
        self.assertIsNotNone(exit_stated(0)(text))
        self.assertIsNotNone(wall_time_at_least(2.5)(text))
        self.assertIsNotNone(has_line("finished")(text))

    def test_a_result_in_words_passes(self):
        text = CLAUDE_NOTIFICATION_TEXT
        self.assertIsNone(result_of_notification(plain_text)(text))
        self.assertIsNone(session_named(text))
        self.assertIsNone(exit_stated(0)(text))
        self.assertIsNone(wall_time_at_least(2.5)(text))
        self.assertIsNone(transcript_named(text))
        self.assertIsNone(has_line("finished")(text))

    def test_the_whole_run_s_wall_time_is_any_duration_stated(self):
        # d43a195's wait task: the run's time in its first line, the last window's below.
        text = "Session 35855 (echo started; sleep 3; echo finished) exited with code 0 after 3.0 s.\nWall time: 2.2054 seconds"
        self.assertIsNone(wall_time_at_least(2.5)(text))
        self.assertIsNotNone(wall_time_at_least(2.5)("Wall time: 2.2054 seconds"))
        self.assertIsNone(session_named(text))

    def test_terminated_in_words(self):
        self.assertIsNone(terminated("Session 51007 was terminated"))
        self.assertIsNotNone(terminated(TEXT_RUNNING))


# uexec's refusal of a held command no one could be asked about (the TS SDK on 2026-07-28).
REFUSED_PROMPT = ('exec_command failed: refused: prompt by rule /tmp/x/team.rules:1 (prefix "touch"): "it writes files", '
                  "matched by touch made; no answer: no person can be asked here. Nothing of the command ran")


class Approval(unittest.TestCase):
    def test_a_refusal_must_name_each_thing_and_say_nothing_ran(self):
        self.assertIsNone(refused_naming("team.rules", 'prefix "touch"', "it writes files")(REFUSED_PROMPT))
        self.assertIsNotNone(refused_naming("pushing is for people")(REFUSED_PROMPT))
        self.assertIsNotNone(refused_naming()(REFUSED_PROMPT.replace(" Nothing of the command ran", "")))
        self.assertIsNotNone(refused_naming()(TEXT_EXITED))

    def test_the_record_must_hold_each_decision_in_order(self):
        rows = [{"decision": "forbidden", "outcome": "refused", "by": "rules"},
                {"decision": "allow", "outcome": "admitted", "by": "no rule"}]
        want = [("forbidden", "refused", "^rules$"), ("allow", "admitted", "no rule")]
        self.assertIsNone(rows_match(rows, want))
        self.assertIsNotNone(rows_match(rows[:1], want))
        self.assertIsNotNone(rows_match(rows[::-1], want))
        self.assertIsNotNone(rows_match([{**rows[0], "outcome": "admitted"}, rows[1]], want))
        self.assertIsNotNone(rows_match([{**rows[0], "by": "the person"}, rows[1]], want))


if __name__ == "__main__":
    unittest.main()
