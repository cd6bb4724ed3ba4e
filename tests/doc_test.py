#!/usr/bin/env python3
# doc_test.py: runs the examples marked as doc tests in README.md and docs/*.md against the built headroom
# and fails when one has gone stale (issue 21: "each page's examples run by a test so they cannot go stale").
#
# Usage: tests/doc_test.py HEADROOM SOURCE_DIR [FILE.md ...]     (registered in tests/CMakeLists.txt, label docs)
#
# The marker: an HTML comment line `<!-- doc-test -->` right before a fenced block (blank lines between are
# allowed; a marker followed by anything else is an error). Two kinds of block:
#   console  the block holds `$ COMMAND` lines, each followed by the output expected from it. A command may go
#            on over lines ending in `\`. It ends in `# exit N` (a shell comment, so it can be pasted) when
#            its exit status is N; without one the status must be 0.
#   script   `<!-- doc-test script -->` before a ```sh / ```bash / ```python block: the block is run whole (bash
#            or python3) and must exit 0 (`<!-- doc-test script exit=N -->` for another status). When the
#            next fenced block is marked `<!-- doc-test output -->`, it holds the output expected.
# Every command runs with `headroom` on PATH as the binary under test, in a scratch folder that links every
# top-level entry of SOURCE_DIR (so `tests/data/...` and `presets/...` resolve; a file an example writes
# belongs in the scratch folder itself, e.g. `--json run.json`, never under a linked folder); stdout and
# stderr are compared together.
#
# The shape rule, what "matches" means:
#   - each expected line must equal an output line, in order; other output lines may come between two
#     expected lines (an example need not show every line, and a line added under a title breaks none);
#   - a line `...` says to the reader that lines were left out; it matches nothing and skips nothing more;
#   - runs of spaces compare as one space, and leading and trailing spaces are ignored;
#   - a number written `~12.5` (a tilde before it) matches any number there, for figures that vary from run
#     to run (times, dates); every other number must be exactly as written.
# A block that no longer matches fails with its file and line, the first expected line not found and the
# real output; so do a wrong exit status and an example that takes over 120 s. Finding no doc test at all
# fails too, and the matcher checks itself on a stale example before any document is read.
import os
import re
import shutil
import subprocess
import sys
import tempfile

MARKER = re.compile(r"^\s*<!--\s*doc-test(?P<args>[^>]*)-->\s*$")
FENCE = re.compile(r"^(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)")
EXIT_COMMENT = re.compile(r"\s#\s*exits?\s+(?P<status>\d+)\b.*$")
NUMBER = r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
TIMEOUT_S = 120


def doc_normalise(line):
    """Returns the line with its runs of whitespace made one space and its ends stripped."""
    return " ".join(line.split())


def doc_line_pattern(expected):
    """Returns a compiled regex for one expected line: literal text, `~NUMBER` matching any number."""
    parts = re.split(r"~" + NUMBER, doc_normalise(expected))
    return re.compile("^" + NUMBER.join(re.escape(p) for p in parts) + "$")


def doc_match(expected_lines, output):
    """Returns None when the expected lines appear in order in the output, else the first line not found."""
    actual = [doc_normalise(x) for x in output.splitlines()]
    at = 0
    for line in expected_lines:
        if doc_normalise(line) in ("", "..."):
            continue
        pattern = doc_line_pattern(line)
        while at < len(actual) and not pattern.match(actual[at]):
            at += 1
        if at == len(actual):
            return line
        at += 1
    return None


def doc_matcher_self_check():
    """Returns a list of failures of the matcher on fixed cases (a matcher that passes everything is a defect)."""
    out = "title line\nan added line\n  total   52.1 GiB\nheadroom 27.6 GiB (34.6%)\ntook 0.198 s\n"
    cases = [
        (["title line", "total 52.1 GiB", "headroom 27.6 GiB (34.6%)"], True),
        (["title line", "...", "took ~0.5 s"], True),
        (["total 52.1 GiB", "title line"], False),           # out of order
        (["title line", "total 52.2 GiB"], False),           # a stale figure
        (["headroom ~27.6 GiB (34.6%)", "took 0.198"], False),  # a line is matched whole
        (["total 52.1 GiB", "missing line"], False),
    ]
    failures = []
    for expected, should_match in cases:
        if (doc_match(expected, out) is None) != should_match:
            failures.append(f"matcher self-check: {expected} should {'' if should_match else 'not '}match")
    return failures


def doc_marker_args(args):
    """Returns (kind, exit status) from the marker's text: kind is console, script or output."""
    words = args.split()
    kind = "console"
    status = 0
    for w in words:
        if w in ("script", "output"):
            kind = w
        elif re.fullmatch(r"exit=\d+", w):
            status = int(w.split("=")[1])
        else:
            raise ValueError(f"unknown doc-test marker word '{w}'")
    return kind, status


