// Every statement of the car routes, one typed function each. They read only `serving`.
import type pg from 'pg';
import { AS_OF_ORDER } from '../as-of-order.ts';
import type { Static } from 'typebox';
import type { UcOverlap } from './schemas.ts';

type Db = pg.Pool | pg.ClientBase;

/** The output projection shared by the current and the snapshot reads (`c` is the property row). */
const PROJECTION = `
  c.car, c.uf, c.cod_municipio_ibge, c.municipio, c.situacao, c.tipo,
  c.area_total_ha, c.area_calculada_ha, c.app_ha, c.reserva_legal_ha, c.area_consolidada_ha,
  to_char(c.data_inscricao, 'YYYY-MM-DD') AS data_inscricao,
  ST_AsGeoJSON(c.centroid, 7)::json AS centroid,
  ARRAY[ST_XMin(c.geom), ST_YMin(c.geom), ST_XMax(c.geom), ST_YMax(c.geom)] AS bbox,
  CASE WHEN $2::boolean THEN ST_AsGeoJSON(ST_ForcePolygonCCW(
    CASE WHEN ST_NumGeometries(c.geom) = 1 THEN ST_GeometryN(c.geom, 1) ELSE c.geom END), 7)::json END AS geometria,
  c.snapshot_id`;

export interface CarRow {
  car: string;
  uf: string;
  cod_municipio_ibge: string | null;
  municipio: string | null;
  situacao: string | null;
  tipo: string | null;
  area_total_ha: number | null;
  area_calculada_ha: number | null;
  app_ha: number | null;
  reserva_legal_ha: number | null;
  area_consolidada_ha: number | null;
  data_inscricao: string | null;
  centroid: { type: 'Point'; coordinates: number[] } | null;
  bbox: number[];
  geometria: unknown | null;
  snapshot_id: number;
}

export interface CurrentCarRow extends CarRow {
  embargo_ibama: boolean | null;
  sobreposicao_ucs: Static<typeof UcOverlap>[] | null;
  as_of: string;
}

/**
 * One row always: the property (all its columns null when it is not there) and the published
 * snapshots it was read with (the layers and its state's SICAR), from the same statement: a
 * statement sees one snapshot of each layer, so the `include` layers read afterwards by these
 * ids agree with `embargo_ibama` and `sobreposicao_ucs` whatever is published meanwhile.
 */
export const CAR_CURRENT_SQL = `
SELECT c.*,
       (SELECT coalesce(json_agg(json_build_object('snapshot_id', s.snapshot_id, 'dataset', s.dataset, 'uf', s.uf,
                                                   'as_of', to_char(s.as_of, 'YYYY-MM-DD'), 'is_current', true)), '[]')
          FROM serving.snapshots s WHERE s.status = 'current' AND (s.dataset <> 'sicar' OR s.uf = left($1, 2))) AS publicados
FROM (SELECT 1) one
LEFT JOIN (SELECT ${PROJECTION}, c.embargo_ibama, c.sobreposicao_ucs, to_char(s.as_of, 'YYYY-MM-DD') AS as_of
             FROM serving.car_imovel c JOIN serving.snapshots s ON s.snapshot_id = c.snapshot_id
            WHERE c.car = $1) c ON true`;

/** GET /car/{numero} from the published snapshots (one statement: the benchmarked path). */
export async function carCurrent(db: Db, car: string, geometry: boolean): Promise<{ row: CurrentCarRow | null; published: SnapshotInfo[] }> {
  // Named: prepared once per connection (planning the serving view costs more than running it).
  const r = await db.query({ name: 'api_car_current', text: CAR_CURRENT_SQL, values: [car, geometry] });
  const { publicados, ...row } = r.rows[0];
  return { row: row.car === null ? null : row, published: publicados };
}

/** Properties of given SICAR snapshots, keyset-paged by car (as_of reads and pinned cursors). */
export async function carsInSnapshots(
  db: Db,
  o: { snapshotIds: number[]; cars: string[]; geometry: boolean; after?: string | null; limit?: number | null; situacao?: string | null },
): Promise<CarRow[]> {
  const r = await db.query(
    `SELECT ${PROJECTION} FROM serving.car_imovel_snapshot($1, $3, $4, $5, $6) c ORDER BY c.car`,
    [o.snapshotIds, o.geometry, o.cars, o.after ?? null, o.limit ?? null, o.situacao ?? null],
  );
  return r.rows;
}

