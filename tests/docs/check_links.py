#!/usr/bin/python3
"""check_links.py ROOT DOC... - every markdown link of the documents leads to
a file inside the repository that exists, and every #anchor to a heading of
its target (GitHub's slug: lower case, punctuation but - and _ dropped,
spaces as -).  Prints one line per broken link; exit 1 if any."""
import os
import re
import sys

LINK = re.compile(r'\]\(([^)\s]+)\)')


def slug(heading):
    return re.sub(r'[^\w\- ]', '', heading.strip().lower()).replace(' ', '-')


def anchors(path):
    out, fence = set(), False
    for line in open(path, encoding='utf-8'):
        if line.startswith('```'):
            fence = not fence
        elif not fence and re.match(r'#{1,6} ', line):
            out.add(slug(re.sub(r'^#+ ', '', line.rstrip('\n'))))
    return out


def main(root, docs):
    root = os.path.realpath(root)
    bad = 0
    for doc in docs:
        fence = False
        for n, line in enumerate(open(os.path.join(root, doc), encoding='utf-8'), 1):
            if line.startswith('```'):
                fence = not fence
            if fence:
                continue
            for target in LINK.findall(line):
                if re.match(r'^[a-z]+:', target):
                    continue
                path, _, anchor = target.partition('#')
                full = os.path.realpath(os.path.join(root, os.path.dirname(doc), path)) if path else \
                    os.path.join(root, doc)
                if not (full == root or full.startswith(root + os.sep)):
                    print(f'{doc}:{n}: {target} leads outside the repository')
                    bad += 1
                elif not os.path.exists(full):
                    print(f'{doc}:{n}: {target}: no such file')
                    bad += 1
                elif anchor and full.endswith('.md') and anchor not in anchors(full):
                    print(f'{doc}:{n}: {target}: no such heading in {os.path.relpath(full, root)}')
                    bad += 1
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1], sys.argv[2:]))
