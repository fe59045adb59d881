#!/usr/bin/env node
// Every relative link in README.md, docs/*.md, CHANGELOG.md and RELEASING.md resolves:
// the file exists and, with #anchor, a heading of that Markdown file has that GitHub slug.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';

const root = process.argv[2] ?? '.';
const docs = readdirSync(join(root, 'docs'))
  .filter((f) => f.endsWith('.md'))
  .sort()
  .map((f) => join(root, 'docs', f));
const files = [join(root, 'README.md'), ...docs, join(root, 'CHANGELOG.md'), join(root, 'RELEASING.md')].filter((f) => existsSync(f));

/** The anchors GitHub gives the headings of `path` (outside fenced code). */
function slugs(path) {
  const out = new Set();
  const seen = new Map();
  let fence = false;
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (line.startsWith('```')) {
      fence = !fence;
      continue;
    }
    if (fence) continue;
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const text = m[1].replace(/\[([^\]]*)\]\([^)]*\)/g, '$1');
    const s = text
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}_\- ]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(s) ?? 0;
    seen.set(s, n + 1);
    out.add(n === 0 ? s : `${s}-${n}`);
  }
  return out;
}

let bad = 0;
for (const f of files) {
  const text = readFileSync(f, 'utf8').replace(/```[\s\S]*?```/g, '');
  for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1];
    if (/^[a-z]+:/.test(target)) continue;
    const [path, anchor] = target.split('#', 2);
    const dest = path ? normalize(join(dirname(f), path)) : f;
    if (!existsSync(dest)) {
      console.log(`${f}: ${target}: no such file`);
      bad++;
    } else if (anchor && dest.endsWith('.md') && !slugs(dest).has(anchor)) {
      console.log(`${f}: ${target}: no heading #${anchor}`);
      bad++;
    }
  }
}
if (bad) {
  console.log(`check-links: ${bad} broken link(s)`);
  process.exit(1);
}
