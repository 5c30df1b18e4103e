/**
 * Rules for what source comments may say, checked by `comments.test.ts` over the product and test
 * source:
 * - a comment cites only what is in the repository: no notes outside it (the shared research
 *   folder, the research notes by name), no repository path, `docs/` note or heading anchor that
 *   does not exist, no numbered section of a note (cite a heading anchor instead:
 *   `docs/oslo-wire.md#replies`);
 * - a comment says what is and why, never how the code got here: the patterns are in `HISTORY`.
 *
 * What counts as a repository path: a `.ts`, `.js`, `.md` or `.json` name with a folder
 * (`tracker/sync/syncer.ts`, `../lint/comments.test.ts`, `host/*.ts`), or a folder in backticks
 * ending in `/`, whose first folder exists beside the commenting file or above it; a bare `.ts` name is a sibling of the commenting file, a
 * bare `.md` name a note in `docs/`. Upstream sources cited by name (nova `compute/manager.py`) are
 * not repository paths and are not checked.
 *
 * Comments are found with TypeScript's scanner, guided by the parsed file where `/` starts a regular
 * expression and `}` continues a template, so strings and regular expressions are never mistaken
 * for comments.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';
import * as ts from 'typescript';

/** The folders whose .ts and .js files are checked. */
const CHECKED_FOLDERS = ['lib', 'model', 'config', 'tracker', 'virt-drivers', 'agent', 'bench', 'test', 'scripts'] as const;

const SKIPPED_FOLDERS = new Set(['node_modules', 'dist', 'fixtures', 'coverage']);

export interface CommentLine {
  /** 1-based. */
  readonly line: number;
  readonly text: string;
}

export interface Finding {
  /** `path:line`, the path relative to the repository root. */
  readonly where: string;
  readonly problem: string;
  readonly text: string;
}

interface Rule {
  readonly pattern: RegExp;
  readonly problem: string;
}

