#!/usr/bin/python3
"""Keeps README.md and docs/*.md true to the program they describe.

Usage: docs_check.py TANDEM REPO_ROOT

Three checks; each prints every problem it finds (file:line: what), and the script exits 1 when
any was found, 0 when none, 77 (a skip, for CTest) when TANDEM does not exist.

1. Links. Every relative Markdown link or image, [text](target), in README.md and docs/*.md
   must name an existing file or folder (relative to the page); a target `file.md#anchor` (or
   `#anchor` alone, in the same page) must name a heading of that Markdown file, under GitHub's
   anchor rule: the heading's text lowercased, every character that is not a letter, a digit,
   `_`, `-` or a space dropped, spaces turned into `-`, and `-1`, `-2`, ... added to repeats.
   Links with a scheme (https:, mailto:) are not followed.

2. Flags. Every `--name` the pages mention must be an option of tandem. Where it is looked up:
   - Fenced blocks tagged cpp, c++, c, cmake, python or json hold code, not commands: not read.
   - A command is a line of any other fenced block (joined with the next while it ends in a
     backslash; a `#` comment after it is prose), or a `code span` in the text. A command that
     runs tandem (`tandem` or `build/tandem` as a word, then one of the subcommands that
     `tandem --help` lists) is looked up in that subcommand's `--help` (without a subcommand:
     `tandem --help`); what comes before `tandem` on it is the launcher's (mpirun, environment
     settings) and is not read.
   - A command that does not run tandem and starts with another program (OTHER_PROGRAMS:
     mpirun, make, cmake, ctest, python, git, ...) is that program's: not read.
   - Any other flag (prose, tables, a span that starts with a flag, an error message shown as
     output) must be in the help of tandem or of any of its subcommands, or be one of
     FOREIGN_FLAGS: other programs' flags that the pages name in prose.

3. First run. README.md holds one fenced block between `<!-- first-run -->` and
   `<!-- /first-run -->`. Its commands run in order, each as written (through /bin/sh, with
   `build/tandem` replaced by TANDEM's absolute path), in one fresh temporary folder where
   the repository's data/ folder is reachable as `data`; each must exit 0.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata

# Flags of other programs that the pages name in prose, outside a command line of theirs.
FOREIGN_FLAGS = {
    "--mca",  # mpirun
    "--allow-run-as-root",  # mpirun
    "--oversubscribe",  # mpirun
    "--bind-to",  # mpirun
    "--build",  # cmake
}

# First words of commands that run another program than tandem.
OTHER_PROGRAMS = re.compile(
    r"""^(mpirun|mpiexec|make|cmake|ctest|python3?|/usr/bin/python3|git|timeout|taskset|
         nice|sudo|env|sh|bash|mkdir|cp|rm|ln|cd|ls|stress|farm-bench|fslmaths|
         (?:\./|scripts/|bench/|examples/|build/tests/|build/fuzz/|build-examples/)\S*|
         \$\w+|[A-Z][A-Z0-9_]*=\S*)(\s|$)""",
    re.X,
)

FLAG = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SPAN = re.compile(r"(`+)((?:(?!\1)[^\n]|\n(?!\s*\n))+?)\1")  # a code span: not across a blank line
FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
CODE_LANGUAGES = {"cpp", "c++", "cmake", "python", "c", "json"}

problems = []
counts = {"links": 0, "flags": 0, "commands": 0}


def problem(path, line, what):
    problems.append(f"{path}:{line}: {what}")


def pages(root):
    out = [os.path.join(root, "README.md")]
    docs = os.path.join(root, "docs")
    out += sorted(os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))
    return out


def rel(root, path):
    return os.path.relpath(path, root)


def split_fences(text):
    """Returns (prose, blocks, unclosed): prose is the text with fenced blocks blanked (line
    numbers kept); blocks are (language, first line number, [lines]) of each fenced block's
    content; unclosed is the line of a fence that nothing closes (a closing fence with text after
    it is no closing fence), or None."""
    prose, blocks = [], []
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = (m.group(1), m.group(2).lower(), number + 1, [])
            prose.append("")
        elif fence is not None and line.strip().startswith(fence[0]) and not line.strip()[len(fence[0]):].strip():
            blocks.append((fence[1], fence[2], fence[3]))
            fence = None
            prose.append("")
        elif fence is not None:
            fence[3].append(line)
            prose.append("")
        else:
            prose.append(line)
    unclosed = None
    if fence is not None:
        blocks.append((fence[1], fence[2], fence[3]))
        unclosed = fence[2] - 1
    return "\n".join(prose), blocks, unclosed


def anchor_of(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    kept = []
    for c in text:
        kind = unicodedata.category(c)
        if c in "-_ " or kind[0] in "LM" or kind == "Nd":
            kept.append(c)
    return "".join(kept).replace(" ", "-")


_anchors = {}  # path -> the anchors of its headings


def anchors(path):
    if path not in _anchors:
        with open(path, encoding="utf-8") as f:
            prose, _, _ = split_fences(f.read())
        seen, out = {}, set()
        for line in prose.split("\n"):
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            a = anchor_of(m.group(1))
            n = seen.get(a, 0)
            seen[a] = n + 1
            out.add(a if n == 0 else f"{a}-{n}")
        _anchors[path] = out
    return _anchors[path]


def without_spans(prose):
    """The prose with its code spans (and HTML comments) blanked, line breaks kept."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))
    prose = re.sub(r"<!--.*?-->", blank, prose, flags=re.S)
    return SPAN.sub(blank, prose)


