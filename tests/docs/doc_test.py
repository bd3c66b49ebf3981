#!/usr/bin/env python3
"""Doc test: every command and every output that a page of the documentation shows is run here.

Usage: doc_test.py BUCKETSIM SOURCE_DIR PAGE.md
       doc_test.py --self-test BUCKETSIM SOURCE_DIR   (control pages: each fault must be caught)

Every fenced block of the page is one of these, so nothing it shows goes unchecked:

- A command block (```sh): each command (a line; a trailing backslash continues it; a line that
  starts with `#` is a comment) runs in order with bash, in one scratch directory per page, and
  must exit 0.
- A transcript: a block whose first line starts with `$ `. Each `$ COMMAND` runs, and its output
  (stdout and stderr together) must match the lines under it.
- A block with an HTML comment on the line above its fence (not shown on the rendered page):
    <!-- doctest: output -->       the output of the page's last command block, all its commands
    <!-- doctest: file PATH -->    the content of PATH in the source tree (JSON compared as JSON)
    <!-- doctest: in PATH -->      an excerpt: each of its lines is in PATH (whitespace aside)
    <!-- doctest: as NAME -->      a file the page's later commands use: written to NAME
    <!-- doctest: exits N... -->   a command block or transcript whose commands exit with these
                                   codes, one per command in order (a check that fails exits 1)
    <!-- doctest: skip REASON -->  not run, for the reason given (printed with the result)
Any other block is an error that names it: a new block must say what it is.

Commands named in the prose (`bucketsim SUBCOMMAND ... --flag ...` in an inline code span, as in
docs/commands.md's table, and those of the blocks) must name a real subcommand, and each of their
`--flags` must be in that subcommand's `--help`, so a renamed or removed flag cannot stay on a page.

Output matches when it is the expected text with any run of whitespace standing for any run of
whitespace (tables align and advice wraps to the terminal's width), and with `...` standing for
any text, none included, across lines (a cut column, an elided paragraph).

The scratch directory has the source tree's `traces/` and `tools/` (links), a copy of its
`reports/`, and `build/` (a link to the binary's directory); `bucketsim` is on PATH. `mpirun`
gets `--allow-run-as-root --oversubscribe` when run as root. `python3 -m torch...` runs under
torch 2.6 (tools/torch2.sh python), as does a command through `tools/torch2.sh`; any other
`python3` is /usr/bin/python3. A page whose commands need what is not here (Debian's torch
for the recorder, the torch 2.6 root, mpirun) is skipped as a whole (exit 77), with the reason.
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

ANNOTATION = re.compile(r"^<!--\s*doctest:\s*(\S+)\s*(.*?)\s*-->$")
FENCE = re.compile(r"^```(\S*)\s*$")
SKIPPED = 77


class Block:
    def __init__(self, page, line, language, text, annotation):
        self.page = page
        self.line = line  # of the opening fence, from 1
        self.language = language
        self.text = text
        self.kind, self.argument = annotation if annotation else (None, "")

    def where(self):
        return f"{self.page}:{self.line}"


class DocError(Exception):
    pass


def read_blocks(path, page):
    """The fenced blocks of a Markdown page, each with the annotation on the line above it."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks = []
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if not fence:
            index += 1
            continue
        start = index
        end = start + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        if end == len(lines):
            raise DocError(f"{page}:{start + 1}: a code block that is never closed")
        annotation = None
        above = start - 1
        while above >= 0 and not lines[above].strip():
            above -= 1
        if above >= 0:
            match = ANNOTATION.match(lines[above].strip())
            if match:
                annotation = (match.group(1), match.group(2))
        blocks.append(Block(page, start + 1, fence.group(1), "\n".join(lines[start + 1:end]),
                            annotation))
        index = end + 1
    return blocks


def commands_of(text):
    """The commands of a ```sh block: backslash continuations joined, comment lines dropped."""
    commands, pending = [], ""
    for raw in text.split("\n"):
        line = raw.rstrip()
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        commands.append((pending + line).strip())
        pending = ""
    if pending:
        commands.append(pending.strip())
    return commands


