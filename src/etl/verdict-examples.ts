// Examples of rejected rows, taken where rows get their verdicts: up to ten per verdict
// from a classified table (columns src_seq, verdict), with the staged source values
// (file/layer, row number, values; CPFs masked) and where the geometry lies. Also the
// locations of repaired and rejected geometries for the report's map. Generic: it reads
// the tables' columns from the catalogue and uses what is there.
import type pg from 'pg';
import { maskCpfsInSourceValues } from '../privacy.ts';

export interface RowExample {
  /** The layer or file the row came from, when staging recorded it. */
  source: string | null;
  /** Row number in the source (staging's src_seq, 1-based in read order). */
  row: number | null;
  /** A delimited-text source's: the line its record starts on in its file (the header is line 1; a record may span lines). */
  line?: number;
  values: Record<string, unknown>;
  /** A point of the geometry in EPSG:4326 (centre of its bounding box), when there is one. */
  lon?: number;
  lat?: number;
}

/**
 * The CPF mask of example rows' source values (maskCpfsInSourceValues: a whole number of a
 * CPF's digits too), for reports stored before it; the row numbers and coordinates are ours.
 */
export const maskExampleValues = (examples: Record<string, RowExample[]>): Record<string, RowExample[]> =>
  Object.fromEntries(Object.entries(examples).map(([reason, list]) => [reason, list.map((e) => ({ ...e, values: maskCpfsInSourceValues(e.values) }))]));

export interface VerdictExamples {
  examples: Record<string, RowExample[]>;
  /** Centres of repaired (kept) and rejected geometries, at most `MAX_POINTS` each. */
  locations: { repaired: [number, number][]; rejected: [number, number][] };
}

const PER_VERDICT = 10;
const MAX_POINTS = 2000;
const DROP_KEYS = ['geom', 'g', 'src_seq', 'src_srid', 'src_layer', 'verdict'];

async function columnsOf(client: pg.ClientBase, table: string): Promise<Map<string, string>> {
  const r = await client.query(`SELECT attname, format_type(atttypid, atttypmod) AS type FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped`, [table]);
  return new Map(r.rows.map((x) => [x.attname as string, x.type as string]));
}

const round = (n: number) => Math.round(n * 1e4) / 1e4;

export interface ExampleOptions {
  /** The staging table whose rows the values show (else the classified row's). */
  stage?: string;
  /** The only columns of the classified table the values show (e.g. a typed pass's declared columns without personal data). */
  shown?: readonly string[];
  /** The verdict counts: none rejected, no query. */
  counts?: Record<string, number>;
  /** Rows kept by their verdict that the build leaves out (`where`, over `c`), shown under `reason`. */
  copies?: { reason: string; where: string };
}

/** Examples and locations of a classified table (and of its staging table, when given). */
export async function verdictExamples(client: pg.ClientBase, classified: string, o: ExampleOptions = {}): Promise<VerdictExamples> {
  const { stage, shown, counts, copies } = o;
  const c = await columnsOf(client, classified);
  // With the verdict counts known and every row kept, there is no rejected row to show: two
  // scans of the classified table fewer (measured 0.3–1.2 s each on a 1,000,000-row SICAR theme).
  const noneRejected = !copies && !!counts && Object.entries(counts).every(([v, n]) => v === 'ok' || n === 0);
  // `copies`: rows kept by their verdict that the build leaves out (`where`, over `c`), shown under `reason`.
  const notKept = copies ? `c.verdict = 'ok' AND (${copies.where})` : `c.verdict <> 'ok'`;
  const verdict = copies ? `'${copies.reason.replace(/'/g, "''")}'::text` : 'c.verdict';
  const s = stage ? await columnsOf(client, stage) : null;
  const joined = !!s && c.has('src_seq') && s.has('src_seq');
  const cGeom = [...c].find(([, t]) => t.startsWith('geometry'))?.[0];
  const sGeom = joined && s!.get('geom')?.startsWith('geometry') ? 'geom' : null;
  // The raw geometry where it lay (its own SRID, when known), else the classified one (EPSG:4326).
  const point = sGeom && s!.has('src_srid')
    ? `CASE WHEN s.geom IS NOT NULL AND s.src_srid > 0 THEN ST_Transform(ST_SetSRID(ST_Centroid(ST_Envelope(s.geom)), s.src_srid), 4326) END`
    : cGeom ? `ST_Centroid(ST_Envelope(c.${cGeom}))` : 'NULL::geometry';
  const dropped = [...DROP_KEYS, ...(shown && !joined ? [...c.keys()].filter((k) => !shown.includes(k)) : [])];
  const values = joined ? `to_jsonb(s) - ARRAY[${dropped.map((k) => `'${k}'`).join(',')}]` : `to_jsonb(c) - ARRAY[${[...dropped, ...[...c].filter(([, t]) => t.startsWith('geometry')).map(([n]) => n)].map((k) => `'${k}'`).join(',')}]`;
  const order = c.has('src_seq') ? 'c.src_seq' : '1';
  const r = noneRejected ? { rows: [] } : await client.query(
    `SELECT x.verdict, x.src_seq, x.src_layer, x.vals, ST_X(x.p) AS lon, ST_Y(x.p) AS lat FROM (
       SELECT ${verdict} AS verdict, ${c.has('src_seq') ? 'c.src_seq' : 'NULL::bigint'} AS src_seq,
              ${joined && s!.has('src_layer') ? 's.src_layer' : 'NULL::text'} AS src_layer,
              ${values} AS vals, ${point} AS p,
              row_number() OVER (PARTITION BY ${verdict} ORDER BY ${order}) AS rn
         FROM ${classified} c ${joined ? `LEFT JOIN ${stage} s ON s.src_seq = c.src_seq` : ''}
        WHERE ${notKept}) x
      WHERE x.rn <= ${PER_VERDICT} ORDER BY x.verdict, x.rn`,
  );
  const examples: Record<string, RowExample[]> = {};
  for (const row of r.rows) {
    const ex: RowExample = { source: row.src_layer, row: row.src_seq === null ? null : Number(row.src_seq), values: maskCpfsInSourceValues(row.vals ?? {}) };
    if (row.lon !== null && Number.isFinite(row.lon)) Object.assign(ex, { lon: round(row.lon), lat: round(row.lat) });
    (examples[row.verdict] ??= []).push(ex);
  }
  const locations: VerdictExamples['locations'] = { repaired: [], rejected: [] };
  const pts = async (where: string, pointExpr: string) =>
    (await client.query(
      `SELECT ST_X(p) AS lon, ST_Y(p) AS lat FROM (SELECT ${pointExpr} AS p FROM ${classified} c ${joined ? `LEFT JOIN ${stage} s ON s.src_seq = c.src_seq` : ''} WHERE ${where} LIMIT ${MAX_POINTS}) q WHERE p IS NOT NULL`,
    )).rows.map((x) => [round(x.lon), round(x.lat)] as [number, number]);
  // A table without geometries has no point to look for (a scan fewer).
  if (!noneRejected && point !== 'NULL::geometry') locations.rejected = await pts(notKept, point);
  if (!copies && c.has('repair') && cGeom) locations.repaired = await pts(`c.repair = 'repaired' AND c.${cGeom} IS NOT NULL`, `ST_Centroid(ST_Envelope(c.${cGeom}))`);
  return { examples, locations };
}