def check_links(root, path, prose):
    prose = without_spans(prose)
    for m in LINK.finditer(prose):
        line = prose.count("\n", 0, m.start()) + 1
        target = m.group(1)
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
            continue
        counts["links"] += 1
        file, _, anchor = target.partition("#")
        where = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not os.path.exists(where):
            problem(rel(root, path), line, f"link to {target}: {rel(root, where)} does not exist")
            continue
        if anchor:
            if not where.endswith(".md") or not os.path.isfile(where):
                problem(rel(root, path), line, f"link to {target}: an anchor into a file that is not Markdown")
            elif anchor not in anchors(where):
                problem(rel(root, path), line,
                        f"link to {target}: {rel(root, where)} has no heading with anchor #{anchor}")


def help_flags(tandem):
    """{subcommand, or "" for tandem itself: the set of flags its --help defines}; the
    subcommands are those `tandem --help` lists."""
    out, subcommands = {}, None
    while subcommands is None or len(out) < len(subcommands) + 1:
        sub = "" if subcommands is None else subcommands[len(out) - 1]
        args = [tandem] + ([sub] if sub else []) + ["--help"]
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        if r.returncode != 0:
            problem("-", 0, f"{' '.join(args)} exited with {r.returncode}")
        out[sub] = set(re.findall(r"(?m)^\s{1,4}(?:-\w,)?(--[A-Za-z][\w-]*)", r.stdout))
        if subcommands is None:
            listed = r.stdout.partition("Subcommands:")[2]
            subcommands = re.findall(r"(?m)^\s{1,4}([a-z][\w-]*)\s", listed)
    return out


def runs_tandem(helps):
    """Where a command runs tandem: `tandem` as a word (or a path's last part), then a
    subcommand, a flag or nothing."""
    subs = "|".join(re.escape(s) for s in helps if s)
    return re.compile(r"(?:^|(?<=[\s/]))tandem(?=\s+(?:(?:%s)\b|-)|\s*$)" % subs)


def check_command(where, line, text, helps, known):
    """One command line or code span (its first line's number; it may hold line breaks): its
    flags, looked up as the module's docstring says."""
    m = runs_tandem(helps).search(text)
    if m:
        words = text[m.end():].split()
        sub = words[0] if words and words[0] in helps else ""
        for f in FLAG.finditer(text, m.end()):
            counts["flags"] += 1
            if f.group(0) not in helps[sub]:
                problem(where, line + text.count("\n", 0, f.start()),
                        f"{f.group(0)} is not an option of 'tandem{' ' + sub if sub else ''}'")
        return
    if OTHER_PROGRAMS.match(text.strip()):
        return
    check_loose(where, line, text, known)


