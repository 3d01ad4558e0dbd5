#!/usr/bin/env python3
"""Checks editors/tfm.tmLanguage.json against every .tfm file of the repo.

A small TextMate tokenizer (match rules with captures, begin/end rules with
inner patterns, #includes; at each position the rule matching leftmost
wins, ties to the earlier rule, as in vscode-textmate) runs over each file
line by line. Every byte that is not white space must get a scope, and no
begin/end rule may be left open at the end of a file. The grammar's
and the Vim syntax file's built-in functions must be the checker's
(compiler/front/builtins.c).

The regular expressions are kept to what Oniguruma (editors) and Python's
re agree on: \\b, classes, alternation, (?=...), $.

usage: check_grammar.py REPO_ROOT       (exit 1 on any problem)
       check_grammar.py --self-test     (the checker finds planted faults)
"""
import glob
import json
import os
import re
import sys


class Grammar:
    def __init__(self, data):
        self.repo = data.get("repository", {})
        self.top = data["patterns"]
        self.compiled = {}

    def rules(self, patterns):
        """The rules of a pattern list, #includes expanded, in order."""
        out = []
        for p in patterns:
            if "include" in p:
                name = p["include"]
                if not name.startswith("#") or name[1:] not in self.repo:
                    raise ValueError("unknown include %r" % name)
                out.extend(self.rules([self.repo[name[1:]]]))
            elif "match" in p or "begin" in p:
                out.append(p)
            elif "patterns" in p:
                out.extend(self.rules(p["patterns"]))
            else:
                raise ValueError("a rule with neither match, begin nor patterns: %r" % p)
        return out

    def regex(self, text):
        if text not in self.compiled:
            self.compiled[text] = re.compile(text)
        return self.compiled[text]


def tokenize(grammar, text):
    """Yields (line, col, problem) for each fault in text."""
    stack = []  # open begin/end rules
    lines = text.split("\n")
    for lineno, line in enumerate(lines, 1):
        covered = [False] * len(line)

        def cover(a, b):
            for k in range(a, b):
                covered[k] = True

        pos, empty_steps = 0, 0
        while pos <= len(line) and empty_steps < 3:
            inside = bool(stack) and "name" in stack[-1]
            rules = grammar.rules(stack[-1].get("patterns", []) if stack else grammar.top)
            best = None  # (start, rule); the open rule's end wins ties
            if stack:
                m = grammar.regex(stack[-1]["end"]).search(line, pos)
                if m:
                    best = (m, None)
            for r in rules:
                m = grammar.regex(r.get("match", r.get("begin"))).search(line, pos)
                if m and (best is None or m.start() < best[0].start()):
                    best = (m, r)
            if best is None:
                break
            m, rule = best
            if inside:
                cover(pos, m.end())  # the gap before the match is in the open rule's scope
            if rule is None:
                if "name" in stack[-1] or "0" in stack[-1].get("endCaptures", {}):
                    cover(m.start(), m.end())
                stack.pop()
            elif "begin" in rule:
                if "name" in rule or "0" in rule.get("beginCaptures", {}):
                    cover(m.start(), m.end())
                stack.append(rule)
            else:
                caps = rule.get("captures", {})
                if "name" in rule or "0" in caps:
                    cover(m.start(), m.end())
                if rule.get("name", "").startswith("invalid."):
                    yield lineno, m.start() + 1, "%r is marked %s" % (m.group(0), rule["name"]), "invalid"
                else:  # only the named groups get a scope
                    for g in caps:
                        if m.group(int(g)) is not None:
                            cover(m.start(int(g)), m.end(int(g)))
            if m.end() > pos:
                pos, empty_steps = m.end(), 0
            else:
                empty_steps += 1
                if rule is not None and "begin" not in rule:
                    pos += 1
        if stack and "name" in stack[-1]:
            cover(pos, len(line))
        for k, ch in enumerate(line):
            if not covered[k] and not ch.isspace():
                yield lineno, k + 1, "%r has no scope" % ch, "unscoped"
    if stack:
        yield (len(lines), 1, "a rule begun by %r is still open at the end of the file" % stack[-1]["begin"],
               "open")


def check_files(root, grammar):
    """Every .tfm file of the repo (not build trees); tokens marked invalid
    are expected only in the front end's syntax-error cases."""
    problems = 0
    files = []
    for f in sorted(glob.glob(os.path.join(root, "**", "*.tfm"), recursive=True)):
        rel = os.path.relpath(f, root)
        if rel.split(os.sep)[0].startswith("build"):
            continue
        files.append(f)
        bad_on_purpose = rel.startswith("tests/front/cases/syntax_")
        for line, col, what, kind in tokenize(grammar, open(f, encoding="utf-8", errors="replace").read()):
            if kind == "invalid" and bad_on_purpose:
                continue
            print("%s:%d:%d: %s" % (rel, line, col, what))
            problems += 1
    return files, problems


def builtins_in_sync(root, data):
    """The grammar's and the Vim syntax's built-in functions are builtins.c's."""
    src = open(os.path.join(root, "compiler/front/builtins.c")).read()
    body = re.search(r"function_names\[\] = \{(.*?)\};", src, re.S).group(1)
    want = set(re.findall(r'"([a-z_0-9]+)"', body))
    alternation = re.search(r"\(([^()]*)\)", data["repository"]["builtin"]["match"]).group(1)
    vim = open(os.path.join(root, "editors/vim/syntax/tfm.vim")).read()
    in_vim = set(" ".join(re.findall(r"^syntax keyword tfmBuiltin (.*)$", vim, re.M)).split())
    problems = 0
    for where, have in (("editors/tfm.tmLanguage.json", set(alternation.split("|"))),
                        ("editors/vim/syntax/tfm.vim", in_vim)):
        if want != have:
            print("%s: built-ins differ from compiler/front/builtins.c: missing %s, extra %s"
                  % (where, sorted(want - have), sorted(have - want)))
            problems += 1
    return problems


def self_test(root):
    grammar = Grammar(json.load(open(os.path.join(root, "editors/tfm.tmLanguage.json"))))
    faults = list(tokenize(grammar, 'let x = 1 $ 2\nlet s = "ok"\n'))
    open_string = list(tokenize(Grammar({"patterns": [{"begin": "<", "end": ">", "name": "a"}]}),
                                "< never closed\n"))
    gap = list(tokenize(Grammar({"patterns": [{"match": "a"}]}), "a b\n"))
    good = list(tokenize(grammar, 'fn f(x) { return x ** 2.5e-3 }  # done\n'))
    ok = (len(faults) == 1 and faults[0][:2] == (1, 11) and faults[0][3] == "invalid" and
          [f[3] for f in open_string] == ["open"] and [f[3] for f in gap] == ["unscoped"] * 2 and
          not good)
    print("self-test: %s (planted '$': %r; open rule: %r; unscoped: %r; clean line: %r)"
          % ("ok" if ok else "FAILED", faults, open_string, gap, good))
    return 0 if ok else 1


def main():
    if sys.argv[1:2] == ["--self-test"]:
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        sys.exit(self_test(root))
    root = os.path.abspath(sys.argv[1])
    data = json.load(open(os.path.join(root, "editors/tfm.tmLanguage.json")))
    grammar = Grammar(data)
    files, problems = check_files(root, grammar)
    problems += builtins_in_sync(root, data)
    print("%d .tfm files, %d problem(s)" % (len(files), problems))
    sys.exit(1 if problems or not files else 0)


if __name__ == "__main__":
    main()
