#!/usr/bin/env python3
"""Refuses, in the Apple check copy, the declarations an Apple platform does not have.

    python3 Scripts/apple_availability.py --platform iOS --map COPY_DIR=SOURCE_DIR... DUMP...

Each DUMP is what `swiftc -dump-ast` printed for a module of the check copy (Scripts/apple_check_copy.py): every
reference there names the declaration the compiler resolved it to (`decl="FoundationEssentials.(file).FileManager.
homeDirectoryForCurrentUser"`, `bind=` for a type's name, `(member decl=` in a key path), so a match is by
meaning, not by spelling — a chain of members, a key path or an implicit `self` cannot hide it; a type is also
matched by name in the types nodes are given (a parameter, a cast, a superclass). Not seen: a conformance whose
witness is an unavailable member (the dump does not print witnesses). Two rules, each reported at the original file and line (`--map` turns a copy's
folder back into the source folder):

1. UNAVAILABLE: Foundation and C declarations that Apple's documentation lists for macOS only (or not for tvOS and
   watchOS). Linux's Foundation has no availability marks, so a Linux build accepts them all; Apple's compiler
   refuses them ("'homeDirectoryForCurrentUser' is unavailable in iOS"). The list is short and maintained by hand:
   add a declaration when Sesame starts to use one, after reading its availability on developer.apple.com.
2. LINUX_ONLY: spellings that exist only in Glibc — Linux-only calls and constants, and `.rawValue` on the Swift
   enums Glibc's C enums import as (`RUSAGE_SELF.rawValue`; Darwin's `RUSAGE_SELF` is a plain Int32). The check
   compiles Glibc where Darwin's C library would be, so these are accepted unless the reference lies inside a
   Linux-only `#if` clause of the file compiled (every `||` alternative of its condition names Glibc, Musl, one of
   our Linux-only C modules, or `!canImport(Darwin)`; `os(Linux)` clauses are already `false` in the check copy).
   The list is short: a Glibc struct member or initializer it does not name passes (see CONTRIBUTING.md).
"""

import argparse
import re
import sys

APPLE = ("macOS", "iOS", "tvOS", "watchOS", "visionOS")
NOT_MAC = ("iOS", "tvOS", "watchOS", "visionOS")
NOT_TV_WATCH = ("tvOS", "watchOS")

# (declaration, platforms where it is unavailable, what Apple says). A type's entry covers its initializers and
# members. Foundation: developer.apple.com's availability lists (read December 2026). C: the marks in the SDK's
# headers (__API_UNAVAILABLE, __WATCHOS_PROHIBITED, __TVOS_PROHIBITED); visionOS inherits iOS's marks.
UNAVAILABLE = [
    ("FileManager.homeDirectoryForCurrentUser", NOT_MAC, "macOS 10.12+ only; URL.homeDirectory is everywhere"),
    ("FileManager.homeDirectory(forUser:)", NOT_MAC, "macOS 10.12+ only"),
    ("FileManager.unmountVolume", NOT_MAC, "macOS 10.11+ only"),
    ("FileManager.trashItem(at:resultingItemURL:)", NOT_TV_WATCH, "not on tvOS or watchOS"),
    ("ProcessInfo.userName", NOT_MAC, "macOS 10.12+ only; NSUserName() is everywhere"),
    ("ProcessInfo.fullUserName", NOT_MAC, "macOS 10.12+ only; NSFullUserName() is everywhere"),
    ("ProcessInfo.automaticTerminationSupportEnabled", NOT_MAC, "macOS 10.7+ only"),
    ("ProcessInfo.disableAutomaticTermination(_:)", NOT_MAC, "macOS 10.7+ only"),
    ("ProcessInfo.enableAutomaticTermination(_:)", NOT_MAC, "macOS 10.7+ only"),
    ("ProcessInfo.disableSuddenTermination()", NOT_MAC, "macOS 10.6+ only"),
    ("ProcessInfo.enableSuddenTermination()", NOT_MAC, "macOS 10.6+ only"),
    ("Process", NOT_MAC, "macOS 10.0+ and Mac Catalyst only (NSTask)"),
    ("Host", NOT_MAC, "macOS only"),
    ("DistributedNotificationCenter", NOT_MAC, "macOS and Mac Catalyst only"),
    ("NSAppleScript", NOT_MAC, "macOS and Mac Catalyst only"),
    ("NSUserUnixTask", NOT_MAC, "macOS 10.8+ only"),
    ("system", ("iOS", "tvOS", "watchOS", "visionOS"), "unavailable: use posix_spawn"),
    ("fork", NOT_TV_WATCH, "prohibited on watchOS and tvOS"),
    ("vfork", NOT_TV_WATCH, "prohibited on watchOS and tvOS"),
    ("execv", NOT_TV_WATCH, "prohibited on watchOS and tvOS"),
    ("execve", NOT_TV_WATCH, "prohibited on watchOS and tvOS"),
    ("execvp", NOT_TV_WATCH, "prohibited on watchOS and tvOS"),
    ("posix_spawn", NOT_TV_WATCH, "unavailable on watchOS and tvOS"),
    ("posix_spawn_file_actions_init", NOT_TV_WATCH, "unavailable on watchOS and tvOS"),
    ("posix_spawnattr_init", NOT_TV_WATCH, "unavailable on watchOS and tvOS"),
]