def check_loose(where, line, text, known):
    for f in FLAG.finditer(text):
        counts["flags"] += 1
        if f.group(0) not in known:
            problem(where, line + text.count("\n", 0, f.start()),
                    f"{f.group(0)} is not an option of tandem or any of its subcommands")


def check_flags(root, path, prose, blocks, helps):
    where = rel(root, path)
    known = set().union(*helps.values()) | FOREIGN_FLAGS
    for language, first, lines in blocks:
        if language in CODE_LANGUAGES:
            continue
        command, start = "", None
        for i, raw in enumerate(lines):
            number = first + i
            c = re.search(r"\s#(\s|$)", raw)
            text, comment = (raw[: c.start()], raw[c.end() :]) if c else (raw, "")
            if comment:
                check_loose(where, number, comment, known)
            if start is None:
                start = number
            if text.rstrip().endswith("\\"):
                command += text.rstrip()[:-1] + " \n"
                continue
            command += text
            check_command(where, start, command, helps, known)
            command, start = "", None
        if command:
            check_command(where, start, command, helps, known)
    for m in SPAN.finditer(prose):
        check_command(where, prose.count("\n", 0, m.start()) + 1, m.group(2), helps, known)
    for number, line in enumerate(without_spans(prose).split("\n"), 1):
        check_loose(where, number, line, known)


def first_run(root, tandem):
    readme = os.path.join(root, "README.md")
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"<!-- first-run -->(.*?)<!-- /first-run -->", text, re.S)
    if not m:
        problem("README.md", 0, "no <!-- first-run --> ... <!-- /first-run --> block")
        return
    _, blocks, _ = split_fences(m.group(1))
    line0 = text.count("\n", 0, m.start()) + 1
    if len(blocks) != 1:
        problem("README.md", line0, f"the first-run markers hold {len(blocks)} fenced blocks, not one")
        return
    _, first, lines = blocks[0]
    commands, command, start = [], "", None
    for i, line in enumerate(lines):
        start = line0 + first - 1 + i if start is None else start
        if line.rstrip().endswith("\\"):
            command += line.rstrip()[:-1] + " "
            continue
        command += line
        if command.strip() and not command.strip().startswith("#"):
            commands.append((start, command.strip()))
        command, start = "", None
    if not commands:
        problem("README.md", line0, "the first-run block holds no command")
    work = tempfile.mkdtemp(prefix="tandem-docs-")
    try:
        os.symlink(os.path.join(root, "data"), os.path.join(work, "data"))
        for number, command in commands:
            run = re.sub(r"(?<![\w/.-])build/tandem(?=\s|$)", os.path.abspath(tandem), command)
            print(f"first run, README.md:{number}: {command}", flush=True)
            counts["commands"] += 1
            try:
                r = subprocess.run(["/bin/sh", "-c", run], cwd=work, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, timeout=240)
            except subprocess.TimeoutExpired:
                problem("README.md", number, f"'{command}' ran longer than 240 s")
                break
            if r.returncode != 0:
                problem("README.md", number, f"'{command}' exited with {r.returncode}:\n{r.stdout[-3000:]}")
                break
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    tandem, root = sys.argv[1], os.path.abspath(sys.argv[2])
    if not os.path.isfile(tandem) or not os.access(tandem, os.X_OK):
        print(f"skipped: {tandem} does not exist (build it first)")
        return 77
    helps = help_flags(tandem)
    for path in pages(root):
        with open(path, encoding="utf-8") as f:
            prose, blocks, unclosed = split_fences(f.read())
        if unclosed:
            problem(rel(root, path), unclosed, "this fenced block is never closed")
        check_links(root, path, prose)
        check_flags(root, path, prose, blocks, helps)
    first_run(root, tandem)
    for p in problems:
        print(p)
    print(f"docs_check: {len(pages(root))} pages, {counts['links']} links, {counts['flags']} flags, "
          f"{counts['commands']} first-run commands: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
