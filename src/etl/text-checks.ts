// The engine's text check, run on every snapshot of every pipeline before the gate: a text
// column holding U+FFFD (bytes that were not valid in the encoding they were read with),
// double-encoded text (UTF-8 bytes read as Latin-1 or CP1252: 'PlÃ¡cido', 'AÃ‡ÃƒO') or C1
// control characters (U+0080–U+009F: CP1252 punctuation read as ISO-8859-1 upstream, 'd\u0092Água',
// or a DOS code page read as a Windows one) means text was lost or garbled on its way in,
// and publishing it is silent damage.
// One scan per table counts the rows per text column (jsonb `extra` included, as text);
// up to 5 example values per column are kept, CPFs masked.
import type pg from 'pg';
import { ident } from '../db/pool.ts';
import { maskCpfsInText } from '../privacy.ts';
import type { GateFailure, GateRule } from './quality.ts';

/**
 * UTF-8 read as Latin-1 or CP1252: a lead byte 0xC2/0xC3 read as 'Â'/'Ã' followed by a
 * continuation byte read as U+0080–U+00BF (Latin-1) or as CP1252's 0x80–0x9F characters
 * ('Ã‡' is Ç, 'Ãƒ' is Ã, 'Ã‰' is É), and 'â€' (the start of every 0xE2 0x80 punctuation:
 * ‘ ’ “ ” – —). 'Â' before U+0080–U+009F is left out: it would be a C1 control either way.
 */
const CP1252_CONTINUATION = '\\u0152\\u0153\\u0160\\u0161\\u0178\\u017D\\u017E\\u0192\\u02C6\\u02DC\\u2013\\u2014\\u2018-\\u201A\\u201C-\\u201E\\u2020-\\u2022\\u2026\\u2030\\u2039\\u203A\\u20AC\\u2122';
export const DOUBLE_ENCODED_RE = `\\u00C3[\\u0080-\\u00BF${CP1252_CONTINUATION}]|\\u00C2[\\u00A0-\\u00BF]|\\u00E2\\u20AC`;

const EXAMPLES = 5;
const EXAMPLE_CHARS = 120;

export interface TextColumnFinding {
  table: string;
  column: string;
  /** Rows whose value holds U+FFFD. */
  replacement: number;
  /** Rows whose value holds a double-encoding pattern. */
  double_encoded: number;
  /** Rows whose value holds a C1 control character (U+0080–U+009F) and no double-encoding pattern. */
  control: number;
  /** Rows of the table. */
  rows: number;
  /** Up to 5 distinct offending values (CPFs masked, cut at 120 characters). */
  examples: string[];
}

export interface TextCheckResult {
  /** Text columns scanned per table. */
  scanned: Record<string, number>;
  findings: TextColumnFinding[];
  failures: GateFailure[];
  /** Findings below their gate's threshold, for the report's notes. */
  notes: string[];
}

/**
 * C1 controls block when more than this share of a table's rows hold them in one column. A
 * code page read wrongly garbles most accented values; a few rows are stray bytes in the
 * source (CP1252 leaves 0x81, 0x8D, 0x8F, 0x90, 0x9D undefined), kept as they are, counted and
 * noted: one stray byte must not block a national Receita month.
 */
export const CONTROL_SHARE = 0.001;

/** Text, varchar, char and jsonb columns of a table (jsonb read as its text). */
async function textColumns(db: pg.Pool | pg.ClientBase, table: string): Promise<{ name: string; json: boolean }[]> {
  const r = await db.query(
    `SELECT a.attname AS name, t.typname = 'jsonb' OR t.typname = 'json' AS json
       FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
      WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
        AND t.typname IN ('text', 'varchar', 'bpchar', 'jsonb', 'json')
      ORDER BY a.attnum`,
    [table],
  );
  return r.rows;
}

const valueOf = (c: { name: string; json: boolean }) => (c.json ? `${ident(c.name)}::text` : ident(c.name));
const hasFffd = (v: string) => `strpos(${v}, U&'\\FFFD') > 0`;
// strpos is a byte search and far cheaper than the regex: only values holding a lead
// character of the pattern reach it (accented text is common, mojibake is not).
const hasDouble = (v: string) => `(strpos(${v}, 'Ã') > 0 OR strpos(${v}, 'Â') > 0 OR strpos(${v}, 'â€') > 0) AND ${v} ~ '${DOUBLE_ENCODED_RE}'`;
// A C1 control is never text; one inside a double-encoding pattern is counted there only. In
// UTF-8, U+0080–U+00BF all begin with the byte 0xC2 (Portuguese letters begin with 0xC3): only
// values holding that byte reach the regex (2 M theme names: 0.40 → 0.22 s over the scan).
// A NUL in the source is loaded as U+2400 (copy.ts NUL_STANDS_IN) and counted with them: a stray byte too.
const hasControl = (v: string) =>
  `(strpos(${v}, U&'\\2400') > 0 OR (position('\\xc2'::bytea in convert_to(${v}, 'UTF8')) > 0 AND ${v} ~ '[\\u0080-\\u009F]' AND NOT coalesce(${hasDouble(v)}, false)))`;

