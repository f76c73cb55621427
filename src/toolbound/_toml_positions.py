"""Where each key of a TOML text sits: its line and column, by key path.

:mod:`tomllib` returns plain dictionaries and keeps no positions, and the TOML
libraries that do (``tomlkit``) are a dependency for one lookup. A configuration
error names the offending key's ``FILE:LINE:COLUMN``, so this module scans the
text once more, after :mod:`tomllib` has accepted it, and records where every key
starts: table headers (``[a.b]``; ``[[a]]`` counts its entries from 0, as the
parsed arrays do), keys and dotted keys, and the keys inside inline tables and
arrays (``limits = [{ kind = "rate", ... }]``). Strings, comments and multi-line
arrays are stepped over. It never judges the text (tomllib did), so it stays
small and lenient: a key it cannot place is found through its nearest placed
ancestor.
"""

from __future__ import annotations

from typing import Final, TypeAlias

__all__ = ["KeyPath", "Position", "key_positions", "locate"]

KeyPath: TypeAlias = tuple[str | int, ...]
Position: TypeAlias = tuple[int, int]

_BARE: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def key_positions(text: str) -> dict[KeyPath, Position]:
    """Every key path of ``text`` → the 1-based line and column where its key starts."""
    scanner = _Scanner(text)
    scanner.document()
    return scanner.found


def locate(positions: dict[KeyPath, Position], path: KeyPath) -> Position | None:
    """The position of ``path``, else of its nearest ancestor that has one."""
    for end in range(len(path), 0, -1):
        found = positions.get(path[:end])
        if found is not None:
            return found
    return None


class _Scanner:
    """A cursor over the text that records key positions as it steps over values."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.found: dict[KeyPath, Position] = {}
        self.arrays: dict[KeyPath, int] = {}  # [[table]] entries seen, by concrete path

    def position(self, at: int) -> Position:
        line = self.text.count("\n", 0, at) + 1
        return line, at - (self.text.rfind("\n", 0, at) + 1) + 1

    def peek(self, ahead: int = 0) -> str:
        at = self.i + ahead
        return self.text[at] if at < len(self.text) else ""

    def blank(self, *, newlines: bool) -> None:
        """Step over spaces, comments and (if ``newlines``) line ends."""
        while self.i < len(self.text):
            char = self.text[self.i]
            if char in " \t\r" or (newlines and char == "\n"):
                self.i += 1
            elif char == "#":
                end = self.text.find("\n", self.i)
                self.i = len(self.text) if end < 0 else end
            else:
                return

    def document(self) -> None:
        table: KeyPath = ()
        while True:
            self.blank(newlines=True)
            if self.i >= len(self.text):
                return
            if self.peek() == "[":
                table = self.header()
            else:
                self.assignment(table)

    def header(self) -> KeyPath:
        start = self.i
        array = self.peek(1) == "["
        self.i += 2 if array else 1
        keys = self.keys()
        self.i += 2 if array else 1
        path: KeyPath = ()
        for n, key in enumerate(keys):
            path = (*path, key)
            if array and n == len(keys) - 1:
                index = self.arrays.get(path, -1) + 1
                self.arrays[path] = index
                self.found.setdefault(path, self.position(start))
                path = (*path, index)
            elif path in self.arrays:
                path = (*path, self.arrays[path])
        self.found[path] = self.position(start)
        return path

    def keys(self) -> list[str]:
        """A (dotted) key: its parts, the cursor left after it."""
        parts: list[str] = []
        while True:
            self.blank(newlines=False)
            if self.peek() in "\"'":
                parts.append(self.string())
            else:
                start = self.i
                while self.peek() in _BARE and self.peek():
                    self.i += 1
                parts.append(self.text[start : self.i])
            self.blank(newlines=False)
            if self.peek() != ".":
                return parts
            self.i += 1

    def assignment(self, table: KeyPath) -> None:
        start = self.i
        path = (*table, *self.keys())
        self.found[path] = self.position(start)
        self.blank(newlines=False)
        self.i += 1  # "="
        self.value(path)

    def value(self, path: KeyPath) -> None:
        self.blank(newlines=False)
        char = self.peek()
        if char in "\"'":
            self.string()
        elif char == "{":
            self.i += 1
            while True:
                self.blank(newlines=True)
                if self.peek() in {"}", ""}:
                    self.i += 1
                    return
                if self.peek() == ",":
                    self.i += 1
                    continue
                self.assignment(path)
        elif char == "[":
            self.array(path)
        else:
            while self.peek() and self.peek() not in ",]}\n#":
                self.i += 1

    def array(self, path: KeyPath) -> None:
        self.i += 1
        index = 0
        while True:
            self.blank(newlines=True)
            if self.peek() in {"]", ""}:
                self.i += 1
                return
            if self.peek() == ",":
                self.i += 1
                index += 1
                continue
            self.found[(*path, index)] = self.position(self.i)
            self.value((*path, index))

    def string(self) -> str:
        """A basic or literal string, single- or multi-line: its text (escapes kept)."""
        quote = self.peek()
        triple = self.text.startswith(quote * 3, self.i)
        delimiter = quote * 3 if triple else quote
        self.i += len(delimiter)
        start = self.i
        while self.i < len(self.text) and not self.text.startswith(delimiter, self.i):
            self.i += 2 if quote == '"' and self.peek() == "\\" else 1
        body = self.text[start : self.i]
        self.i += len(delimiter)
        while triple and self.peek() == quote:  # up to two quotes may end the body
            body += quote
            self.i += 1
        return body
