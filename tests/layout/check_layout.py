#!/usr/bin/env python3
"""The source layout's rules (docs/internals.md, "The map"), checked from
the sources:

1. compiler/codegen/: plan/ includes nothing of llvm/, cpu/ or ptx/ and no
   LLVM header; llvm/ nothing of cpu/ or ptx/; cpu/ and ptx/ nothing of
   each other.
2. compiler/front/: the modules (X.c with its header X.h; a module split
   by concept is X.c and X_PART.c sharing X_internal.h) include each other
   without a cycle, so each include is a dependency in one direction.
3. No C source or header in compiler/ or runtime/ is over 1,000 lines,
   unless it says why it must be one file in a comment starting with
   "One file because".

4. With the built archives of compiler/codegen (--archive FOLDER=PATH for
   plan, llvm, cpu and ptx), calls follow the same rule: no archive uses a
   symbol that only a folder it may not include defines (a declaration
   written by hand would pass the include check, not this one).

Prints each violation with its file and line; exit 1 if any.
usage: check_layout.py REPO_ROOT [--archive FOLDER=PATH]..."""
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]')
CODEGEN_ALLOWED = {  # folder -> the codegen folders it may include from
    "plan": {"plan"},
    "llvm": {"llvm", "plan"},
    "cpu": {"cpu", "llvm", "plan"},
    "ptx": {"ptx", "llvm", "plan"},
}
MAX_LINES = 1000
SOURCE = (".c", ".h", ".y", ".l")


def sources(root, top):
    for folder, _, names in os.walk(os.path.join(root, top)):
        for name in sorted(names):
            if name.endswith(SOURCE):
                yield os.path.join(folder, name)


def includes(path):
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield number, m.group(1) == "<", m.group(2)


def check_codegen(root, problems):
    codegen = os.path.join(root, "compiler", "codegen")
    where = {}  # header name -> its codegen folder
    for folder in CODEGEN_ALLOWED:
        for name in os.listdir(os.path.join(codegen, folder)):
            if name.endswith(".h"):
                if name in where:
                    problems.append(f"compiler/codegen: {name} is in both {where[name]}/ and {folder}/")
                where[name] = folder
    for folder, allowed in CODEGEN_ALLOWED.items():
        for path in sources(root, os.path.join("compiler", "codegen", folder)):
            rel = os.path.relpath(path, root)
            for number, system, name in includes(path):
                if system and name.startswith("llvm-c/") and folder == "plan":
                    problems.append(f"{rel}:{number}: plan/ includes LLVM ({name}): kernel formation knows no LLVM")
                owner = where.get(os.path.basename(name)) if not system else None
                if owner and owner not in allowed:
                    problems.append(f"{rel}:{number}: {folder}/ includes {name} of {owner}/ "
                                    f"(allowed: {', '.join(sorted(allowed))})")


def check_front(root, problems):
    front = os.path.join(root, "compiler", "front")
    stems = {os.path.splitext(n)[0] for n in os.listdir(front) if n.endswith(SOURCE)}
    split = {s[: -len("_internal")] for s in stems if s.endswith("_internal")}

    def module_of(stem):
        owner = stem.split("_", 1)[0]
        return owner if owner in split else stem

    modules = {module_of(s) for s in stems}
    edges = {m: {} for m in modules}  # module -> {included module: (file, line)}
    for path in sources(root, os.path.join("compiler", "front")):
        module = module_of(os.path.splitext(os.path.basename(path))[0])
        for number, system, name in includes(path):
            target = module_of(os.path.splitext(name)[0])
            # Generated headers (parser.h, lexer.h) are not in the tree.
            if system or target == module or target not in modules:
                continue
            if not os.path.exists(os.path.join(front, name)):
                continue
            edges[module].setdefault(target, (os.path.relpath(path, root), number))
    state = {}

    def visit(m, stack):
        state[m] = 1
        for t in sorted(edges[m]):
            if state.get(t) == 1:
                cycle = stack[stack.index(t):] + [t]
                where = ", ".join(f"{edges[a][b][0]}:{edges[a][b][1]}"
                                  for a, b in zip(cycle, cycle[1:]))
                problems.append(f"compiler/front: include cycle {' -> '.join(cycle)} ({where})")
            elif t not in state:
                visit(t, stack + [t])
        state[m] = 2

    for m in sorted(modules):
        if m not in state:
            visit(m, [m])


def check_lengths(root, problems):
    for top in ("compiler", "runtime"):
        for path in sources(root, top):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            lines = text.count("\n")
            if lines > MAX_LINES and "One file because" not in text:
                problems.append(f"{os.path.relpath(path, root)}: {lines} lines (over {MAX_LINES}) "
                                "with no comment saying \"One file because ...\"")


def archive_symbols(path):
    """The archive's defined and undefined global symbols."""
    out = subprocess.run(["nm", "-g", path], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] != "U":
            defined.add(parts[2])
    return defined, undefined - defined


def check_calls(archives, problems):
    symbols = {folder: archive_symbols(path) for folder, path in archives.items()}
    for folder, (_, undefined) in symbols.items():
        for other, (defined, _) in symbols.items():
            if other in CODEGEN_ALLOWED[folder]:
                continue
            for name in sorted(undefined & defined):
                problems.append(f"compiler/codegen/{folder}/ calls {name} of {other}/ "
                                f"(allowed: {', '.join(sorted(CODEGEN_ALLOWED[folder]))})")


def main():
    args = sys.argv[1:]
    if len(args) < 1 or len(args) % 2 != 1 or any(a != "--archive" for a in args[1::2]):
        print(__doc__.split("\n\n")[-1], file=sys.stderr)
        return 2
    root = args[0]
    archives = dict(a.split("=", 1) for a in args[2::2])
    if any(folder not in CODEGEN_ALLOWED for folder in archives):
        print(f"check_layout.py: --archive takes one of {', '.join(CODEGEN_ALLOWED)}", file=sys.stderr)
        return 2
    problems = []
    check_codegen(root, problems)
    check_calls(archives, problems)
    check_front(root, problems)
    check_lengths(root, problems)
    for p in problems:
        print(p)
    print(f"layout: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
