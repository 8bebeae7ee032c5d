#!/usr/bin/env python3
"""Words per sentence of Markdown pages, outside code blocks, tables and headings (docs style: short sentences).
Usage: python3 scripts/sentence_length.py FILE.md...   (LONG=N also lists the N longest sentences)"""
import re, sys
def measure(path):
    text, inblock = [], False
    for line in open(path, encoding="utf-8"):
        s = line.rstrip("\n")
        if s.startswith("```"):
            inblock = not inblock
            continue
        if inblock or s.lstrip().startswith("|") or s.startswith("#"):
            text.append("")  # paragraph break
            continue
        if re.match(r"^\s*([-*]|\d+\.)\s+", s):
            text.append("")  # a list item is a unit of its own
        text.append(s)
    paras = re.split(r"\n\s*\n", "\n".join(text))
    sentences = []; global LONG; LONG = []
    for p in paras:
        p = re.sub(r"^\s*[-*]\s+", " ", p, flags=re.M)      # list bullets
        p = re.sub(r"`[^`]*`", "CODE", p)                     # inline code is one word
        p = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", p)       # links: their text
        p = " ".join(p.split())
        if not p:
            continue
        # a sentence ends at . ! or ? followed by a space and a capital/backtick/paren, or at the paragraph's end
        parts = re.split(r"(?<=[.!?])\s+(?=[A-Z(\"])", p)
        for part in parts:
            words = [w for w in part.split() if re.search(r"\w", w)]
            if words:
                sentences.append(len(words)); LONG.append((len(words), part))
    n = len(sentences)
    return n, (sum(sentences) / n if n else 0), (max(sentences) if n else 0)
for path in sys.argv[1:]:
    n, avg, mx = measure(path)
    print(f"{path}: {n} sentences, {avg:.1f} words/sentence, longest {mx}")
    if len(sys.argv) > 1 and __import__("os").environ.get("LONG"):
        for n_, part in sorted(LONG, reverse=True)[: int(__import__("os").environ["LONG"])]:
            print(f"  {n_}: {part[:300]}")