/** Scans one table: the counts per column in one pass, examples only for columns with hits. */
async function scanTable(db: pg.Pool | pg.ClientBase, table: string): Promise<{ columns: number; findings: TextColumnFinding[] }> {
  const cols = await textColumns(db, table);
  if (cols.length === 0) return { columns: 0, findings: [] };
  // Plain expressions over the table (a subquery fenced with OFFSET 0 would cast jsonb once
  // but lose the parallel scan: 2.3 s against 1.0 s on 1 M rows).
  const exprs = ['count(*)::float8 AS n', ...cols.flatMap((c, i) => [
    `count(*) FILTER (WHERE ${hasFffd(valueOf(c))})::int AS f${i}`,
    `count(*) FILTER (WHERE ${hasDouble(valueOf(c))})::int AS d${i}`,
    `count(*) FILTER (WHERE ${hasControl(valueOf(c))})::int AS c${i}`,
  ])];
  const counts = (await db.query(`SELECT ${exprs.join(', ')} FROM ${table}`)).rows[0] as Record<string, number>;
  const findings: TextColumnFinding[] = [];
  for (let i = 0; i < cols.length; i++) {
    const replacement = counts[`f${i}`];
    const doubleEncoded = counts[`d${i}`];
    const control = counts[`c${i}`];
    if (!replacement && !doubleEncoded && !control) continue;
    const v = valueOf(cols[i]);
    const ex = await db.query(`SELECT DISTINCT left(${v}, ${EXAMPLE_CHARS}) AS v FROM ${table} WHERE ${hasFffd(v)} OR (${hasDouble(v)}) OR (${hasControl(v)}) LIMIT ${EXAMPLES}`);
    findings.push({
      table,
      column: cols[i].name,
      replacement,
      double_encoded: doubleEncoded,
      control,
      rows: counts.n,
      examples: ex.rows.map((r) => maskCpfsInText(r.v as string)),
    });
  }
  return { columns: cols.length, findings };
}

function failure(rule: string, what: string, findings: TextColumnFinding[], count: (f: TextColumnFinding) => number): GateFailure[] {
  const hit = findings.filter((f) => count(f) > 0);
  return hit.length ? [gateFailure(rule, what, hit, count, 0)] : [];
}

const whereFound = (hit: TextColumnFinding[], count: (f: TextColumnFinding) => number) =>
  hit.map((f) => `${f.table}.${f.column} ${count(f)} (e.g. ${JSON.stringify(f.examples[0] ?? '')})`).join(', ');

function gateFailure(rule: string, what: string, hit: TextColumnFinding[], count: (f: TextColumnFinding) => number, threshold: number): GateFailure {
  const total = hit.reduce((a, f) => a + count(f), 0);
  return { rule, message: `${total} values ${what}: ${whereFound(hit, count)}`, value: total, threshold };
}

/** C1 controls: a failure for the columns over CONTROL_SHARE of their table's rows, a note for the others. */
function controlCharacters(findings: TextColumnFinding[]): { failures: GateFailure[]; notes: string[] } {
  const what = 'hold C1 control characters U+0080–U+009F or NULs (loaded as ␀, U+2400) (text read in the wrong single-byte code page, or stray bytes in the source)';
  const hit = findings.filter((f) => f.control > 0);
  const over = hit.filter((f) => f.control > CONTROL_SHARE * f.rows);
  const under = hit.filter((f) => !over.includes(f));
  // The value is what the threshold holds: the largest share of a table's rows (the counts are in the message).
  const failure = () => ({ ...gateFailure('control_characters', `${what}, more than ${CONTROL_SHARE * 100} % of a table's rows`, over, (f) => f.control, CONTROL_SHARE), value: controlShare(over) });
  return {
    failures: over.length ? [failure()] : [],
    notes: under.length ? [`values that hold C1 control characters U+0080–U+009F or NULs (as ␀), kept as the source wrote them (at most ${CONTROL_SHARE * 100} % of a table's rows): ${whereFound(under, (f) => f.control)}`] : [],
  };
}

/** The largest share of a table's rows that hold C1 controls, over the columns found. */
const controlShare = (findings: TextColumnFinding[]) => Math.max(0, ...findings.map((f) => (f.rows ? f.control / f.rows : 0)));

/** The text check's rules as measured (the gate's verdict lists them passed or not). */
export function measureText(text: Pick<TextCheckResult, 'findings'>): GateRule[] {
  const total = (count: (f: TextColumnFinding) => number) => text.findings.reduce((a, f) => a + count(f), 0);
  const rule = (name: string, value: number, threshold: number): GateRule => ({ rule: name, value, threshold, compare: 'at_most', passed: value <= threshold });
  return [
    rule('replacement_characters', total((f) => f.replacement), 0),
    rule('double_encoding', total((f) => f.double_encoded), 0),
    rule('control_characters', controlShare(text.findings), CONTROL_SHARE),
  ];
}

/** Checks every text column of the snapshot's tables; a table that does not exist (yet) is skipped. */
export async function checkSnapshotText(db: pg.Pool | pg.ClientBase, tables: string[]): Promise<TextCheckResult> {
  const scanned: Record<string, number> = {};
  const findings: TextColumnFinding[] = [];
  for (const table of tables) {
    const exists = (await db.query('SELECT to_regclass($1) IS NOT NULL AS ok', [table])).rows[0].ok;
    if (!exists) continue;
    const r = await scanTable(db, table);
    scanned[table] = r.columns;
    findings.push(...r.findings);
  }
  const control = controlCharacters(findings);
  return {
    scanned,
    findings,
    failures: [
      ...failure('replacement_characters', 'hold U+FFFD (bytes not valid in the encoding they were read with)', findings, (f) => f.replacement),
      ...failure('double_encoding', "look double-encoded (UTF-8 read as Latin-1: 'Ã¡' for 'á')", findings, (f) => f.double_encoded),
      ...control.failures,
    ],
    notes: control.notes,
  };
}

/** Adds the text check's failures to the gate's, except a rule the pipeline already reported (its message is the more specific). */
export function mergeTextFailures(gate: GateFailure[], text: TextCheckResult): GateFailure[] {
  return [...gate, ...text.failures.filter((f) => !gate.some((g) => g.rule === f.rule))];
}