def transcript_of(text):
    """[(command, expected output)] of a transcript block."""
    steps = []
    for line in text.split("\n"):
        if line.startswith("$ "):
            steps.append([line[2:].strip(), []])
        elif steps:
            steps[-1][1].append(line)
        elif line.strip():
            raise DocError("a transcript must start with a `$ COMMAND` line")
    return [(command, "\n".join(output)) for command, output in steps]


INLINE_CODE = re.compile(r"(?<!`)`([^`]+)`(?!`)")
INVOCATION = re.compile(r"\bbucketsim\s+([a-z][a-z-]*)\b(.*)", re.DOTALL)
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def prose_of(path):
    """The page without its fenced blocks."""
    kept, inside = [], False
    for line in open(path, encoding="utf-8").read().split("\n"):
        if FENCE.match(line) or (inside and line.rstrip() == "```"):
            inside = not inside
            continue
        if not inside:
            kept.append(line)
    return "\n".join(kept)


def output_pattern(expected):
    """A regular expression for the expected text: whitespace is any whitespace, `...` any text."""
    tokens = [token for token in re.split(r"(\.\.\.|\s+)", expected.strip()) if token]
    parts = []
    for index, token in enumerate(tokens):
        if token == "...":
            parts.append(".*?")
        elif token.isspace():
            beside_ellipsis = (index > 0 and tokens[index - 1] == "...") or (
                index + 1 < len(tokens) and tokens[index + 1] == "...")
            parts.append(r"\s*" if beside_ellipsis else r"\s+")
        else:
            parts.append(re.escape(token))
    return re.compile("".join(parts), re.DOTALL)


def first_difference(expected, actual):
    """The longest head of the expected text (cut at whitespace) that the output still matches."""
    words = re.split(r"(\s+)", expected.strip())
    good = 0
    for count in range(2, len(words) + 1, 2):
        head = "".join(words[:count]) + " ..."
        if output_pattern(head).fullmatch(actual.strip()):
            good = count
        else:
            break
    shown = "".join(words[:good])
    return shown[-200:], "".join(words[good:good + 20])


