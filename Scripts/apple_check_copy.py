#!/usr/bin/env python3
"""Writes the Apple check copy of Swift sources: the files as an Apple platform's compiler would read them, as far
as a Linux compiler can be made to.

    python3 Scripts/apple_check_copy.py --platform iOS [--objc] --out DIR SOURCE_DIR...
    swiftc ... 2>&1 | python3 Scripts/apple_check_copy.py --filter COPY_DIR SOURCE_DIR   (diagnostics that count)

For each `.swift` file under each SOURCE_DIR it writes DIR/<SOURCE_DIR's name>/<same relative path> with these
changes, on the same lines (a diagnostic's line number is the original's):

1. Platform conditions. In `#if` and `#elseif` lines, `os(NAME)` becomes `true` for the platform checked and `false`
   for every other, and `targetEnvironment(...)` becomes `false`: the iOS branches are compiled when checking iOS,
   the macOS ones when checking macOS, and the Linux ones never. `canImport(...)` is left to the compiler: Glibc
   stands in for Darwin's C library, which Linux has not (the `canImport(Darwin)` halves stay unchecked).
2. Address-only structs. Every struct gets one more stored property, `var _sesameAddressOnly:
   CollectionDifference<Int>? = nil`, of a standard-library type whose layout is resilient. On Apple platforms
   Foundation is built with library evolution, so a struct holding a `Date`, `URL` or `Data` there is address-only,
   and a closure that reads `self` inside a mutating access to another stored property is an exclusivity error that
   Linux, where Foundation's types are fixed-layout, never reports. With the property, Linux reports it too (when
   the copy is compiled to SIL: `-typecheck` does not run those diagnostics). It has a default value, so callers of
   a memberwise initializer are unchanged; a struct that inherits `OptionSet` or `RawRepresentable` gets it as a
   `let` instead, which keeps it out of the memberwise `init(rawValue:)` that is its conformance.
3. NSObject's module, with --objc (for Apple-only code: SesameApple, the iOS example, whose NSObject subclasses meet
   only the Apple stand-ins; a portable module's class adopting a Linux Foundation protocol such as
   URLSessionTaskDelegate needs Linux's NSObject). `NSObject` and `NSObjectProtocol` become `ObjectiveC.NSObject` and `ObjectiveC.NSObjectProtocol`
   (Checks/AppleStubs/ObjectiveC.swift), and a line importing Foundation also imports ObjectiveC with the same access
   level, as Apple's Foundation re-exports it: a `public import Foundation` whose only public use is NSObject gets
   the warning Apple's compiler gives. (The check ignores warnings about the added ObjectiveC import itself.)
"""

import argparse
import os
import re
import sys

PLATFORMS = ("macOS", "iOS", "tvOS", "watchOS", "visionOS")
INJECTED = "var _sesameAddressOnly: CollectionDifference<Int>? = nil; "
# For OptionSet and RawRepresentable structs: a `let` with a value is not in the memberwise init(rawValue:) that is
# their conformance (a `var` would be). Elsewhere a `var`: `self = other` in an init needs it, and a Decodable struct
# would warn that a `let` with a value is not decoded.
INJECTED_LET = "let _sesameAddressOnly: CollectionDifference<Int>? = nil; "
# A regex literal (`/…/` where an expression may start, or `#/…/#`), so that a quote or `struct` inside it is
# neither a string nor a declaration.
REGEX_LITERAL = re.compile(r"#+/.*?/#+|/(?![\s/*=])(?:\\.|[^/\\\n])+/")
REGEX_BEFORE = set("(,=:[{!&|?;+-*<>^~")
OBJC_NAMES = ("NSObject", "NSObjectProtocol")
FOUNDATION_IMPORT = re.compile(r"^(\s*)((?:(?:public|package|internal|fileprivate|private|@preconcurrency)\s+)*)import Foundation\s*$")


def rewrite_condition(line, platform):
    """Replaces os(...) and targetEnvironment(...) in a `#if`/`#elseif` line."""

    def os_value(match):
        name = match.group(1)
        return "true" if name == platform or (platform == "visionOS" and name == "xrOS") else "false"

    line = re.sub(r"\bos\(\s*(\w+)\s*\)", os_value, line)
    line = re.sub(r"\bcanImport\(\s*FoundationNetworking\s*\)", "false", line)
    return re.sub(r"\btargetEnvironment\(\s*\w+\s*\)", "false", line)