export interface SnapshotInfo {
  snapshot_id: number;
  dataset: string;
  uf: string | null;
  as_of: string;
  is_current: boolean;
  /** Its tables are kept (false: retention dropped it after it answered the reads of its dates). */
  legivel?: boolean;
}

/**
 * The snapshots as_of reads choose among (serving.snapshots_as_of: readable ones, and those
 * retention dropped after they answered), in AS_OF_ORDER.
 */
export async function asOfSnapshots(db: Db, datasets: string[]): Promise<SnapshotInfo[]> {
  const r = await db.query(
    `SELECT snapshot_id, dataset, uf, to_char(as_of, 'YYYY-MM-DD') AS as_of, is_current, legivel
       FROM serving.snapshots_as_of WHERE dataset = ANY ($1) ORDER BY ${AS_OF_ORDER}`,
    [datasets],
  );
  return r.rows;
}

/** Computed (CAR snapshot, layer snapshot) pairs among the given ones. */
export async function overlapPairs(db: Db, carSnapshotIds: number[], layerSnapshotIds: number[]): Promise<{ car_snapshot_id: number; layer_snapshot_id: number }[]> {
  const r = await db.query(
    `SELECT car_snapshot_id, layer_snapshot_id FROM serving.overlap_pairs WHERE car_snapshot_id = ANY ($1) AND layer_snapshot_id = ANY ($2)`,
    [carSnapshotIds, layerSnapshotIds],
  );
  return r.rows;
}

export interface OverlapRow {
  car: string;
  camada: string;
  feicao_id: string;
  area_sobreposta_ha: number | null;
  percentual: number | null;
  ativo: boolean | null;
}

/** Overlap rows of given properties in given CAR snapshots with one layer snapshot. */
export async function overlapsOf(db: Db, carSnapshotIds: number[], layerSnapshotId: number, cars: string[]): Promise<OverlapRow[]> {
  const r = await db.query(
    `SELECT car, camada, feicao_id, area_sobreposta_ha, percentual, ativo
       FROM serving.car_sobreposicoes_snapshot($1, $2, $3) ORDER BY area_sobreposta_ha DESC NULLS LAST, feicao_id`,
    [carSnapshotIds, layerSnapshotId, cars],
  );
  return r.rows;
}

/** Attribute rows of one relation of a snapshot, by key. */
export async function snapshotRows(db: Db, snapshotId: number, relation: string, key: string, values: string[]): Promise<Record<string, unknown>[]> {
  const r = await db.query(`SELECT serving.snapshot_rows($1, $2, $3, $4) AS row`, [snapshotId, relation, key, values]);
  return r.rows.map((x) => x.row);
}

export interface LinkRow {
  car: string;
  documento: string;
  tipo_documento: string;
  nome: string | null;
  vinculo: string | null;
  origem: 'declarado' | 'inferido';
  evidencia: { fonte: string; [k: string]: unknown } | null;
}

/** Where a document's owner links are read: the holder extract, IBAMA's terms over the CAR snapshots. */
export interface LinkSource {
  titularesSnapshotId: number | null;
  ibamaSnapshotId: number | null;
  carSnapshotIds: number[];
  hmac: string;
}

const linkArgs = (o: LinkSource) => [o.titularesSnapshotId, o.ibamaSnapshotId, o.carSnapshotIds, o.hmac];

/** A page of a document's properties, each with its owner links, and the holder's name. */
export interface DocumentPage {
  rows: (CarRow & { links: LinkRow[] })[];
  /** Among all the document's links: the first declared one with a name, else the first named. */
  holder: string | null;
}

/**
 * A page of the properties a document is linked to, keyset-paged by car, with the links of the
 * page's properties and the holder's name, in one statement: the document's links are computed
 * once (serving.car_titulares_snapshot, materialised) and never all brought to this process (a
 * holder such as a settlement agency may have tens of thousands of them). An empty page is one
 * row holding only the holder's name.
 */
