// Statements of POST /v1/enriquecimento/territorial: the request geometry ($1, GeoJSON text)
// crossed with one published layer each. Areas in EPSG:10857 hectares (serving.area_ha);
// `percentual` = share of the request area inside the feature; overlaps under 1 m² are borders.
import type pg from 'pg';

type Db = pg.Pool | pg.ClientBase;

const Q = `WITH q AS (SELECT ST_SetSRID(ST_GeomFromGeoJSON($1), 4326) AS g, $2::double precision AS ha)`;

/**
 * A layer's rows (`body`, ordered by `order`) with the published snapshot they come from, in one
 * statement: one row of nulls beside it when nothing crosses, none when nothing is published.
 * The `fontes` of the answer are what each statement read, whatever is published meanwhile.
 */
const withSource = (dataset: string, ctes: string, body: string, order: string) => `${ctes},
fonte AS (SELECT snapshot_id AS fonte_id, to_char(as_of, 'YYYY-MM-DD') AS fonte_as_of FROM serving.snapshots WHERE dataset = '${dataset}' AND status = 'current' ORDER BY snapshot_id DESC LIMIT 1)
SELECT fonte.fonte_id, fonte.fonte_as_of, x.* FROM fonte LEFT JOIN (${body}) x ON true
ORDER BY ${order}`;

/** Polygon layer overlap: attributes, hectares and share of the request area. */
const polygonLayer = (dataset: string, relation: string, attributes: string, key: string) => withSource(dataset, Q, `
SELECT ${attributes}, l.snapshot_id, x.ha AS area_sobreposta_ha, least(1, x.ha / nullif(q.ha, 0)) AS percentual
FROM q JOIN ${relation} l ON ST_Intersects(l.geom, q.g)
CROSS JOIN LATERAL (SELECT CASE WHEN ST_CoveredBy(q.g, l.geom) THEN q.ha ELSE serving.area_ha(ST_Intersection(l.geom, q.g)) END AS ha) x
WHERE serving.shares_area(x.ha)`, `x.area_sobreposta_ha DESC, x.${key}`);

export const ENRICH_SQL = {
  municipios: polygonLayer('ibge-municipios', 'serving.ibge_municipios', 'l.geocodigo, l.nome, l.uf', 'geocodigo'),
  ti: polygonLayer('funai-tis', 'serving.funai_tis', 'l.codigo, l.nome, l.etnias, l.fase, l.modalidade', 'codigo'),
  uc: polygonLayer('cnuc-ucs', 'serving.cnuc_ucs', 'l.codigo AS cnuc, l.nome, l.categoria, l.grupo, l.esfera', 'cnuc'),
  quilombo: polygonLayer('incra-quilombos', 'serving.incra_quilombos', 'l.codigo, l.comunidade, l.fase, l.esfera', 'codigo'),
  // Main BR alignments within 10 km, nearest first (geodesic distance), or, when none is, all
  // those within the geodesic distance of the nearest of five found by index-assisted KNN on
  // the geometry: that KNN is in plain degrees, where a road north is "nearer" than one east at
  // the same distance in km (a degree of longitude is ~96 km at 30° S), so the nearest on the
  // ellipsoid may not be among its five (the answer was 11.1 km for a road 10.6 km away). The
  // box prefilter spans that radius in degrees at the area's latitude farthest from the equator.
  rodovias: withSource('dnit-snv', `${Q},
knn AS (SELECT ST_Distance(n.geom::geography, q.g::geography) AS m
          FROM q CROSS JOIN LATERAL (SELECT r.geom FROM serving.dnit_snv_principal r ORDER BY r.geom <-> q.g LIMIT 5) n),
lim AS (SELECT greatest(10000, min(knn.m) + 1) AS m FROM knn)`, `
SELECT r.codigo, r.br, r.uf, r.superficie, r.snapshot_id, ST_Distance(r.geom::geography, q.g::geography) / 1000 AS distancia_km
FROM q CROSS JOIN lim
JOIN serving.dnit_snv_principal r
  ON r.geom && ST_Expand(q.g, lim.m / (111000 * cos(radians(least(89, greatest(abs(ST_YMin(q.g)), abs(ST_YMax(q.g))) + lim.m / 110000)))), lim.m / 110000)
 AND ST_DWithin(r.geom::geography, q.g::geography, lim.m)`, 'x.distancia_km, x.codigo'),
  zarc: withSource('zarc', 'WITH m AS (SELECT $1::text[] AS geocodigos)', `
SELECT r.geocodigo, r.safra, r.cultura, r.ciclo, r.solo, r.manejo, r.portaria, r.cod_clima, r.clima, r.snapshot_id,
       ARRAY[r.dec1, r.dec2, r.dec3, r.dec4, r.dec5, r.dec6, r.dec7, r.dec8, r.dec9, r.dec10, r.dec11, r.dec12,
             r.dec13, r.dec14, r.dec15, r.dec16, r.dec17, r.dec18, r.dec19, r.dec20, r.dec21, r.dec22, r.dec23, r.dec24,
             r.dec25, r.dec26, r.dec27, r.dec28, r.dec29, r.dec30, r.dec31, r.dec32, r.dec33, r.dec34, r.dec35, r.dec36] AS decendios
FROM m JOIN serving.zarc_risco r ON r.geocodigo = ANY (m.geocodigos)`,
    'x.geocodigo, x.cultura, x.safra, x.ciclo, x.solo, x.manejo, x.cod_clima, x.portaria'),
} as const;

export type EnrichLayer = 'municipios' | 'ti' | 'uc' | 'quilombo' | 'rodovias';

/** The rows of one statement and the published snapshot they come from (null: none is published). */
export interface Sourced {
  rows: Record<string, unknown>[];
  fonte: { snapshot_id: number; as_of: string } | null;
}

function sourced(rows: Record<string, unknown>[]): Sourced {
  if (rows.length === 0) return { rows: [], fonte: null };
  const fonte = { snapshot_id: rows[0].fonte_id as number, as_of: rows[0].fonte_as_of as string };
  // The row of nulls beside the source when nothing crosses; the source columns off the others.
  const data = rows.filter((r) => r.snapshot_id !== null).map(({ fonte_id: _i, fonte_as_of: _a, ...r }) => r);
  return { rows: data, fonte };
}

/** One layer crossed with the request geometry. */
export async function crossLayer(db: Db, layer: EnrichLayer, geojson: string, areaHa: number): Promise<Sourced> {
  return sourced((await db.query({ name: `api_enrich_${layer}`, text: ENRICH_SQL[layer], values: [geojson, areaHa] })).rows);
}

/** ZARC rows of some municipalities. */
export async function zarcOf(db: Db, geocodigos: string[]): Promise<Sourced> {
  return sourced((await db.query({ name: 'api_enrich_zarc', text: ENRICH_SQL.zarc, values: [geocodigos] })).rows);
}