FOUNDATION = ("Foundation", "FoundationEssentials", "FoundationInternationalization", "FoundationNetworking")
LIBC = ("Glibc", "SwiftGlibc", "Musl", "Darwin")

# Linux-only calls and constants Sesame's sources use or may: Darwin has none of them.
LINUX_ONLY_NAMES = {
    "accept4", "pipe2", "epoll_create1", "epoll_ctl", "epoll_wait", "eventfd", "SOCK_CLOEXEC", "SOCK_NONBLOCK",
    "MSG_NOSIGNAL", "O_PATH", "prctl", "getrandom", "CLOCK_BOOTTIME",
    # struct members Darwin names otherwise (st_mtimespec, ...), and memberwise initializers of structs whose
    # fields differ (Darwin's sockaddr_in has sin_len first)
    "stat.st_mtim", "stat.st_atim", "stat.st_ctim",
}
LINUX_ONLY_FULL = {
    "sockaddr_in.init(sin_family:sin_port:sin_addr:sin_zero:)",
    "sockaddr_in6.init(sin6_family:sin6_port:sin6_flowinfo:sin6_addr:sin6_scope_id:)",
}
LINUX_ONLY_ENUM_RAW = re.compile(r"^__\w+\.rawValue$")  # Glibc's C enums: __socket_type, __rusage_who, ...
LINUX_TOKEN = re.compile(
    r"(?<!!)\b(canImport\((Glibc|Musl|CSesameEpoll|CSesameCurl|CSesameSecret|CSesameOpenSSL|CSQLite|"
    r"FoundationNetworking)\)|os\((Linux|Android)\))|!\s*canImport\(Darwin\)"
)


def linux_condition(condition):
    """Whether a clause's condition holds only off Apple platforms: every `||` alternative names a Linux-only
    module or platform (or `!canImport(Darwin)`)."""
    alternatives = [part for part in condition.split("||") if part.strip()]
    return bool(alternatives) and all(LINUX_TOKEN.search(part) for part in alternatives)


# Where a node is (`location=FILE:LINE:COL`, or the start of its `range=[FILE:LINE:COL - …]`), what a reference
# resolved to (`decl=`, a type name's `bind=`, an override's `override=`, a key path's `(member decl=`), and the
# types a node is given (which name a type only by its unqualified name).
LOCATION = re.compile(r"(?:location=|range=\[)(/?[^\s:\]]+\.swift):(\d+):\d+")
RESOLVED = re.compile(r'\b(?:decl|bind|override)="([^"]+)"')
TYPE_STRING = re.compile(r'\b(?:type|interface_type|result|typerepr)="([^"]+)"')
TYPE_NAME = re.compile(r"^[A-Z]\w*$")