/** Notes that live outside the repository; `docs/` holds what the code cites. */
const OUTSIDE_CITATIONS: readonly Rule[] = [
  { pattern: /\.\.\/shared\/|\bshared\/(?:reference|fixtures)\b/, problem: 'cites the shared research folder, outside the repository' },
  {
    pattern: /(?<![\w/-])(?:rpc-protocol|placement-and-nova|openstack-2025|libraries-and-style|anchors|dev-stack|architecture)\.md\b/,
    problem: 'cites a research note outside the repository (write what is needed in docs/ and cite that)',
  },
  { pattern: /(?<!docs\/)\bnova-control-plane\.md\b/, problem: 'cites nova-control-plane.md outside the repository (docs/nova-control-plane.md is the note here)' },
  { pattern: /\.md\b[`'")\]]*,?\s*(?:sections?\s*[\dA-Z]|§)/i, problem: 'cites a section by number; cite a heading anchor (docs/x.md#heading)' },
];

const ISSUES = "speaks of the project's issues (history)";

/** History: comments say what is and why, not how the code got here. */
const HISTORY: readonly Rule[] = [
  { pattern: /\btoday\b/i, problem: 'speaks of history ("today")' },
  { pattern: /\b(?:this|the) issue\b/i, problem: ISSUES },
  { pattern: /\bissues? #?\d+/i, problem: ISSUES },
  { pattern: /\b(?:later|earlier|next|previous|future|upcoming|another) issues?\b/i, problem: ISSUES },
  { pattern: /\bissue (?:adds?|provides?|brings?|introduces?|asks?|replaces?|moves?|will)\b/i, problem: ISSUES },
  { pattern: /\bused to be\b|\b(?:we|it|they|this|that|agent|code) used to\b/i, problem: 'speaks of history ("used to")' },
  { pattern: /\bas (?:the agent|it|we) always (?:sent|did|had|was|were|wrote)\b/i, problem: 'speaks of history ("as it always did")' },
  { pattern: /\bformerly\b|\bfor now\b|\brefactor(?:ed|ing)?\b|\bnow lives?\b/i, problem: 'speaks of history' },
];

/** Every comment of `source`, split into lines, with their line numbers. */
export function commentLines(fileName: string, source: string): CommentLine[] {
  const kind = fileName.endsWith('.js') ? ts.ScriptKind.JS : ts.ScriptKind.TS;
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, false, kind);
  const regexStarts = new Set<number>();
  const templateContinuations = new Set<number>();
  const visit = (node: ts.Node): void => {
    if (node.kind === ts.SyntaxKind.RegularExpressionLiteral) regexStarts.add(node.getStart(file));
    else if (node.kind === ts.SyntaxKind.TemplateMiddle || node.kind === ts.SyntaxKind.TemplateTail) templateContinuations.add(node.getStart(file));
    ts.forEachChild(node, visit);
  };
  visit(file);
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, false, file.languageVariant, source);
  const lines: CommentLine[] = [];
  for (let token = scanner.scan(); token !== ts.SyntaxKind.EndOfFileToken; token = scanner.scan()) {
    const start = scanner.getTokenStart();
    if ((token === ts.SyntaxKind.SlashToken || token === ts.SyntaxKind.SlashEqualsToken) && regexStarts.has(start)) token = scanner.reScanSlashToken();
    else if (token === ts.SyntaxKind.CloseBraceToken && templateContinuations.has(start)) token = scanner.reScanTemplateToken(false);
    if (token !== ts.SyntaxKind.SingleLineCommentTrivia && token !== ts.SyntaxKind.MultiLineCommentTrivia) continue;
    const first = file.getLineAndCharacterOfPosition(start).line + 1;
    scanner.getTokenText().split('\n').forEach((text, i) => lines.push({ line: first + i, text }));
  }
  return lines;
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
export function headingAnchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

function anchorsOf(markdownFile: string): Set<string> {
  const anchors = new Set<string>();
  for (const line of readFileSync(markdownFile, 'utf8').split('\n')) {
    const m = /^#{1,6}\s+(.*)$/.exec(line);
    if (m?.[1]) anchors.add(headingAnchor(m[1]));
  }
  return anchors;
}

/** `a/{b,c}.ts` -> `a/b.ts`, `a/c.ts` (one level of braces). */
function expandBraces(path: string): string[] {
  const m = /\{([^{}]*)\}/.exec(path);
  if (!m) return [path];
  return m[1]!.split(',').flatMap((alt) => expandBraces(path.slice(0, m.index) + alt + path.slice(m.index + m[0].length)));
}

function isDirectory(path: string): boolean {
  return existsSync(path) && statSync(path).isDirectory();
}

/** Whether `path` (possibly with `*` in its last part) names something that exists. */
function pathExists(path: string): boolean {
  if (!path.includes('*')) return existsSync(path);
  const dir = dirname(path);
  if (!isDirectory(dir)) return false;
  const re = new RegExp(`^${basename(path).split('*').map((s) => s.replace(/[.+?^$()[\]\\|]/g, '\\$&')).join('.*')}$`);
  return readdirSync(dir).some((name) => re.test(name));
}

const CITED_PATH = /(?<![\w/:.@-])((?:\.{1,2}\/)*[\w@.*{},-]+(?:\/[\w@.*{},-]+)*\.(?:ts|js|md|json))(#[\w-]+)?(?![\w/-])/g;
/** A folder in backticks: `tracker/sync/`. */
const CITED_FOLDER = /`((?:\.{1,2}\/)*[\w@.-]+(?:\/[\w@.-]+)*\/)`/g;

/**
 * The problem with a path cited from `file` (absolute), or undefined when it resolves or is not a
 * repository path at all.
 */
function citedPathProblem(root: string, file: string, cited: string, anchor: string | undefined): string | undefined {
  if (cited.startsWith('dist/')) return undefined;
  const hasFolder = cited.includes('/');
  const ext = cited.endsWith('/') ? '' : cited.slice(cited.lastIndexOf('.') + 1);
  let bases: string[];
  if (!hasFolder) {
    if (ext === 'ts') bases = [dirname(file)];
    else if (ext === 'md') bases = [dirname(file), join(root, 'docs'), root];
    else return undefined;
  } else {
    bases = [];
    for (let dir = dirname(file); ; dir = dirname(dir)) {
      bases.push(dir);
      if (dir === root || !dir.startsWith(root)) break;
    }
    const firstFolder = cited.replace(/^(?:\.{1,2}\/)+/, '').split('/')[0]!;
    if (!cited.startsWith('.') && !bases.some((b) => isDirectory(join(b, firstFolder)))) return undefined;
    if (cited.startsWith('.')) bases = [dirname(file)];
  }
  for (const base of bases) {
    const candidates = expandBraces(cited).map((p) => resolve(base, p));
    // A folder is in the repository when it holds something (git keeps no empty folders).
    const exists = ext === '' ? (p: string): boolean => isDirectory(p) && readdirSync(p).length > 0 : pathExists;
    if (!candidates.every(exists)) continue;
    if (anchor && ext === 'md' && !candidates.some((c) => anchorsOf(c).has(anchor.slice(1)))) {
      return `cites ${cited}${anchor}: no such heading in ${relative(root, candidates[0]!)}`;
    }
    return undefined;
  }
  return `cites ${cited}, which is not in the repository`;
}

/** A comment line's words, without the comment's own markers. */
const words = (text: string): string => text.replace(/^\s*(?:\/\/+|\/\*+|\*+(?!\/))?\s*/, '').replace(/\s*\*+\/\s*$/, '');

/** Every problem in the comments of one file. */
export function checkFile(root: string, file: string, source: string): Finding[] {
  const findings: Finding[] = [];
  const rel = relative(root, file);
  const lines = commentLines(file, source);
  lines.forEach(({ line, text }, i) => {
    const problems = new Set<string>();
    const report = (problem: string): void => {
      if (!problems.has(problem)) findings.push({ where: `${rel}:${line}`, problem, text: text.trim() });
      problems.add(problem);
    };
    // A phrase may run on to the next comment line; it is reported where it starts.
    const next = lines[i + 1]?.line === line + 1 ? words(lines[i + 1]!.text) : '';
    const joined = `${words(text)} ${next}`;
    for (const rule of [...OUTSIDE_CITATIONS, ...HISTORY]) {
      if (rule.pattern.test(text) || (rule.pattern.test(joined) && !rule.pattern.test(next))) report(rule.problem);
    }
    if (OUTSIDE_CITATIONS.some((r) => problems.has(r.problem))) return; // said once is enough
    for (const m of [...text.matchAll(CITED_PATH), ...text.matchAll(CITED_FOLDER)]) {
      const problem = citedPathProblem(root, file, m[1]!, m[2]);
      if (problem) report(problem);
    }
  });
  return findings;
}

function sourceFiles(dir: string, out: string[]): string[] {
  if (!isDirectory(dir)) return out;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (SKIPPED_FOLDERS.has(entry.name) || entry.name.startsWith('.')) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) sourceFiles(path, out);
    else if (/\.(?:ts|js)$/.test(entry.name)) out.push(path);
  }
  return out;
}

/** Every problem in the comments of the checked folders under `root`. */
export function checkTree(root: string): Finding[] {
  const findings: Finding[] = [];
  for (const file of CHECKED_FOLDERS.flatMap((f) => sourceFiles(join(root, f), []))) {
    let source: string;
    try {
      source = readFileSync(file, 'utf8');
    } catch {
      continue; // removed while the tree was being read
    }
    findings.push(...checkFile(root, file, source));
  }
  return findings;
}