def doc_blocks(path):
    """Yields dicts (line, kind, status, lang, lines) for every fenced block that follows a marker."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    pending = None
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if m:
            pending = (i + 1,) + doc_marker_args(m.group("args"))
            i += 1
            continue
        f = FENCE.match(lines[i])
        if f:
            close = re.compile(r"^" + re.escape(f.group("fence")[0]) + "{" + str(len(f.group("fence"))) + r",}\s*$")
            j = i + 1
            while j < len(lines) and not close.match(lines[j]):
                j += 1
            if pending:
                yield {"line": pending[0], "kind": pending[1], "status": pending[2], "lang": f.group("lang"),
                       "lines": lines[i + 1:j]}
            pending = None
            i = j + 1
            continue
        if lines[i].strip() and pending:
            raise ValueError(f"line {pending[0]}: a doc-test marker not followed by a fenced block")
        i += 1


def doc_console_steps(block_lines):
    """Returns [(command, expected status, expected lines)] from a console block's lines."""
    steps = []
    i = 0
    while i < len(block_lines):
        line = block_lines[i]
        if not line.startswith("$ "):
            if not steps:
                raise ValueError("a console doc test must start with a `$ ` command line")
            steps[-1][2].append(line)
            i += 1
            continue
        command = line[2:]
        while command.endswith("\\") and i + 1 < len(block_lines):
            i += 1
            command = command[:-1] + " " + block_lines[i].strip()
        status = 0
        m = EXIT_COMMENT.search(command)
        if m:
            status = int(m.group("status"))
        steps.append((command, status, []))
        i += 1
    return steps


def doc_run(argv_or_script, scratch, env, script_lang=None):
    """Returns (exit status, stdout and stderr together) of one command or script, run in `scratch`."""
    if script_lang is None:
        argv = ["bash", "-c", argv_or_script]
    elif script_lang == "python":
        argv = [sys.executable, "-c", argv_or_script]
    else:
        argv = ["bash", "-e", "-c", argv_or_script]
    try:
        p = subprocess.run(argv, cwd=scratch, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"(timed out after {TIMEOUT_S} s)"
    return p.returncode, p.stdout.decode("utf-8", errors="replace")


def doc_scratch(source_dir, headroom):
    """Returns (scratch folder, environment): the source tree's entries linked, headroom first on PATH."""
    scratch = tempfile.mkdtemp(prefix="headroom-doc-test-")
    for name in os.listdir(source_dir):
        if name.startswith("build") or name == ".git":
            continue
        os.symlink(os.path.join(source_dir, name), os.path.join(scratch, name))
    bindir = os.path.join(scratch, ".doc-test-bin")
    os.mkdir(bindir)
    os.symlink(os.path.abspath(headroom), os.path.join(bindir, "headroom"))
    env = dict(os.environ)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env["LC_ALL"] = "C.UTF-8"
    return scratch, env


def doc_check_file(path, scratch, env):
    """Returns (blocks run, failures) for one document."""
    failures = []
    count = 0
    blocks = list(doc_blocks(path))
    for k, b in enumerate(blocks):
        where = f"{path}:{b['line']}"
        if b["kind"] == "output":
            if k == 0 or blocks[k - 1]["kind"] != "script":
                failures.append(f"{where}: an output block that follows no script block")
            continue
        count += 1
        if b["kind"] == "script":
            lang = "python" if b["lang"].startswith("py") else "sh"
            expected = []
            if k + 1 < len(blocks) and blocks[k + 1]["kind"] == "output":
                expected = blocks[k + 1]["lines"]
            steps = [("\n".join(b["lines"]), b["status"], expected, lang)]
        else:
            if b["status"]:
                failures.append(f"{where}: a console block states a non-zero status with `# exit N` on its command")
            steps = [(c, s, e, None) for c, s, e in doc_console_steps(b["lines"])]
            if not steps:
                failures.append(f"{where}: a console doc test without a `$ ` command")
        for command, status, expected, lang in steps:
            got_status, output = doc_run(command, scratch, env, lang)
            shown = command if lang is None else f"({lang} script)"
            if got_status != status:
                failures.append(f"{where}: `{shown}` exited {got_status}, the document says {status}\n"
                                f"--- output ---\n{output}")
                continue
            missing = doc_match(expected, output)
            if missing is not None:
                failures.append(f"{where}: `{shown}`: expected line not found (in order): {missing.strip()}\n"
                                f"--- output ---\n{output}")
    return count, failures


def main(argv):
    if len(argv) < 3:
        sys.stderr.write("usage: tests/doc_test.py HEADROOM SOURCE_DIR [FILE.md ...]\n")
        return 2
    headroom, source_dir = argv[1], os.path.abspath(argv[2])
    if not os.access(headroom, os.X_OK):
        sys.stderr.write(f"doc_test: {headroom} is not an executable\n")
        return 2
    failures = doc_matcher_self_check()
    docs = argv[3:] or [os.path.join(source_dir, "README.md")] + sorted(
        os.path.join(source_dir, "docs", n) for n in os.listdir(os.path.join(source_dir, "docs")) if n.endswith(".md"))
    scratch, env = doc_scratch(source_dir, headroom)
    total = 0
    try:
        for path in docs:
            try:
                count, problems = doc_check_file(path, scratch, env)
            except ValueError as e:
                count, problems = 0, [f"{path}: {e}"]
            total += count
            failures += problems
            print(f"{os.path.relpath(path, source_dir)}: {count} doc tests")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if total == 0:
        failures.append("no doc test found (a `<!-- doc-test -->` line before a fenced block)")
    for f in failures:
        print("FAIL " + f)
    print(f"{total} doc tests, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
