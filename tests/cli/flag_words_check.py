"""Every option field a library message names (Config::batch, PipelineOptions::slabs) becomes a
flag that `tandem train` or `tandem eval` has: Config's by the option table
(src/train/options.cc), the other structs' by src/cli/flag_words.cc's table. Usage:
flag_words_check.py SOURCE_DIR TANDEM_BINARY"""
import glob
import re
import subprocess
import sys

source, tandem = sys.argv[1], sys.argv[2]
flags = set()
for command in ("train", "eval"):
    text = subprocess.run([tandem, command, "--help"], capture_output=True, text=True).stdout
    flags |= set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", text))
table = dict(re.findall(r'\{"(\w+::\w+)", "(--[^"]+|)"\}',
                        open(f"{source}/src/cli/flag_words.cc").read()))
# The option table's entries start ("field", "--flag", ...; "" for a field without a flag.
options = re.findall(r'\(\s*"(\w+)",\s*"(--[a-z-]+|)"', open(f"{source}/src/train/options.cc").read())
if len(options) < 40:
    sys.exit(f"only {len(options)} entries found in src/train/options.cc: is the pattern right?")
table.update({f"Config::{field}": flag for field, flag in options})
literal = re.compile(r'"(?:[^"\\]|\\.)*"')
field = re.compile(r"\b(Config|[A-Za-z]*Options)::([a-z_]+)")
named, missing = set(), []
for path in glob.glob(f"{source}/src/**/*.cc", recursive=True) + glob.glob(
        f"{source}/src/**/*.h", recursive=True):
    if "/src/cli/" in path:
        continue
    for text in literal.findall(open(path).read()):
        for owner, name in field.findall(text):
            key = f"{owner}::{name}"
            named.add(key)
            if table.get(key) == "":
                continue  # a field the command line sets itself: no flag
            flag = table.get(key)
            if flag is None or flag.split()[0] not in flags:
                missing.append(f"{key} ({path[len(source) + 1:]}): {flag or 'no entry'}")
if missing:
    sys.exit("fields in library messages without a flag of tandem train/eval:\n  " +
             "\n  ".join(sorted(set(missing))))
if len(named) < 20:
    sys.exit(f"only {len(named)} fields found in library messages: is the source folder right?")
print(f"{len(named)} fields in library messages, each a flag of tandem train or eval")
