"""The documentation stands alone: everything the code, the tests and the
benchmarks rely on is in the repository.

* No file names a document the repository does not hold, or a relative
  path that leads out of it, nor an issue number of a tracker readers
  cannot see (say the requirement instead).
* Every store invariant (I1, I2, ...) named in code, tests or docs, test
  names included (`i26_delete_frees_all_blocks`), is defined in
  docs/SPEC-store.md, and every test its tables name exists; every scrub
  rule (N1, N2, ...) is defined in docs/ADMIN.md.
* DESIGN.md's module map names every directory of src/.
* Every file a doc names (`src/store/repair.c`, `sv_writers.c`,
  `SPEC-store.md`, a Markdown link) exists, and every reference to a section
  of a doc (`DESIGN.md, "Intents"`) names a heading or a bold item of it.

Reads files only: no build, no cluster."""
import functools
import os
import re

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
THIS = os.path.relpath(os.path.abspath(__file__), ROOT)
TREES = ("src", "tests", "docs", "bench", "man", "dist", "debian", "scripts")
TOP_FILES = ("README.md", "Makefile")
SKIP_DIRS = {"__pycache__", "build"}

# A Markdown document named anywhere (`SPEC-store.md`, docs/ADMIN.md,
# [x](y.md)): it must be one of the repository's.
MD_NAME = re.compile(r"(?<![\w./-])((?:\.{1,2}/|[\w-]+/)*[\w.-]+\.md)\b")
# A relative path that climbs: ../x, ../../docs/y.md.
CLIMB = re.compile(r"(?<![\w./)])((?:\.\./)+[\w-][\w.-]*(?:/[\w.-]+)*)")
# "issue 16", "issue #3", "Issue 13, item 1", "issues 16 and 18", "ticket 7",
# "bug #12", "(#42)", "(issue: store throughput)", "GH-7".
ISSUE = re.compile(r"\b(?:issue|ticket|bug)s?\s*(?:no\.?\s*)?(?:#\s*)?\d+"
                   r"|\(#\d+\)|\bissues?:|\bGH-\d+", re.I)
# I7 in prose and code; i26_... and i19_i22_... in the names of tests and
# checker functions.  N6 in prose and code.
STORE_RULE = re.compile(r"\bI([1-9][0-9]?)\b|(?<![A-Za-z0-9])i([1-9][0-9]?)_[a-z]")
SCRUB_RULE = re.compile(r"\bN([1-9][0-9]?)\b")
DOCS = ("DESIGN", "SPEC-store", "SPEC-wire", "SPEC-ondisk", "ADMIN", "mount", "PERF-NOTES")
# DESIGN.md, "X" / `DESIGN.md`, "X" / DESIGN.md ("X") / SPEC-store.md, section "X"
SECTION_REF = re.compile(r"\b((?:%s)\.md)`?(?:,\s*|\s*\(\s*|\s+)(?:section\s+)?\"([^\"]{2,100})\""
                         % "|".join(re.escape(d) for d in DOCS))
# A file named in backquotes: `src/store/repair.c`, `sv.h`, `SPEC-store.md`.
FILE_REF = re.compile(r"`([\w.+-]+(?:/[\w.+-]+)*\.(?:c|h|py|md|def|sh|in|supp|example))`")
MD_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as fh:
        return fh.read()


@functools.lru_cache(maxsize=None)
def tracked_files():
    """(path relative to the root, text) of every text file the checks cover."""
    return tuple(walk_files())


def walk_files():
    for top in TREES:
        for d, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x not in SKIP_DIRS)
            for f in sorted(files):
                rel = os.path.relpath(os.path.join(d, f), ROOT)
                if rel == THIS:
                    continue
                try:
                    yield rel, read(rel)
                except UnicodeDecodeError:
                    continue        # corpora, binaries
    for f in TOP_FILES:
        yield f, read(f)


def hits(pattern):
    out = []
    for rel, text in tracked_files():
        for n, line in enumerate(text.splitlines(), 1):
            if pattern.search(line):
                out.append("%s:%d: %s" % (rel, n, line.strip()))
    return out


@functools.lru_cache(maxsize=None)
def repo_markdown():
    """Base names of the repository's own Markdown files."""
    names = set()
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = [x for x in dirs if not x.startswith(".") and x not in SKIP_DIRS]
        names |= {f for f in files if f.endswith(".md")}
    return names


def leads_inside(here, path):
    """@path, relative to directory @here, names something the repository
    holds (or a build makes)."""
    full = os.path.normpath(os.path.join(here, path))
    if not full.startswith(ROOT + os.sep):
        return False
    top = os.path.relpath(full, ROOT).split(os.sep)[0]
    return os.path.exists(full) or top.startswith("build")


def outside_citations():
    """Lines naming a document the repository does not hold, or a path that
    leads out of it: what they rely on would be out of a user's reach."""
    out = []
    for rel, text in tracked_files():
        here = os.path.dirname(os.path.join(ROOT, rel))
        for n, line in enumerate(text.splitlines(), 1):
            why = [m for m in MD_NAME.findall(line) if os.path.basename(m) not in repo_markdown()]
            why += [m for m in CLIMB.findall(line) if not leads_inside(here, m)]
            if why:
                out.append("%s:%d: %s: %s" % (rel, n, ", ".join(why), line.strip()))
    return out


def test_no_citation_of_material_outside_the_repository():
    found = outside_citations()
    assert not found, ("these cite material that is not in the repository; bring what "
                       "they rely on into docs/ and cite that:\n" + "\n".join(found))