export async function documentPage(
  db: Db,
  o: LinkSource & { snapshotIds: number[]; geometry: boolean; after: string | null; limit: number; situacao: string | null },
): Promise<DocumentPage> {
  const r = await db.query(
    `WITH l AS MATERIALIZED (
       SELECT car, documento, tipo_documento, nome, vinculo, origem, evidencia FROM serving.car_titulares_snapshot($6, $7, $8, $9)
     ), page AS (
       SELECT ${PROJECTION} FROM serving.car_imovel_snapshot($1,
          (SELECT coalesce(array_agg(DISTINCT l.car), '{}') FROM l WHERE $3::text IS NULL OR l.car > $3), $3, $4, $5) c
     )
     SELECT h.holder, p.*,
            (SELECT jsonb_agg(to_jsonb(x) ORDER BY x.origem, x.nome) FROM l x WHERE x.car = p.car) AS links
       FROM (SELECT (SELECT nome FROM l WHERE nome IS NOT NULL ORDER BY origem <> 'declarado', car, origem, nome LIMIT 1) AS holder) h
       LEFT JOIN page p ON true
      ORDER BY p.car`,
    [o.snapshotIds, o.geometry, o.after, o.limit, o.situacao, ...linkArgs(o)],
  );
  const holder: string | null = r.rows[0]?.holder ?? null;
  const rows = r.rows.filter((x) => x.car !== null).map(({ holder: _h, ...row }) => row as CarRow & { links: LinkRow[] });
  return { rows, holder };
}

export interface GeometryHit {
  car: string;
  uf: string;
  municipio: string | null;
  situacao: string | null;
  area_total_ha: number | null;
  area_calculada_ha: number | null;
  overlap_ha: number;
  overlap_ratio: number;
  snapshot_id: number;
}

// One statement for the hits and whether any SICAR state is published (one row of nulls when
// nothing intersects): "nothing published" (503) and "no hit" (200) from the same snapshots.
export const BY_GEOMETRY_SQL = `
WITH q AS (SELECT ST_SetSRID(ST_GeomFromGeoJSON($1), 4326) AS g),
hits AS (
  SELECT * FROM (
    SELECT c.car, c.uf, c.municipio, c.situacao, c.area_total_ha, c.area_calculada_ha, c.snapshot_id, x.overlap_ha,
           least(1, x.overlap_ha / nullif(c.area_calculada_ha, 0)) AS overlap_ratio
    FROM q
    JOIN serving.car_imovel c ON ST_Intersects(c.geom, q.g)
    -- OFFSET 0 keeps the intersection from being inlined into (and computed again by) the filters and the sort
    CROSS JOIN LATERAL (SELECT CASE WHEN ST_CoveredBy(c.geom, q.g) THEN c.area_calculada_ha
                                    ELSE serving.area_ha(ST_Intersection(c.geom, q.g)) END AS overlap_ha OFFSET 0) x
  ) h
  WHERE serving.shares_area(h.overlap_ha) AND coalesce(h.overlap_ratio, 0) >= $2
  ORDER BY h.overlap_ratio DESC NULLS LAST, h.car
  LIMIT $3)
SELECT h.*, p.publicado
FROM (SELECT EXISTS (SELECT 1 FROM serving.snapshots WHERE dataset = 'sicar' AND status = 'current') AS publicado) p
LEFT JOIN hits h ON true
ORDER BY h.overlap_ratio DESC NULLS LAST, h.car`;

/** POST /car/by-geometry: properties intersecting a polygon (≥ 1 m²), by overlap share, and whether SICAR is published at all. */
export async function carsByGeometry(db: Db, geojson: string, minOverlap: number, limit: number): Promise<{ hits: GeometryHit[]; published: boolean }> {
  const rows = (await db.query({ name: 'api_by_geometry', text: BY_GEOMETRY_SQL, values: [geojson, minOverlap, limit] })).rows;
  return { hits: rows.filter((r) => r.car !== null), published: rows[0].publicado };
}
