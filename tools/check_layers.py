#!/usr/bin/env python3
"""Every #include of src/ within the layers: a file may include its own room and the rooms below.

    tools/check_layers.py [SRC_DIR]     exit 0, or 1 with one line per upward include

The rooms (src/ directories) and what each may include, from the bottom up. core is the standard
library and fmt only; policy, memory and backend (the sim's time model, the real backends) stand
on core alone, side by side; engine (the replay) on those three; gen (the emitter and the what-ifs,
and tune's runner, which emits straight into a replay) on engine; io (the file formats) on gen;
report on io; cli on everything. CMake builds one library per room (src/CMakeLists.txt) linking
only the rooms below; this check makes an include of a room above fail the suite
(ctest Layers.NoUpwardInclude), where a header-only use would otherwise compile unnoticed.
"""
import pathlib
import re
import sys

ALLOWED = {
    "core": set(),
    "policy": {"core"},
    "memory": {"core"},
    "backend": {"core"},
    "engine": {"core", "policy", "memory", "backend"},
    "gen": {"core", "policy", "memory", "backend", "engine"},
    "io": {"core", "policy", "memory", "backend", "engine", "gen"},
    "report": {"core", "policy", "memory", "backend", "engine", "gen", "io"},
    "cli": {"core", "policy", "memory", "backend", "engine", "gen", "io", "report"},
}
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([a-z_]+)/', re.MULTILINE)


def check(src: pathlib.Path) -> list[str]:
    problems = []
    for path in sorted(src.rglob("*")):
        if path.suffix not in {".h", ".cc", ".cu", ".cuh"}:
            continue
        room = path.relative_to(src).parts[0]
        if room not in ALLOWED:
            problems.append(f"{path.relative_to(src)}: room '{room}' is not in the layer table")
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in INCLUDE.finditer(text):
            target = match.group(1)
            if target == room or target not in ALLOWED:
                continue
            if target not in ALLOWED[room]:
                line = text.count("\n", 0, match.start()) + 1
                problems.append(
                    f"{path.relative_to(src)}:{line}: includes {target}/, above {room}/ "
                    f"(which may include {', '.join(sorted(ALLOWED[room])) or 'nothing of src'})")
    return problems


def main() -> int:
    src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent / "src")
    if not src.is_dir():
        print(f"check_layers: {src}: not a directory", file=sys.stderr)
        return 2
    problems = check(src)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
