// What the HTML report adds from the database at rendering time: the trend of row counts
// across snapshots, the change against the previous snapshot per state or municipality
// (while both tables are kept), and an outline of Brazil from the loaded municipalities.
import type pg from 'pg';
import { ident } from '../db/pool.ts';
import type { QualityReport } from './quality.ts';
import { qualifiedSnapshotTable } from './names.ts';

export interface TrendPoint {
  snapshot_id: number;
  as_of: string;
  rows: number | null;
  status: string;
}

export interface AreaChange {
  area: string;
  previous: number;
  current: number;
}

export interface ReportExtras {
  trend: TrendPoint[];
  /** Rows per area in the previous and this snapshot; null when a table is gone or has no area column. */
  change: { by: string; rows: AreaChange[] } | null;
  /** SVG paths (x = lon, y = −lat) of the loaded municipalities, simplified; null when none are loaded. */
  outline: string[] | null;
}

export async function trendOf(db: pg.Pool | pg.ClientBase, dataset: string, uf: string | null): Promise<TrendPoint[]> {
  const r = await db.query(
    `SELECT s.snapshot_id::int, s.as_of::text, s.rows::bigint, CASE WHEN c.snapshot_id IS NOT NULL THEN 'current' ELSE s.status END AS status
       FROM etl.snapshots s LEFT JOIN etl.current c ON c.snapshot_id = s.snapshot_id
      WHERE s.dataset = $1 AND s.scope = coalesce($2, '') AND s.rows IS NOT NULL AND s.status NOT IN ('loading', 'failed')
      ORDER BY s.as_of, s.snapshot_id`,
    [dataset, uf],
  );
  return r.rows.map((x) => ({ ...x, rows: x.rows === null ? null : Number(x.rows) }));
}

async function tableColumns(db: pg.Pool | pg.ClientBase, table: string): Promise<string[] | null> {
  const r = await db.query(`SELECT to_regclass($1) IS NOT NULL AS ok`, [table]);
  if (!r.rows[0].ok) return null;
  return (await db.query(`SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped`, [table])).rows.map((x) => x.attname);
}

/** Rows per state (national datasets) or per municipality (a state's snapshot), previous against this one. */
export async function changeByArea(db: pg.Pool | pg.ClientBase, relation: string, report: QualityReport): Promise<ReportExtras['change']> {
  const prev = report.change.previous_snapshot_id;
  if (!prev) return null;
  const cur = qualifiedSnapshotTable(relation, report.snapshot_id);
  const old = qualifiedSnapshotTable(relation, prev);
  const [a, b] = [await tableColumns(db, cur), await tableColumns(db, old)];
  if (!a || !b) return null;
  const candidates = report.uf ? ['cod_municipio_ibge', 'geocodigo', 'municipio'] : ['uf'];
  const col = candidates.find((c) => a.includes(c) && b.includes(c));
  if (!col) return null;
  const k = ident(col);
  const r = await db.query(
    `SELECT coalesce(area, '(none)') AS area, sum(p)::int AS previous, sum(n)::int AS current FROM (
       SELECT ${k}::text AS area, 1 AS n, 0 AS p FROM ${cur}
       UNION ALL SELECT ${k}::text, 0, 1 FROM ${old}) x
     GROUP BY 1 ORDER BY abs(sum(n) - sum(p)) DESC, 1 LIMIT 60`,
  );
  return { by: col, rows: r.rows };
}

/** Municipalities simplified to ~2 km, as SVG paths; null when serving.ibge_municipios is empty or absent. */
export async function brazilOutline(db: pg.Pool | pg.ClientBase): Promise<string[] | null> {
  const ok = (await db.query(`SELECT to_regclass('serving.ibge_municipios') IS NOT NULL AS ok`)).rows[0].ok;
  if (!ok) return null;
  const r = await db.query(
    `SELECT ST_AsSVG(ST_SimplifyPreserveTopology(geom, 0.02), 0, 3) AS d FROM serving.ibge_municipios WHERE geom IS NOT NULL`,
  ).catch(() => ({ rows: [] as { d: string }[] }));
  const paths = r.rows.map((x) => x.d).filter(Boolean);
  return paths.length ? paths : null;
}

export async function reportExtras(db: pg.Pool | pg.ClientBase, relation: string, report: QualityReport): Promise<ReportExtras> {
  return {
    trend: await trendOf(db, report.dataset, report.uf),
    change: await changeByArea(db, relation, report),
    outline: await brazilOutline(db),
  };
}
