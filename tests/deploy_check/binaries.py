"""The binaries of the build: the flags each one accepts, as its --helpfull
lists them, and a container's command line checked against its binary: the
binary is one of the build's, every flag is one of its flags, enumerations
(--mode, --device, --transport, --model, ps_ctl's command) have an allowed
value that the flag's help text mentions, and the real binary parses the
whole command line (run with --helpfull appended, Abseil reports unknown
flags and bad values before printing help)."""

import re
import subprocess

# Values the binaries accept for enumerated flags. Each value must also appear
# in the flag's --help text (checked), so a value the binary drops breaks
# this test.
ENUMS = {
    "ps_server": {"mode": ["sync", "async"]},
    "ps_worker": {"device": ["auto", "cpu", "cuda"], "transport": ["stream", "unary"],
                  "model": ["mlp", "softmax"]},
}
# ps_ctl's positional command.
CTL_COMMANDS = ["status", "health"]

BINARY_NAMES = ["ps_server", "ps_worker", "ps_ctl", "ps_bench"]


def run(argv):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=60)


class Binary:
    """A binary of the build and the flags it accepts, as it reports them."""

    _parse_cache = {}

    def __init__(self, name, path):
        self.name, self.path = name, path
        self.help = run([path, "--helpfull"]).stdout
        self.flags = {}  # name -> help text
        # "    --name (help...); default: value;", wrapped over indented lines.
        for chunk in re.split(r"\n(?=    --)", self.help):
            m = re.match(r"--(\w+) \((.*)\); default: ", " ".join(chunk.split()))
            if m:
                self.flags[m.group(1)] = m.group(2)
        if not self.flags:
            raise SystemExit(f"deploy_config_check: {path} --helpfull listed no flags")

    def parse_errors(self, args):
        """Errors Abseil reports for ARGS, parsed by the real binary."""
        key = (self.path, tuple(args))
        if key not in Binary._parse_cache:
            out = run([self.path] + list(args) + ["--helpfull"])
            Binary._parse_cache[key] = [l for l in (out.stderr + out.stdout).splitlines()
                                        if l.startswith("ERROR:")]
        return Binary._parse_cache[key]


def check_enum_help(bins, errors):
    """Each enumeration value must appear in its flag's help text."""
    for binary, flags in ENUMS.items():
        for flag, values in flags.items():
            text = bins[binary].flags.get(flag)
            if text is None:
                errors.append(f"{binary} has no --{flag}, which the test's ENUMS table lists")
                continue
            for v in values:
                if not re.search(rf"\b{v}\b", text):
                    errors.append(f"{binary} --{flag}: help text does not mention '{v}': {text}")
    for c in CTL_COMMANDS:
        if f"ps_ctl {c}" not in bins["ps_ctl"].help:
            errors.append(f"ps_ctl --help does not mention the command '{c}'")


def parse_flags(argv):
    """{name: value} of --name=value arguments (value True for bare --name)."""
    out = {}
    for a in argv[1:]:
        if a.startswith("--"):
            name, eq, value = a[2:].partition("=")
            out[name] = value if eq else True
    return out


def check_argv(argv, bins, where, errors):
    """Checks one container command line against its binary."""
    if not argv:
        errors.append(f"{where}: empty command")
        return
    name = argv[0]
    if name not in bins:
        errors.append(f"{where}: runs '{name}', which is not a binary of the build "
                      f"({', '.join(sorted(bins))})")
        return
    b = bins[name]
    positional = [a for a in argv[1:] if not a.startswith("--")]
    if name == "ps_ctl":
        if len(positional) != 1 or positional[0] not in CTL_COMMANDS:
            errors.append(f"{where}: ps_ctl needs one command of {CTL_COMMANDS}, got {positional}")
    elif positional:
        errors.append(f"{where}: {name} takes no positional arguments, got {positional}")
    for a in argv[1:]:
        if re.search(r"\$\{|\$\(|\$[A-Za-z_]", a):
            errors.append(f"{where}: unexpanded variable in '{a}'")
    for flag, value in parse_flags(argv).items():
        base = flag[2:] if flag.startswith("no") and flag[2:] in b.flags else flag
        if base not in b.flags:
            errors.append(f"{where}: --{flag} is not a flag of {name} (its flags: "
                          f"{', '.join(sorted(b.flags))})")
            continue
        allowed = ENUMS.get(name, {}).get(base)
        if allowed and value not in allowed:
            errors.append(f"{where}: --{flag}={value}: {name} accepts {'|'.join(allowed)}")
    for e in b.parse_errors(argv[1:]):
        errors.append(f"{where}: {name} rejects its command line: {e}")


def int_flag(flags, name, where, errors):
    v = flags.get(name)
    try:
        return int(v)
    except (TypeError, ValueError):
        errors.append(f"{where}: --{name} must be an integer, got {v!r}")
        return None


def host_port(value, where, errors):
    m = re.fullmatch(r"(.+):(\d+)", str(value))
    if not m:
        errors.append(f"{where}: '{value}' is not HOST:PORT")
        return None, None
    return m.group(1), int(m.group(2))
