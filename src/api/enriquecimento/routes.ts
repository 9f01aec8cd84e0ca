// POST /v1/enriquecimento/territorial (contract §4): the request polygon crossed with the
// published territorial layers. `layers` optional (default all): ti, uc, quilombo, zarc,
// rodovias. Always: area_ha and the municipalities with their share of the area.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { AgroError } from '../../errors.ts';
import { ZarcCultura } from '../car/schemas.ts';
import type { ApiDeps } from '../deps.ts';
import { checkGeometry, checkGeometryInDb } from '../geometry.ts';
import { DateString, ErrorResponses, IdempotencyHeaders, isoSeconds, Nullable, RequestGeometry, round, Timestamp } from '../schemas.ts';
import { zarcCultura } from '../zarc.ts';
import { crossLayer, zarcOf, type Sourced } from './sql.ts';

export const ENRICH_LAYERS = ['ti', 'uc', 'quilombo', 'zarc', 'rodovias'] as const;
type Layer = (typeof ENRICH_LAYERS)[number];

const DATASET: Record<Layer | 'municipios', string> = {
  municipios: 'ibge-municipios', ti: 'funai-tis', uc: 'cnuc-ucs', quilombo: 'incra-quilombos', zarc: 'zarc', rodovias: 'dnit-snv',
};

const Share = {
  area_sobreposta_ha: Type.Number({ description: 'area of the request inside the feature, hectares' }),
  percentual: Type.Number({ minimum: 0, maximum: 1, description: 'share of the request area inside the feature' }),
};
const Str = Nullable(Type.String());

const Response = Type.Object({
  area_ha: Type.Number({ description: 'area of the request polygon, hectares (EPSG:10857)' }),
  municipios: Type.Array(Type.Object({ geocodigo: Type.String(), nome: Str, uf: Str, ...Share })),
  ti: Type.Optional(Type.Array(Type.Object({ codigo: Type.String(), nome: Str, etnias: Nullable(Type.Array(Type.String())), fase: Str, modalidade: Str, ...Share }))),
  uc: Type.Optional(Type.Array(Type.Object({ cnuc: Type.String(), nome: Str, categoria: Str, grupo: Str, esfera: Str, ...Share }))),
  quilombo: Type.Optional(Type.Array(Type.Object({ codigo: Type.String(), comunidade: Str, fase: Str, esfera: Str, ...Share }))),
  zarc: Type.Optional(Type.Array(Type.Object({ geocodigo: Type.String(), culturas: Type.Array(ZarcCultura) }), { description: 'risk table of each municipality the area touches' })),
  rodovias: Type.Optional(Type.Object({
    distancia_km: Nullable(Type.Number({ description: 'distance to the nearest federal road segment (main alignment, not a planned one), km' })),
    segmentos: Type.Array(Type.Object({ codigo: Type.String(), br: Str, uf: Str, superficie: Str, distancia_km: Type.Number() }), { description: 'segments within 10 km' }),
  })),
  fontes: Type.Record(Type.String(), Type.Object({ snapshot_id: Type.Integer(), as_of: DateString }), { description: 'snapshot read per dataset' }),
  consultado_em: Timestamp,
});

const Schema = {
  summary: 'Cross a polygon with the territorial layers',
  tags: ['enriquecimento'],
  body: Type.Object({
    geometry: RequestGeometry,
    layers: Type.Optional(Type.Array(Type.String({ enum: [...ENRICH_LAYERS] }), { uniqueItems: true, maxItems: 5, description: `default all: ${ENRICH_LAYERS.join(', ')}` })),
  }, { additionalProperties: false }),
  headers: IdempotencyHeaders,
  response: { 200: Response, ...ErrorResponses },
};

const num = (x: unknown, dp: number) => round(x as number, dp) ?? 0;
const shares = (r: Record<string, unknown>) => ({ area_sobreposta_ha: num(r.area_sobreposta_ha, 4), percentual: num(r.percentual, 6) });