class Page:
    def __init__(self, binary, source, page_path):
        self.binary = os.path.abspath(binary)
        self.source = os.path.abspath(source)
        self.page = os.path.relpath(os.path.abspath(page_path), self.source)
        self.blocks = read_blocks(page_path, self.page)
        self.scratch = tempfile.mkdtemp(prefix="bucketsim-doctest-", dir="/tmp")
        self.environment = None
        self.ran = 0
        self.skipped = []
        self.helps = {}
        self.flags_checked = 0
        # Words that follow "bucketsim" in prose without being a subcommand of it.
        self.not_subcommands = {"error", "is", "and", "the", "binary", "prints", "itself",
                                "writes", "reads", "replays"}

    def close(self):
        shutil.rmtree(self.scratch, ignore_errors=True)

    # --- what the page needs -------------------------------------------------------------------

    def all_commands(self):
        for block in self.blocks:
            if block.kind in ("skip", "file", "in", "as", "output"):
                continue
            if block.text.lstrip().startswith("$ "):
                yield from (command for command, _ in transcript_of(block.text))
            elif block.language == "sh":
                yield from commands_of(block.text)

    def missing(self):
        """Why this page cannot run here, or None."""
        commands = list(self.all_commands())
        if any("record_program.py" in command for command in commands):
            probe = subprocess.run(["/usr/bin/python3", "-c", "import torch"],
                                   capture_output=True, text=True)
            if probe.returncode != 0:
                return "Debian's python3-torch (for tools/record_program.py) does not import"
        if any(command.startswith("python3 -m torch") or "tools/torch2.sh " in command
               for command in commands):
            status = subprocess.run([os.path.join(self.source, "tools/torch2.sh"), "status"],
                                    capture_output=True, text=True)
            if status.returncode != 0:
                return "the torch 2.6 root is not usable: " + (status.stdout + status.stderr).strip()
        if any(command.startswith("mpirun ") for command in commands) and not shutil.which("mpirun"):
            return "mpirun is not installed"
        return None

    # --- the scratch directory and the commands ------------------------------------------------

    def prepare(self):
        for name in ("traces", "tools"):
            os.symlink(os.path.join(self.source, name), os.path.join(self.scratch, name))
        shutil.copytree(os.path.join(self.source, "reports"), os.path.join(self.scratch, "reports"))
        os.symlink(os.path.dirname(self.binary), os.path.join(self.scratch, "build"))
        shims = os.path.join(self.scratch, ".doctest-bin")
        os.mkdir(shims)
        os.symlink(self.binary, os.path.join(shims, "bucketsim"))
        mpirun = shutil.which("mpirun")
        if mpirun:
            extra = "--allow-run-as-root --oversubscribe " if os.geteuid() == 0 else ""
            self.write_shim(shims, "mpirun", f'exec {shlex.quote(mpirun)} {extra}"$@"')
        torch2 = os.path.join(self.source, "tools/torch2.sh")
        # With PATH as it was: the root mounts /tmp, so python3 in there would find this shim.
        self.write_shim(shims, "python3", "\n".join([
            f'PATH={shlex.quote(os.environ.get("PATH", ""))}',
            'case "$1 $2" in "-m torch."*)',
            f'  exec {shlex.quote(torch2)} python "$@";;',
            "esac",
            'exec /usr/bin/python3 "$@"']))
        self.environment = dict(os.environ)
        self.environment["PATH"] = shims + os.pathsep + os.environ.get("PATH", "")
        self.environment.pop("COLUMNS", None)  # the full width, as when the output is a file

    @staticmethod
    def write_shim(directory, name, line):
        path = os.path.join(directory, name)
        with open(path, "w") as shim:
            shim.write("#!/bin/sh\n" + line + "\n")
        os.chmod(path, 0o755)

    def run(self, block, command, expected_exit):
        print(f"{block.where()}: $ {command}", flush=True)
        result = subprocess.run(["bash", "-c", command], cwd=self.scratch, env=self.environment,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                timeout=900)
        self.ran += 1
        if result.returncode != expected_exit:
            raise DocError(f"{block.where()}: `{command}` exited {result.returncode}, the page "
                           f"implies {expected_exit}; its output:\n{result.stdout}")
        return result.stdout

    @staticmethod
    def check_output(block, what, expected, actual):
        if output_pattern(expected).fullmatch(actual.strip()):
            return
        matched, rest = first_difference(expected, actual)
        raise DocError(f"{block.where()}: the output of {what} differs from the page.\n"
                       f"--- matched up to:\n...{matched}\n--- the page then shows:\n{rest} ..."
                       f"\n--- the whole output:\n{actual}")

    # --- the flags the page names -------------------------------------------------------------

    def help_of(self, words):
        """`bucketsim WORDS... --help`, or None where WORDS is not a (sub)command."""
        if words not in self.helps:
            result = subprocess.run([self.binary, *words, "--help"], capture_output=True,
                                    text=True)
            self.helps[words] = result.stdout if result.returncode == 0 else None
        return self.helps[words]

    @staticmethod
    def subcommands_in(help_text):
        """The names under CLI11's "Subcommands:" heading (`gen`'s presets and `program`)."""
        section = help_text.split("\nSubcommands:\n", 1)
        if len(section) < 2:
            return set()
        names = set()
        for line in section[1].split("\n"):
            if not line.startswith("  "):
                break
            names.add(line.split()[0])
        return names

    def check_flags(self, page_path):
        """Every `bucketsim SUB ... --flag` the page names: SUB exists, --flag is in its --help."""
        spans = [(match.group(1), "the prose")
                 for match in INLINE_CODE.finditer(prose_of(page_path))]
        spans += [(command, "a block") for command in self.all_commands()]
        checked = 0
        for span, where in spans:
            for part in re.split(r"[;|]|&&", span.replace("\\|", "/")):
                invocation = INVOCATION.search(part)
                if not invocation or invocation.group(1) in self.not_subcommands:
                    continue
                subcommand, rest = invocation.group(1), invocation.group(2)
                text = self.help_of((subcommand,))
                if text is None:
                    raise DocError(f"{self.page}: {where} names `bucketsim {subcommand}`, which "
                                   f"is not a subcommand (in `{span.strip()}`)")
                known = set(FLAG.findall(text))
                words, children = rest.split(), self.subcommands_in(text)
                if words and words[0] in children:
                    subcommand += " " + words[0]
                    known |= set(FLAG.findall(self.help_of(tuple(subcommand.split()))))
                else:  # `bucketsim gen PRESET --flag`: a flag of any of them
                    for child in children:
                        known |= set(FLAG.findall(self.help_of((subcommand, child)) or ""))
                for flag in FLAG.findall(rest.split(" #")[0]):
                    if flag not in known:
                        raise DocError(f"{self.page}: {where} gives `bucketsim {subcommand}` the "
                                       f"flag {flag}, which its --help does not list (in "
                                       f"`{span.strip()}`)")
                    checked += 1
        self.flags_checked = checked

    # --- the blocks ----------------------------------------------------------------------------

    def exits(self, block, count):
        if block.kind != "exits":
            return [0] * count
        codes = block.argument.split()
        if len(codes) != count or not all(code.isdigit() for code in codes):
            raise DocError(f"{block.where()}: `doctest: exits` gives {len(codes)} code(s) for "
                           f"{count} command(s); give one whole number per command")
        return [int(code) for code in codes]

    def check(self):
        last_output = None
        for block in self.blocks:
            if block.kind == "skip":
                if not block.argument:
                    raise DocError(f"{block.where()}: `doctest: skip` needs a reason")
                self.skipped.append(f"{block.where()}: {block.argument}")
                continue
            if block.kind == "file":
                self.check_file(block)
                continue
            if block.kind == "in":
                self.check_excerpt(block)
                continue
            if block.kind == "as":
                if not re.fullmatch(r"[\w.-]+", block.argument):
                    raise DocError(f"{block.where()}: `doctest: as` needs a plain file name")
                with open(os.path.join(self.scratch, block.argument), "w") as saved:
                    saved.write(block.text + "\n")
                continue
            if block.kind == "output":
                if last_output is None:
                    raise DocError(f"{block.where()}: `doctest: output` with no command block "
                                   f"above it on the page")
                self.check_output(block, "the command block above", block.text, last_output)
                continue
            if block.kind not in (None, "exits"):
                raise DocError(f"{block.where()}: unknown annotation `doctest: {block.kind}` "
                               f"(known: output, file, in, as, exits, skip)")
            if block.text.lstrip().startswith("$ "):
                steps = transcript_of(block.text)
                for (command, expected), code in zip(steps, self.exits(block, len(steps))):
                    self.check_output(block, f"`{command}`", expected,
                                      self.run(block, command, code))
                last_output = None
            elif block.language == "sh":
                commands = commands_of(block.text)
                outputs = [self.run(block, command, code)
                           for command, code in zip(commands, self.exits(block, len(commands)))]
                last_output = "".join(outputs)
            else:
                raise DocError(
                    f"{block.where()}: a ```{block.language} block that is neither commands "
                    f"(```sh), a transcript (`$ ` lines) nor annotated: put `<!-- doctest: output "
                    f"-->`, `file PATH` or `skip REASON` on the line above it")

    def check_excerpt(self, block):
        path = os.path.join(self.source, block.argument)
        try:
            content = " ".join(open(path, encoding="utf-8").read().split())
        except OSError as error:
            raise DocError(f"{block.where()}: `doctest: in {block.argument}`: {error}")
        for line in block.text.split("\n"):
            if line.strip() and " ".join(line.split()) not in content:
                raise DocError(f"{block.where()}: `{line.strip()}` is not in {block.argument}")

    def check_file(self, block):
        path = os.path.join(self.source, block.argument)
        try:
            content = open(path, encoding="utf-8").read()
        except OSError as error:
            raise DocError(f"{block.where()}: `doctest: file {block.argument}`: {error}")
        if block.language == "json":
            try:
                same = json.loads(content) == json.loads(block.text)
            except json.JSONDecodeError as error:
                raise DocError(f"{block.where()}: not JSON: {error}")
        else:
            same = content.strip() == block.text.strip()
        if not same:
            raise DocError(f"{block.where()}: the block differs from {block.argument}")