def rewrite_code(text, objc):
    """Outside comments, string and regex literals: adds the resilient property after the opening brace of every
    struct declaration, and (with objc) spells NSObject and NSObjectProtocol as ObjectiveC's."""
    out = []
    i = 0
    n = len(text)
    pending_struct = False  # saw `struct Name`, waiting for its `{`
    header = []  # the struct's header so far: its inheritance clause decides
    last = ""  # the last character of code (not of a comment), to tell `.struct` and a regex's opening slash
    identifier = re.compile(r"[A-Za-z_]\w*")
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(text[i:end])
            i = end
            continue
        if text.startswith("/*", i):  # Swift's block comments nest
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(text[i:j])
            i = j
            continue
        if c == '"' or (c == "#" and re.match(r'#+"', text[i : i + 8])):
            i = copy_string(text, i, out)
            last = '"'
            continue
        regex = REGEX_LITERAL.match(text, i) if c in "#/" and (last == "" or last in REGEX_BEFORE) else None
        if regex:
            out.append(regex.group(0))
            i = regex.end()
            last = "/"
            continue
        if c == "{" and pending_struct:
            raw = re.search(r"\b(OptionSet|RawRepresentable)\b", "".join(header))
            out.append("{ " + (INJECTED_LET if raw else INJECTED))
            pending_struct = False
            last = "{"
            i += 1
            continue
        word = identifier.match(text, i) if (c.isalpha() or c == "_") else None
        if word and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] in "_$")):
            name = word.group(0)
            after_dot = last == "."
            if name == "struct" and not after_dot and re.match(r"\s+[A-Za-z_]", text[word.end() :]):
                pending_struct = True
                header = []
            elif objc and name in OBJC_NAMES and not after_dot:
                name = "ObjectiveC." + name
            out.append(name)
            if pending_struct and word.group(0) != "struct":
                header.append(name)
            i = word.end()
            last = "a"
            continue
        if pending_struct:
            header.append(c)
        if not c.isspace():
            last = c
        out.append(c)
        i += 1
    return "".join(out)


def copy_string(text, i, out):
    """Copies a string literal (plain, multi-line or raw) starting at i; returns the index after it."""
    hashes = 0
    while text[i + hashes] == "#":
        hashes += 1
    start = i
    i += hashes
    multi = text.startswith('"""', i)
    quote = '"""' if multi else '"'
    i += len(quote)
    close = quote + "#" * hashes
    escape = "\\" + "#" * hashes
    depth = 0
    while i < len(text):
        if text.startswith(escape + "(", i):  # interpolation: skip to its matching parenthesis
            i += len(escape) + 1
            depth = 1
            while i < len(text) and depth:
                if text[i] == "(":
                    depth += 1
                elif text[i] == ")":
                    depth -= 1
                elif text[i] == '"':
                    sub = []
                    i = copy_string(text, i, sub)
                    continue
                i += 1
            continue
        if text.startswith(escape, i):
            i += len(escape) + 1
            continue
        if text.startswith(close, i):
            i += len(close)
            break
        i += 1
    out.append(text[start:i])
    return i


def convert(text, platform, objc):
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if re.match(r"\s*#(if|elseif)\b", line):
            lines[index] = rewrite_condition(line, platform)
        found = FOUNDATION_IMPORT.match(line)
        if found:  # Apple's Foundation has URLSession, and re-exports ObjectiveC
            lines[index] = f"{line.rstrip()}; {found.group(2)}import FoundationNetworking"
            if objc:
                lines[index] += f"; {found.group(2)}import ObjectiveC"
    return rewrite_code("\n".join(lines), objc)


def filter_diagnostics(output, copy, source):
    """The compiler's errors and warnings about the copy, as Apple's compiler would give them, at the sources' paths.

    Every line that is an error or a warning counts (with a location or without: `<unknown>:0: warning: …`,
    `error: …`), except warnings about the imports the copy adds: those are the check's, not ours. Apple's Foundation
    is Linux's Foundation and FoundationNetworking together, so "public import of 'Foundation' was not used" holds
    only where the added FoundationNetworking import was not used publicly either (URLSessionTransport's public API
    is URLSession)."""
    located = re.compile(r"^(.+?):(\d+):\d+: (?:error|warning): ")
    counted = re.compile(r"(^|: )(error|warning): ")
    lines = [line for line in output.split("\n") if counted.search(line) and not line.startswith(" ")]
    unused = re.compile(r"(?:public|package) import of '(\w+)' was not used")

    def place(line):
        found = located.match(line)
        return found.group(1, 2) if found else None

    networking_unused = {place(line) for line in lines if "import of 'FoundationNetworking' was not used" in line}
    kept = []
    for line in lines:
        found = unused.search(line)
        if found and found.group(1) in ("ObjectiveC", "FoundationNetworking"):
            continue
        if found and found.group(1) == "Foundation" and place(line) not in networking_unused:
            continue
        kept.append(line.replace(copy.rstrip("/") + "/", source.rstrip("/") + "/"))
    return sorted(set(kept), key=kept.index)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--filter":  # --filter COPY_DIR SOURCE_DIR < compiler output
        for line in filter_diagnostics(sys.stdin.read(), sys.argv[2], sys.argv[3]):
            print(line)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--platform", required=True, choices=PLATFORMS)
    parser.add_argument("--out", required=True)
    parser.add_argument("--objc", action="store_true", help="NSObject from the ObjectiveC stand-in (Apple-only code)")
    parser.add_argument("sources", nargs="+")
    args = parser.parse_args()
    for source in args.sources:
        source = source.rstrip("/")
        for folder, _, files in os.walk(source):
            for name in files:
                if not name.endswith(".swift"):
                    continue
                path = os.path.join(folder, name)
                target = os.path.join(args.out, os.path.basename(source), os.path.relpath(path, source))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with open(path, encoding="utf-8") as file:
                    text = file.read()
                with open(target, "w", encoding="utf-8") as file:
                    file.write(convert(text, args.platform, args.objc))


if __name__ == "__main__":
    main()