export function enriquecimentoRoutes(deps: ApiDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post('/enriquecimento/territorial', {
      schema: Schema,
      // municipios, rodovias, ti, uc and quilombo at once (below): the per-key in-flight limit counts 5.
      config: { connections: 5 },
      preValidation: async (req) => {
        const body = req.body as Record<string, unknown> | null;
        if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new AgroError('invalid_request', 'body: must be a JSON object with a geometry');
        if (body.layers !== undefined) {
          if (!Array.isArray(body.layers)) throw new AgroError('invalid_request', 'layers: must be an array of layer names');
          const bad = body.layers.find((l) => !(ENRICH_LAYERS as readonly unknown[]).includes(l));
          if (bad !== undefined) throw new AgroError('invalid_request', `layers: unknown layer ${JSON.stringify(bad).slice(0, 40)} (known: ${ENRICH_LAYERS.join(', ')})`);
        }
        checkGeometry(body.geometry);
      },
    }, async (req) => {
      const pool = deps.dataPool(req);
      const layers: Layer[] = req.body.layers?.length ? (req.body.layers as Layer[]) : [...ENRICH_LAYERS];
      // The geometry's validity first (PostGIS): a bad request is a 422 whatever is published.
      const geojson = JSON.stringify(req.body.geometry);
      const area = await checkGeometryInDb(pool, geojson);
      const needed = ['municipios' as const, ...layers];
      const polygonal = (['ti', 'uc', 'quilombo'] as const).filter((l) => layers.includes(l));
      // Independent statements on separate connections: the answer waits for the slowest, not the sum.
      // Each returns the snapshot it read: `fontes` name what the rows come from, whatever is published meanwhile.
      const [municipios, rodovias, ...crossed] = await Promise.all([
        crossLayer(pool, 'municipios', geojson, area),
        layers.includes('rodovias') ? crossLayer(pool, 'rodovias', geojson, area) : Promise.resolve(null),
        ...polygonal.map((l) => crossLayer(pool, l, geojson, area)),
      ]);
      const zarc = layers.includes('zarc') ? await zarcOf(pool, municipios.rows.map((m) => String(m.geocodigo))) : null;
      const read = new Map<Layer | 'municipios', Sourced>([['municipios', municipios], ...polygonal.map((l, i) => [l, crossed[i]] as const)]);
      if (rodovias) read.set('rodovias', rodovias);
      if (zarc) read.set('zarc', zarc);
      const missing = needed.filter((l) => !read.get(l)?.fonte);
      if (missing.length) throw new AgroError('upstream_unavailable', `no published snapshot of ${missing.map((l) => DATASET[l]).join(', ')}`);
      const out: Record<string, unknown> = {
        area_ha: num(area, 4),
        municipios: municipios.rows.map((m) => ({ geocodigo: m.geocodigo, nome: m.nome, uf: m.uf, ...shares(m) })),
      };
      polygonal.forEach((l, i) => {
        out[l] = crossed[i].rows.map((r) => {
          const { snapshot_id: _s, area_sobreposta_ha: _a, percentual: _p, ...attrs } = r;
          return { ...attrs, ...shares(r) };
        });
      });
      if (rodovias) {
        const within = rodovias.rows.filter((r) => (r.distancia_km as number) <= 10);
        out.rodovias = {
          distancia_km: rodovias.rows.length ? num(rodovias.rows[0].distancia_km, 3) : null,
          segmentos: within.map((r) => ({ codigo: r.codigo, br: r.br, uf: r.uf, superficie: r.superficie, distancia_km: num(r.distancia_km, 3) })),
        };
      }
      if (zarc) {
        out.zarc = municipios.rows.map((m) => ({
          geocodigo: m.geocodigo,
          culturas: zarc.rows.filter((r) => r.geocodigo === m.geocodigo).map((r) => zarcCultura(r, (n) => (r.decendios as (number | null)[])[n - 1])),
        }));
      }
      out.fontes = Object.fromEntries(needed.map((l) => [DATASET[l], read.get(l)!.fonte!]));
      out.consultado_em = isoSeconds();
      return out as never;
    });
  };
}