def check_page(binary, source, page_path):
    """(exit code, what to print) for one page."""
    try:
        page = Page(binary, source, page_path)
    except (OSError, DocError) as error:
        return 1, f"FAIL: {error}"
    try:
        why = page.missing()
        if why:
            return SKIPPED, f"SKIP {page.page}: {why}"
        page.check_flags(page_path)
        page.prepare()
        page.check()
    except DocError as error:
        return 1, f"FAIL: {error}"
    finally:
        page.close()
    lines = [f"PASS {page.page}: {len(page.blocks)} block(s), {page.ran} command(s) run and "
             f"checked, {page.flags_checked} flag(s) of prose and blocks in --help, "
             f"{len(page.skipped)} block(s) not run"]
    lines += [f"  not run: {line}" for line in page.skipped]
    return 0, "\n".join(lines)


# Control pages: the good one must pass, each other must fail with its message.
GOOD = """A page.

<!-- doctest: exits 0 1 -->
```
$ bucketsim check traces/tiny-ws2.json --policy backward-only --max-peak-reserved 6MiB
PASS backward-only: peak reserved 6.00 MiB (6291456 B) within budget 6.00 MiB (6291456 B)
...
$ bucketsim check traces/tiny-ws2.json --policy backward-only --max-peak-reserved 5MiB
FAIL backward-only: peak reserved 6.00 MiB ...
verdict: FAIL (1 check: 0 passed, 1 failed, 0 skipped)
```

`bucketsim gen transformer --layers 2 --world-size 4` and `bucketsim check T --tolerance 2%`.
"""
CONTROLS = [
    ("a wrong figure", GOOD.replace("6291456 B) within", "6291457 B) within"),
     "differs from the page"),
    ("a wrong exit code", GOOD.replace("exits 0 1", "exits 0 0"), "exited 1, the page implies 0"),
    ("an unannotated block", GOOD + "\n```text\nsome output\n```\n", "neither commands"),
    ("a skip without a reason", GOOD + "\n<!-- doctest: skip -->\n```\nx\n```\n", "needs a reason"),
    ("a removed flag in prose", GOOD + "\n`bucketsim sweep T --bucket-cap 5`\n",
     "the flag --bucket-cap, which its --help does not list"),
    ("a flag of a preset", GOOD.replace("--layers 2", "--layerz 2"), "the flag --layerz"),
    ("no such subcommand", GOOD + "\n`bucketsim compair T`\n", "is not a subcommand"),
    ("an output with no commands", "<!-- doctest: output -->\n```\nx\n```\n", "no command block"),
    ("a file that differs", "<!-- doctest: file reports/budget-example.json -->\n```json\n{}\n```\n",
     "differs from reports/budget-example.json"),
    ("an unclosed block", "```sh\nbucketsim version\n", "never closed"),
    ("an excerpt not in its file", "<!-- doctest: in README.md -->\n```\nno such line\n```\n",
     "is not in README.md"),
]


def self_test(binary, source):
    failures = 0
    with tempfile.TemporaryDirectory() as directory:
        for name, text, expected in [("the good page", GOOD, None)] + CONTROLS:
            path = os.path.join(directory, "page.md")
            with open(path, "w", encoding="utf-8") as page:
                page.write(text)
            code, message = check_page(binary, source, path)
            caught = code == 1 and expected is not None and expected in message
            passed = code == 0 and expected is None
            print(f"{'ok' if caught or passed else 'WRONG'}: {name}: exit {code}: "
                  f"{message.splitlines()[0] if message else ''}")
            failures += not (caught or passed)
    print("PASS: every control page judged as it must be" if failures == 0
          else f"FAIL: {failures} control page(s) judged wrongly")
    return 1 if failures else 0


def main(argv):
    if len(argv) == 4 and argv[1] == "--self-test":
        return self_test(argv[2], argv[3])
    if len(argv) != 4:
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    code, message = check_page(argv[1], argv[2], argv[3])
    print(message)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
