#!/usr/bin/python3
"""Checks docs/flags.md against the binaries' own `--helpfull`.

usage: flags_doc_test.py DOC NAME=BINARY...

For each binary NAME, the section of DOC headed `## NAME` must document, in
the first column of its tables, exactly the flags that `BINARY --helpfull`
lists outside Abseil's own groups ("Flags from .../absl/..."): a flag the
binary has and the section lacks fails, and so does a documented flag the
binary no longer has. A row's Default column, a literal in backquotes, must
equal the binary's default. Abseil's flags (--flagfile, --fromenv, ...) may be
documented but need not be. Keyed on flag names per binary, not on the file
that defines a flag, so flags may move between libraries freely.

Then a self-check: a row deleted, a flag added and a default changed in a
copy of DOC must each be caught, so the check cannot pass vacuously.
"""

import re
import subprocess
import sys

# Abseil's flags that --helpfull may leave out of its listing.
ABSL_BUILTINS = {
    "flagfile", "fromenv", "tryfromenv", "undefok", "help", "helpfull",
    "helpshort", "helppackage", "helpon", "helpmatch", "version",
    "only_check_args",
}

FLAG_LINE = re.compile(r"^    --([A-Za-z0-9_]+) \(")
GROUP_LINE = re.compile(r"^  Flags from (.*):$")
DEFAULT = re.compile(r"\); *default: (.*);$")


def binary_flags(path):
    """Returns ({flag: default}, abseil_flags) from `path --helpfull`."""
    out = subprocess.run([path, "--helpfull"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True).stdout
    flags, absl = {}, set(ABSL_BUILTINS)
    entries = []  # (name, from_absl, text)
    from_absl = False
    for line in out.splitlines():
        group = GROUP_LINE.match(line)
        if group:
            from_absl = re.search(r"(^|/)absl/", group.group(1)) is not None
            entries.append(None)  # ends the previous flag's text
            continue
        flag = FLAG_LINE.match(line)
        if flag:
            entries.append([flag.group(1), from_absl, line.strip()])
        elif entries and entries[-1] is not None and line.startswith("      "):
            entries[-1][2] += " " + line.strip()
        elif entries:
            entries.append(None)
    for entry in filter(None, entries):
        name, is_absl, text = entry
        if is_absl:
            absl.add(name)
            continue
        default = DEFAULT.search(text)
        flags[name] = default.group(1) if default else None
    if not flags:
        raise SystemExit(f"flags_doc_test: {path} --helpfull listed no flags:\n{out}")
    return flags, absl


def unquote(value):
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def doc_sections(lines):
    """Maps each `## NAME` heading to the lines of its section."""
    sections, current = {}, None
    for line in lines:
        if line.startswith("## "):
            current = line[3:].strip()
            sections[current] = []
        elif line.startswith("# "):
            current = None
        elif current is not None:
            sections[current].append(line)
    return sections


def documented_flags(section):
    """Returns {flag: default literal or None} from the section's table rows."""
    flags = {}
    for line in section:
        if not line.startswith("|") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        names = re.findall(r"`--([A-Za-z0-9_]+)`", cells[0])
        literal = re.fullmatch(r"`([^`]*)`", cells[1]) if len(cells) > 1 else None
        for name in names:
            flags[name] = unquote(literal.group(1)) if literal else None
    return flags


def check(doc_lines, binaries):
    """Returns the list of disagreements between the doc and the binaries."""
    errors = []
    sections = doc_sections(doc_lines)
    for name, (flags, absl) in binaries.items():
        if name not in sections:
            errors.append(f"{name}: no '## {name}' section in docs/flags.md")
            continue
        documented = documented_flags(sections[name])
        for flag in sorted(set(flags) - set(documented)):
            errors.append(f"{name}: --{flag} is in --helpfull but not in docs/flags.md")
        for flag in sorted(set(documented) - set(flags) - absl):
            errors.append(f"{name}: --{flag} is in docs/flags.md but the binary has no such flag")
        for flag in sorted(set(documented) & set(flags)):
            want, got = flags[flag], documented[flag]
            if want is None:
                errors.append(f"{name}: --{flag}: no default in --helpfull")
            elif got is None:
                errors.append(f"{name}: --{flag}: the Default column is not one `literal`")
            elif unquote(want) != got:
                errors.append(f"{name}: --{flag}: docs/flags.md says default `{got}`, "
                              f"--helpfull says {want}")
    return errors


def self_check(doc_lines, binaries):
    """Mutations of the doc that check() must each catch; returns failures."""
    failures = []
    for name in binaries:
        try:
            start = doc_lines.index(f"## {name}")
        except ValueError:
            continue
        rows = [i for i in range(start + 1, len(doc_lines))
                if doc_lines[i].startswith("| `--")]
        row = rows[0]
        cells = doc_lines[row].split("|")
        cells[2] = " `changed` "
        mutations = {
            # what: (the doc with it, the error that must name it)
            "row deleted": (doc_lines[:row] + doc_lines[row + 1:],
                            "is in --helpfull but not in docs/flags.md"),
            "flag added": (doc_lines[:row] + ["| `--no_such_flag` | `0` | x |"]
                           + doc_lines[row:],
                           "--no_such_flag is in docs/flags.md but the binary has no"),
            "default changed": (doc_lines[:row] + ["|".join(cells)]
                                + doc_lines[row + 1:],
                                "docs/flags.md says default `changed`"),
        }
        for what, (mutated, expected) in mutations.items():
            errors = check(mutated, binaries)
            if not any(e.startswith(name + ":") and expected in e for e in errors):
                failures.append(f"self-check: {name}: {what} (line {row + 1}) "
                                f"was not caught: {errors}")
    return failures


def main(argv):
    if len(argv) < 3 or any("=" not in a for a in argv[2:]):
        raise SystemExit(__doc__)
    with open(argv[1], encoding="utf-8") as f:
        doc_lines = f.read().splitlines()
    binaries = {}
    for arg in argv[2:]:
        name, path = arg.split("=", 1)
        binaries[name] = binary_flags(path)
    errors = check(doc_lines, binaries)
    for error in errors:
        print(f"flags_doc_test: FAIL {error}")
    if errors:
        print(f"flags_doc_test: {len(errors)} disagreement(s); update docs/flags.md "
              "from the binary's --helpfull")
        return 1
    for name, (flags, _) in binaries.items():
        print(f"flags_doc_test: {name}: {len(flags)} flags documented")
    failures = self_check(doc_lines, binaries)
    for failure in failures:
        print(f"flags_doc_test: FAIL {failure}")
    if failures:
        return 1
    print("flags_doc_test: PASS (self-check: every mutation caught)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
