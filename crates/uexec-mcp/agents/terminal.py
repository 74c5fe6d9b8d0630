"""A program on a pseudo-terminal, read by a thread, for the agents that only show a person
what they do (interactive Claude Code): start it, wait for what its screen shows, type.

The screen is not emulated: `text()` is everything the program wrote, with the escape
sequences taken out (a cursor move to the right becomes that many spaces, as Ink draws a
space), which is enough to wait for words it prints. Every wait is on that text, with a
deadline: no sleep stands for "it is ready".
"""

from __future__ import annotations

import codecs
import fcntl
import os
import re
import signal
import struct
import subprocess
import termios
import threading
import time

# CSI (with its parameters), OSC (to BEL or ST), other escapes, and the C0 controls that
# draw nothing. Ink places words with absolute columns (CSI n G) and moves right (CSI n C):
# both become a space in the stream's text, so that words stay apart.
_MOVES = re.compile(r"\x1b\[\d*[CG]")
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_][^\x1b]*\x1b\\"
                      r"|\x1b[()][0-9A-Za-z]|\x1b[@-Z\\-_=>78]|[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f]")


def plain(raw: str) -> str:
    """The printable text of terminal output, in the order it was written: escapes removed,
    a cursor move to a column as one space."""
    return _ESCAPES.sub("", _MOVES.sub(" ", raw)).replace("\r", "")


class Screen:
    """The screen the output draws, as far as the programs here draw it: printable text,
    CR, LF, BS, cursor moves (CSI A B C D E F G H d f), erasing (CSI J K), scrolling at the
    bottom, the alternate screen. Colours and modes are ignored."""

    def __init__(self, cols: int, rows: int):
        self.cols, self.rows = cols, rows
        self.grid = [[" "] * cols for _ in range(rows)]
        self.x = self.y = 0

    def _scroll(self) -> None:
        self.grid.pop(0)
        self.grid.append([" "] * self.cols)

    def _erase(self, y: int, x0: int, x1: int) -> None:
        for x in range(max(0, x0), min(self.cols, x1)):
            self.grid[y][x] = " "

    _TOKEN = re.compile(r"\x1b\[([0-?]*)[ -/]*([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_][^\x1b]*\x1b\\"
                        r"|\x1b[()][0-9A-Za-z]|\x1b.|([^\x1b]+)", re.S)

    def feed(self, text: str) -> None:
        for m in self._TOKEN.finditer(text):
            if m.group(3) is not None:
                for ch in m.group(3):
                    self._put(ch)
            elif m.group(2):
                self._csi(m.group(1), m.group(2))

    def _put(self, ch: str) -> None:
        if ch == "\r":
            self.x = 0
        elif ch == "\n":
            self.y += 1
            if self.y >= self.rows:
                self.y = self.rows - 1
                self._scroll()
        elif ch == "\b":
            self.x = max(0, self.x - 1)
        elif ch >= " " and ch != "\x7f":
            if self.x >= self.cols:
                self.x = 0
                self._put("\n")
            self.grid[self.y][self.x] = ch
            self.x += 1

    def _csi(self, params: str, final: str) -> None:
        private = params.startswith("?")
        nums = [int(p) if p.isdigit() else 0 for p in params.lstrip("?<=>").split(";")]
        n = nums[0] or 1
        if private:
            if final in "hl" and nums[0] in (47, 1047, 1049):
                self.grid = [[" "] * self.cols for _ in range(self.rows)]
                self.x = self.y = 0
            return
        if final == "A":
            self.y = max(0, self.y - n)
        elif final == "B":
            self.y = min(self.rows - 1, self.y + n)
        elif final == "C":
            self.x = min(self.cols - 1, self.x + n)
        elif final == "D":
            self.x = max(0, self.x - n)
        elif final == "E":
            self.x, self.y = 0, min(self.rows - 1, self.y + n)
        elif final == "F":
            self.x, self.y = 0, max(0, self.y - n)
        elif final == "G":
            self.x = min(self.cols - 1, n - 1)
        elif final == "d":
            self.y = min(self.rows - 1, n - 1)
        elif final in "Hf":
            self.y = min(self.rows - 1, n - 1)
            self.x = min(self.cols - 1, (nums[1] if len(nums) > 1 and nums[1] else 1) - 1)
        elif final == "J":
            mode = nums[0]
            if mode == 0:
                self._erase(self.y, self.x, self.cols)
                for y in range(self.y + 1, self.rows):
                    self._erase(y, 0, self.cols)
            elif mode == 1:
                for y in range(0, self.y):
                    self._erase(y, 0, self.cols)
                self._erase(self.y, 0, self.x + 1)
            else:
                for y in range(self.rows):
                    self._erase(y, 0, self.cols)
        elif final == "K":
            mode = nums[0]
            if mode == 0:
                self._erase(self.y, self.x, self.cols)
            elif mode == 1:
                self._erase(self.y, 0, self.x + 1)
            else:
                self._erase(self.y, 0, self.cols)

    def text(self) -> str:
        lines = ["".join(row).rstrip() for row in self.grid]
        while lines and not lines[-1]:
            lines.pop()
        return "\n".join(lines)