def test_no_issue_numbers():
    found = hits(ISSUE)
    assert not found, ("these cite issues of a tracker readers cannot see; "
                       "state the requirement instead:\n" + "\n".join(found))


def table_rules(doc, letter):
    """The rules a table of docs/@doc defines: rows "| I7 | ..."."""
    return {int(n) for n in re.findall(r"^\| %s([1-9][0-9]?) \|" % letter, read(doc), re.M)}


def undefined_uses(pattern, letter, defined):
    out = []
    for rel, text in tracked_files():
        for n, line in enumerate(text.splitlines(), 1):
            for m in pattern.finditer(line):
                num = int(next(g for g in m.groups() if g))
                if num not in defined:
                    out.append("%s:%d: %s%d: %s" % (rel, n, letter, num, line.strip()))
    return out


def test_every_store_invariant_used_is_defined_in_spec_store():
    defined = table_rules("docs/SPEC-store.md", "I")
    assert set(range(1, 31)) <= defined, sorted(set(range(1, 31)) - defined)
    undefined = undefined_uses(STORE_RULE, "I", defined)
    assert not undefined, ("invariants used but not defined in docs/SPEC-store.md, "
                           "\"Invariants\":\n" + "\n".join(undefined))


def test_every_scrub_rule_used_is_defined_in_admin():
    defined = table_rules("docs/ADMIN.md", "N")
    assert set(range(1, 8)) <= defined, sorted(set(range(1, 8)) - defined)
    undefined = undefined_uses(SCRUB_RULE, "N", defined)
    assert not undefined, ("scrub rules used but not defined in docs/ADMIN.md:\n"
                           + "\n".join(undefined))


def test_every_test_spec_store_names_exists():
    """The tests column of the operation rules names test functions."""
    names = set()
    for row in re.findall(r"^\| I[0-9]+ \|.*\|(.*)\|$", read("docs/SPEC-store.md"), re.M):
        names |= set(re.findall(r"`([a-z][a-z0-9_]+)`", row))
    assert len(names) >= 15, names
    tests = "\n".join(text for rel, text in tracked_files() if rel.startswith("tests" + os.sep))
    missing = sorted(n for n in names if not re.search(r"\b%s\b" % n, tests))
    assert not missing, "docs/SPEC-store.md names tests that do not exist: %s" % missing


def test_design_module_map_names_every_source_directory():
    text = read("docs/DESIGN.md")
    m = re.search(r"^## Processes and modules\n.*?^```\n(.*?)^```", text, re.M | re.S)
    assert m, "DESIGN.md has no module map under \"Processes and modules\""
    mapped = set(re.findall(r"^(src/[\w-]+)\s", m.group(1), re.M))
    dirs = {"src/" + d for d in os.listdir(os.path.join(ROOT, "src"))
            if os.path.isdir(os.path.join(ROOT, "src", d))}
    assert not dirs - mapped, ("DESIGN.md's module map (\"Processes and modules\") "
                               "leaves out %s" % sorted(dirs - mapped))
    assert not mapped - dirs, "DESIGN.md's module map names %s, not in src/" % sorted(mapped - dirs)


def file_names():
    names = set()
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = [x for x in dirs if not x.startswith(".") and x not in SKIP_DIRS]
        names.update(files)
    return names


def test_every_file_a_doc_names_exists():
    """A path is looked for from the root, docs/ and src/ (`net/conn.c`); a
    bare name (`flush.c`) anywhere in the tree.  Links may not leave it."""
    names = file_names()
    missing = []
    docs = ["docs/" + f for f in sorted(os.listdir(os.path.join(ROOT, "docs"))) if f.endswith(".md")]
    for rel in docs + ["README.md"]:
        text = read(rel)
        for m in MD_LINK.finditer(text):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue    # http:, mailto:
            path = os.path.normpath(os.path.join(os.path.dirname(rel), target))
            if path.startswith("..") or not os.path.exists(os.path.join(ROOT, path)):
                missing.append("%s: link to %s" % (rel, target))
        for m in FILE_REF.finditer(text):
            ref = m.group(1)
            if "/" not in ref:
                found = ref in names
            else:
                found = any(os.path.exists(os.path.join(ROOT, base, ref))
                            for base in ("", "docs", "src"))
            if not found:
                missing.append("%s: `%s`" % (rel, ref))
    assert not missing, "docs name files that are not in the repository:\n" + "\n".join(missing)


def norm(s):
    return re.sub(r"\s+", " ", re.sub(r"[`*]", "", s)).strip().lower().rstrip(".,:")


def sections(doc):
    """The headings and bold items of docs/@doc, normalized."""
    text = read(os.path.join("docs", doc))
    names = re.findall(r"^#+\s+(.*)$", text, re.M) + re.findall(r"\*\*(.+?)\*\*", text, re.S)
    return [norm(n) for n in names]


def test_every_section_reference_names_a_section():
    """A reference may name a heading by its start ("Intents" for "Intents:
    crash-safe cross-server operations"); comment leaders of wrapped lines
    are ignored."""
    cache = {}
    broken = []
    count = 0
    for rel, text in tracked_files():
        flat = re.sub(r"\n[ \t]*(?:\*(?!\*)|#+|//)?[ \t]*", " ", text)
        for m in SECTION_REF.finditer(flat):
            doc, name = m.group(1), norm(m.group(2))
            if doc not in cache:
                cache[doc] = sections(doc)
            count += 1
            if not any(s.startswith(name) for s in cache[doc]):
                broken.append('%s: %s, "%s"' % (rel, doc, m.group(2)))
    assert count >= 40, count       # the pattern still finds the references
    assert not broken, "references to sections that do not exist:\n" + "\n".join(broken)
