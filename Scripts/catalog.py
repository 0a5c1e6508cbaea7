#!/usr/bin/env python3
"""Every ID of the security catalog is named by a test title (`@Test("BCP-07 …: …")`) or by the "Not supported,
and why" table of the DocC article "OpenID Connect conformance"; the article's ID-to-test table is generated here.

    python3 Scripts/catalog.py            # rewrites the generated table in OIDCConformance.md, prints the count
    python3 Scripts/catalog.py --check    # exits 1 when an ID is in neither place, or the table is out of date (CI)

Which IDs count: those written out in full ("RP-02..RP-37" names two) before the first ':' of a test's title, the
title being the string literal right after `@Test(`; and the first cell of a row of the not-supported table.

The catalog is $SESAME_CATALOG, else ../shared/SECURITY-CATALOG.md beside the clone. Without it (a clone outside the
team's machines) the IDs of the committed table stand for the catalog: every one must still be named by a test or be
in the not-supported table, so a renamed or deleted test still fails the check; only new catalog IDs go unseen.
"""
import glob
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CATALOG = os.environ.get("SESAME_CATALOG") or os.path.join(ROOT, "..", "shared", "SECURITY-CATALOG.md")
ARTICLE = os.path.join(ROOT, "Sources", "Sesame", "Sesame.docc", "OIDCConformance.md")
PREFIXES = "RP|ATK|WP|VEC|BCP|NAT|OIDC|DPOP|DEV|REV|LOGOUT|HTTP|STEP|TX|NSSO|PKJ"
ID = re.compile(r"\b((?:%s)-\d+)\b" % PREFIXES)
BEGIN = "<!-- catalog.py: generated from the test titles; do not edit by hand -->"
END = "<!-- catalog.py: end -->"


def catalog_ids():
    text = open(CATALOG, encoding="utf-8").read()
    # Only the IDs the catalog defines: the first cell of a table row, or a bolded or listed item.
    defined = set(re.findall(r"^\|\s*((?:%s)-\d+)\s*\|" % PREFIXES, text, re.M))
    defined |= set(re.findall(r"^[-*]\s+\**((?:%s)-\d+)\b" % PREFIXES, text, re.M))
    return sorted(defined, key=sort_key)


def sort_key(identifier):
    prefix, number = identifier.rsplit("-", 1)
    return (PREFIXES.split("|").index(prefix), int(number))


def test_titles():
    """(ids, "Suite.function", path) for every @Test whose title names IDs."""
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, "Tests", "**", "*.swift"), recursive=True)):
        text = open(path, encoding="utf-8").read()
        for match in re.finditer(r'@Test\(\s*"((?:[^"\\]|\\.)*)"', text):
            ids = ID.findall(match.group(1).split(":")[0])
            if not ids:
                continue
            function = re.search(r"\bfunc\s+(\w+)", text[match.end():])
            # The enclosing suite: the last top-level type declared before the test.
            suites = re.findall(
                r"^(?:@Suite\b[^\n]*?\s)?(?:final class|class|struct|extension|enum)\s+(\w+)", text[:match.start()], re.M)
            name = (suites[-1] + "." if suites else "") + (function.group(1) if function else "?")
            found.append((ids, name, os.path.relpath(path, ROOT)))
    return found


def unsupported_ids():
    text = open(ARTICLE, encoding="utf-8").read()
    section = text.split("## Not supported, and why", 1)
    if len(section) < 2:
        return set()
    body = section[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\|\s*((?:%s)-\d+)\s*\|" % PREFIXES, body, re.M))


def table(ids, tests, unsupported):
    by_id = {}
    for names, function, _ in tests:
        for identifier in names:
            by_id.setdefault(identifier, [])
            if function not in by_id[identifier]:
                by_id[identifier].append(function)
    lines = [BEGIN, "", "| ID | Tested by |", "|---|---|"]
    for identifier in ids:
        functions = by_id.get(identifier, [])
        cell = ", ".join("`%s`" % f for f in functions[:5])
        if len(functions) > 5:
            cell += " and %d more" % (len(functions) - 5)
        if identifier in unsupported:
            cell = (cell + "; " if cell else "") + ("partly supported (below)" if cell else "not supported (below)")
        lines.append("| %s | %s |" % (identifier, cell))
    lines += ["", END]
    return "\n".join(lines)


def committed_ids():
    """The IDs of the committed generated table, for when the catalog itself is absent."""
    text = open(ARTICLE, encoding="utf-8").read()
    if BEGIN not in text or END not in text:
        return []
    body = text.split(BEGIN, 1)[1].split(END, 1)[0]
    return sorted(set(re.findall(r"^\|\s*((?:%s)-\d+)\s*\|" % PREFIXES, body, re.M)), key=sort_key)


def main():
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="check only (CI); write nothing")
    check = parser.parse_args().check
    if os.path.exists(CATALOG):
        ids = catalog_ids()
    else:
        ids = committed_ids()
        print("catalog.py: NOTICE: %s is absent; checking the %d IDs of the committed table instead"
              % (os.path.normpath(CATALOG), len(ids)))
        if not ids:
            print("catalog.py: the committed table lists no ID")
            return 1
        check = True  # without the catalog nothing is rewritten
    tests = test_titles()
    unsupported = unsupported_ids()
    named = {i for names, _, _ in tests for i in names}
    missing = [i for i in ids if i not in named and i not in unsupported]
    unknown = sorted((named | unsupported) - set(ids), key=sort_key)
    article = open(ARTICLE, encoding="utf-8").read()
    generated = table(ids, tests, unsupported)
    if BEGIN not in article or END not in article:
        print("catalog.py: %s has no generated table markers" % ARTICLE)
        return 1
    head, rest = article.split(BEGIN, 1)
    updated = head + generated + rest.split(END, 1)[1]
    status = 0
    if missing:
        print("catalog.py: %d of %d IDs named by no test title and not in the not-supported table: %s"
              % (len(missing), len(ids), " ".join(missing)))
        status = 1
    if unknown:
        print("catalog.py: IDs the catalog does not define: %s" % " ".join(unknown))
        status = 1
    if check:
        if updated != article:
            print("catalog.py: the table in OIDCConformance.md is out of date: run python3 Scripts/catalog.py")
            status = 1
    else:
        open(ARTICLE, "w", encoding="utf-8").write(updated)
    tested = len([i for i in ids if i in named])
    print("catalog.py: %d IDs: %d named by a test, %d not supported (%d both), %d missing"
          % (len(ids), tested, len(unsupported & set(ids)), len(named & unsupported), len(missing)))
    return status


if __name__ == "__main__":
    sys.exit(main())