def normalized(decl):
    """`FoundationEssentials.(file).FileManager.homeDirectoryForCurrentUser` -> (module, declaration)."""
    decl = decl.split(" [with ")[0].split("@")[0]
    module, _, rest = decl.partition(".(file).")
    return module, rest.replace(" extension.", ".")


def covers(entry, name):
    """A Swift declaration covers its members; a C function (no labels in its entry) is matched by name alone."""
    return name == entry or name.startswith(entry + ".") or name.startswith(entry + "(")


class LinuxRegions:
    """Which lines of a source file lie inside a Linux-only `#if` clause."""

    def __init__(self):
        self.cache = {}

    def linux_only(self, path, line):
        if path not in self.cache:
            self.cache[path] = self.scan(path)
        flags = self.cache[path]
        return 0 < line <= len(flags) and flags[line - 1]

    @staticmethod
    def scan(path):
        flags = []
        stack = []  # one entry per open #if: whether its current clause is Linux-only
        try:
            lines = open(path, encoding="utf-8").read().split("\n")
        except OSError:
            return flags
        for text in lines:
            directive = re.match(r"\s*#(if|elseif|else|endif)\b(.*)", text)
            if directive:
                kind, condition = directive.groups()
                linux = linux_condition(condition)
                if kind == "if":
                    stack.append(linux)
                elif kind == "elseif" and stack:
                    stack[-1] = linux
                elif kind == "else" and stack:
                    stack[-1] = False
                elif kind == "endif" and stack:
                    stack.pop()
            flags.append(any(stack))
        return flags


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--platform", required=True, choices=APPLE)
    parser.add_argument("--map", action="append", default=[], help="COPY_DIR=SOURCE_DIR")
    parser.add_argument("dumps", nargs="+")
    args = parser.parse_args()
    mapping = [tuple(item.split("=", 1)) for item in args.map]

    def original(path):
        for copy, source in mapping:
            if path.startswith(copy.rstrip("/") + "/"):
                return source.rstrip("/") + path[len(copy.rstrip("/")) :]
        return path

    regions = LinuxRegions()
    findings = set()
    type_entries = [(entry, platforms, why) for entry, platforms, why in UNAVAILABLE if TYPE_NAME.match(entry)]
    for dump in args.dumps:
        compiled, line = None, 0  # where the node being read is: its own location, else the last one seen
        sources = 0
        with open(dump, encoding="utf-8", errors="replace") as file:
            for text in file:
                if text.lstrip().startswith("(source_file "):
                    sources += 1
                where = LOCATION.search(text)
                if where:
                    compiled, line = where.group(1), int(where.group(2))
                if compiled is None:
                    continue
                path = original(compiled)
                for decl in RESOLVED.findall(text):
                    module, name = normalized(decl)
                    if module in FOUNDATION + LIBC:
                        for entry, platforms, why in UNAVAILABLE:
                            if args.platform in platforms and covers(entry, name):
                                findings.add(f"{path}:{line}: '{name}' is unavailable in {args.platform} ({why})")
                    if module in LIBC and (
                        name.split("(")[0] in LINUX_ONLY_NAMES
                        or name in LINUX_ONLY_FULL
                        or LINUX_ONLY_ENUM_RAW.match(name)
                    ):
                        if not regions.linux_only(compiled, line):  # the file compiled: its #if lines
                            findings.add(
                                f"{path}:{line}: '{name}' exists only in Glibc; put it in a Linux-only #if clause "
                                f"(it does not compile for {args.platform})"
                            )
                # A type named only in a type (a parameter, a cast, a superclass) is printed unqualified.
                for spelled in TYPE_STRING.findall(text):
                    for entry, platforms, why in type_entries:
                        if args.platform in platforms and re.search(rf"(?<![\w.]){entry}(?![\w])", spelled):
                            findings.add(f"{path}:{line}: '{entry}' is unavailable in {args.platform} ({why})")
        if sources == 0:
            sys.exit(f"apple_availability.py: {dump} holds no AST (an empty or failed dump would pass everything)")
    for finding in sorted(findings):
        print(f"error: {finding}")
    if findings:
        sys.exit(1)


if __name__ == "__main__":
    main()
