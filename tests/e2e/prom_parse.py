#!/usr/bin/env python3
"""Reads the Prometheus text exposition format (version 0.0.4) from stdin, strictly, and prints
one line per sample, "name label=value,label=value value", sorted; exits 1 naming the first
line that breaks the format. Debian's promtool comes only with the whole prometheus server
(96 MB installed), so the e2e tests check dblock metrics with this instead.

What it enforces, from the format's description: lines end in \\n; "# HELP name text" and
"# TYPE name type" (type one of counter, gauge, histogram, summary, untyped) come at most once
per metric, TYPE before its samples; a metric's samples stand together; names match
[a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*; label values are double-quoted
with only \\\\, \\" and \\n escapes; a sample's value is a Go float (or NaN, +Inf, -Inf) and an
optional integer timestamp follows; no label name twice in one sample, no sample twice."""
import re
import sys

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def fail(n, line, why):
    sys.exit(f"line {n}: {why}: {line!r}")


def parse_value(text):
    if text in ("NaN", "+Inf", "-Inf", "Inf"):
        return float(text.replace("Inf", "inf").replace("NaN", "nan"))
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text):
        raise ValueError(text)
    return float(text)


def parse_labels(text, n, line):
    labels, i = {}, 0
    while i < len(text):
        m = re.compile(LABEL + r'="').match(text, i)
        if not m:
            fail(n, line, "bad label")
        name = m.group(0)[:-2]
        i, value = m.end(), ""
        while True:
            if i >= len(text):
                fail(n, line, "unterminated label value")
            c = text[i]
            if c == "\\":
                nxt = text[i + 1:i + 2]
                if nxt not in ("\\", '"', "n"):
                    fail(n, line, "bad escape in label value")
                value += {"\\": "\\", '"': '"', "n": "\n"}[nxt]
                i += 2
            elif c == '"':
                i += 1
                break
            elif c == "\n":
                fail(n, line, "line feed in label value")
            else:
                value += c
                i += 1
        if name in labels:
            fail(n, line, f"label {name} twice")
        labels[name] = value
        if i < len(text):
            if text[i] != ",":
                fail(n, line, "expected ',' between labels")
            i += 1
    return labels


def main():
    data = sys.stdin.read()
    if data and not data.endswith("\n"):
        sys.exit("the last line does not end in a line feed")
    helps, types, done, seen, sampled, samples = set(), {}, set(), set(), set(), []
    current = None
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            m = re.fullmatch(r"# (HELP|TYPE) (" + NAME + r") ?(.*)", line)
            if not m:
                continue  # a plain comment
            kind, name, rest = m.groups()
            if name in done:
                fail(n, line, "metric comes back after other metrics")
            if kind == "HELP":
                if name in helps:
                    fail(n, line, "second HELP")
                helps.add(name)
            else:
                if name in types or rest not in TYPES:
                    fail(n, line, "second or unknown TYPE")
                if name in sampled:
                    fail(n, line, "TYPE after samples")
                types[name] = rest
            if current and current != name:
                done.add(current)
            current = name
            continue
        m = re.fullmatch(r"(" + NAME + r")(\{(.*)\})? (\S+)( -?\d+)?", line)
        if not m:
            fail(n, line, "not a sample")
        name, _, label_text, value, _ = m.groups()
        if name in done:
            fail(n, line, "samples of a metric not together")
        if current and current != name:
            done.add(current)
        current = name
        sampled.add(name)
        labels = parse_labels(label_text or "", n, line)
        try:
            parse_value(value)
        except ValueError:
            fail(n, line, "bad value")
        ident = (name, tuple(sorted(labels.items())))
        if ident in seen:
            fail(n, line, "sample twice")
        seen.add(ident)
        samples.append(f"{name} {','.join(f'{k}={v}' for k, v in sorted(labels.items()))} {value}")
    for s in sorted(samples):
        print(s)


main()