_COMPLETE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_][^\x1b]*\x1b\\"
                       r"|\x1b[()].|\x1b[^\[\]PX^_()]")


def split_incomplete(text: str) -> tuple[str, str]:
    """The text up to an escape sequence the chunk cut off, and that unfinished sequence."""
    at = text.rfind("\x1b", max(0, len(text) - 4096))
    if at < 0 or _COMPLETE.match(text, at):
        return text, ""
    return text[:at], text[at:]


class Terminal:
    """One process on a PTY of `cols` x `rows`, in its own session (its process group is the
    PTY's foreground one, as in a real terminal), its output read by a thread."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str, cols: int = 160, rows: int = 50):
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.master = master
        self.proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=slave, stdout=slave, stderr=slave,
                                     start_new_session=True, close_fds=True,
                                     preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)
        self.raw = bytearray()
        self.screen = Screen(cols, rows)
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._held = ""
        self.cond = threading.Condition()
        self.closed = False
        self.t0 = time.monotonic()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # EIO: every slave end closed (the program and its children left)
                chunk = b""
            with self.cond:
                if not chunk:
                    self.closed = True
                    self.cond.notify_all()
                    return
                self.raw += chunk
                done, self._held = split_incomplete(self._held + self._decoder.decode(chunk))
                self.screen.feed(done)
                self.cond.notify_all()

    def text(self, since: int = 0) -> str:
        with self.cond:
            raw = bytes(self.raw[since:])
        return plain(raw.decode("utf-8", "replace"))

    def screen_text(self) -> str:
        """What the screen shows now."""
        with self.cond:
            return self.screen.text()

    def wait_screen(self, predicate, timeout: float) -> bool:
        """Whether the screen came to hold `predicate` (a function of its text) within
        `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                if predicate(self.screen.text()):
                    return True
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    return False
                self.cond.wait(timeout=min(left, 1.0))

    def mark(self) -> int:
        """Where the output is now: `wait_for(..., since=mark)` looks only at what comes after."""
        with self.cond:
            return len(self.raw)

    def wait_for(self, pattern: str | re.Pattern[str], timeout: float, since: int = 0) -> re.Match[str] | None:
        """The first match of `pattern` in the text written after `since`, waiting for it at
        most `timeout` seconds (None then, or when the program closed its terminal)."""
        rx = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                m = rx.search(plain(bytes(self.raw[since:]).decode("utf-8", "replace")))
                if m or self.closed:
                    return m
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(timeout=min(left, 1.0))

    def type(self, data: str | bytes) -> None:
        """Bytes as keys typed on the terminal."""
        if isinstance(data, str):
            data = data.encode()
        os.write(self.master, data)

    def wait(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace: float = 5.0) -> int:
        """SIGTERM the program's process group, SIGKILL it after `grace` seconds; its exit code."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            rc = self.wait(grace)
            if rc is not None:
                return rc
        return self.proc.wait()

    def close(self) -> None:
        try:
            os.close(self.master)
        except OSError:
            pass
        self.reader.join(timeout=5)
