// GET /v1/car/{numero}, GET /v1/car/by-document/{documento}, POST /v1/car/by-geometry.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { documentHmac, displayDocument, parseDocument } from '../../documents.ts';
import { AgroError } from '../../errors.ts';
import type { ApiDeps } from '../deps.ts';
import { UFS } from '../deps.ts';
import { Cursors } from '../cursor.ts';
import { checkGeometry, checkGeometryInDb } from '../geometry.ts';
import { razaoSocialOf } from '../socio/routes.ts';
import { isoSeconds, round } from '../schemas.ts';
import { availableDates, missingReason, pins, publishedContext, readIds, resolveContext, type ReadContext } from './context.ts';
import { readKept } from '../kept.ts';
import { joinRepeatedInclude, layerDatasets, layerValues, parseInclude } from './layers.ts';
import { ByDocumentSchema, ByGeometrySchema, CarSchema } from './schemas.ts';
import { carCurrent, carsByGeometry, carsInSnapshots, documentPage, type CarRow, type LinkRow } from './sql.ts';

const roundBbox = (b: number[]) => b.map((x) => round(x, 7) as number);
const municipio = (r: { municipio: string | null; uf: string }) => (r.municipio ? `${r.municipio}/${r.uf}` : null);
const fonte = (uf: string, asOf: string) => `SICAR/SFB ${uf} ${asOf}`;

function baseRecord(r: CarRow) {
  return {
    car: r.car, uf: r.uf, situacao: r.situacao, tipo: r.tipo,
    area_total_ha: r.area_total_ha, area_calculada_ha: round(r.area_calculada_ha, 4),
    area_consolidada_ha: round(r.area_consolidada_ha, 4), reserva_legal_ha: round(r.reserva_legal_ha, 4), app_ha: round(r.app_ha, 4),
    municipio: municipio(r), cod_municipio_ibge: r.cod_municipio_ibge, data_inscricao: r.data_inscricao,
    srid: 4326 as const, centroid: r.centroid, bbox: roundBbox(r.bbox),
    ...(r.geometria ? { geometria: r.geometria } : {}),
    snapshot_id: r.snapshot_id,
  };
}

/** The state of a well-formed CAR number, or a 400 naming `numero`. */
function stateOf(car: string): string {
  const uf = car.slice(0, 2);
  if (!(UFS as readonly string[]).includes(uf)) throw new AgroError('invalid_request', `numero: "${uf}" is not a Brazilian state`);
  return uf;
}

function noSnapshotAsOf(ctx: ReadContext, uf: string | null, asOf: string): never {
  const dates = availableDates(ctx, uf);
  // The state's snapshot of that date was dropped: an older kept one would be another date's data.
  const gone = [...ctx.dropped.values()].filter((s) => s.dataset === 'sicar' && (uf === null || s.uf === uf));
  const why = gone.length
    ? `the SICAR ${gone.map((s) => `${s.uf} snapshot ${s.snapshot_id} (as of ${s.as_of})`).join(', ')} current on ${asOf} ${gone.length > 1 ? 'were' : 'was'} dropped by retention`
    : `no SICAR${uf ? ' ' + uf : ''} snapshot as of ${asOf} or earlier is kept`;
  throw new AgroError('car_not_found', `${why}; available as-of dates: ${dates.length ? dates.join(', ') : 'none'}`);
}

export function carRoutes(deps: ApiDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get('/car/:numero', { schema: CarSchema, preValidation: async (req) => joinRepeatedInclude(req) }, async (req) => {
      const pool = deps.dataPool(req);
      const car = req.params.numero.toUpperCase();
      const uf = stateOf(car);
      const include = parseInclude(req.query.include);
      const consultado_em = isoSeconds();
      const notes: string[] = [];
      if (!req.query.as_of) {
        // The row and the ids of what was published when it was read, in one statement; the
        // include layers are then read by those ids (a publish in between changes nothing).
        const { row, published } = await carCurrent(pool, car, req.query.geometry);
        const ctx = publishedContext(published);
        if (!row) {
          if (!ctx.sicar.has(uf)) throw new AgroError('upstream_unavailable', `no published SICAR snapshot for ${uf}`);
          throw new AgroError('car_not_found', `${car} is not in the published SICAR ${uf} snapshot`);
        }
        const extra = include.length
          ? (await readKept(pool, readIds(ctx, [row.snapshot_id], layerDatasets(include, false)), () => layerValues(pool, ctx, [row], include, { withOverlapFields: false, notes }))).get(car)!
          : {};
        return {
          ...baseRecord(row), embargo_ibama: row.embargo_ibama, sobreposicao_ucs: row.sobreposicao_ucs,
          consultado_em, fonte: fonte(uf, row.as_of), as_of: row.as_of, ...extra,
        };
      }
      const ctx = await resolveContext(pool, { asOf: req.query.as_of });
      const snap = ctx.sicar.get(uf);
      if (!snap) noSnapshotAsOf(ctx, uf, req.query.as_of);
      const { row, extra } = await readKept(pool, readIds(ctx, [snap.snapshot_id], layerDatasets(include, true)), async () => {
        const [row] = await carsInSnapshots(pool, { snapshotIds: [snap.snapshot_id], cars: [car], geometry: req.query.geometry, limit: 1 });
        return { row, extra: row ? (await layerValues(pool, ctx, [row], include, { withOverlapFields: true, notes })).get(car)! : {} };
      });
      if (!row) throw new AgroError('car_not_found', `${car} is not in the SICAR ${uf} snapshot ${snap.snapshot_id} (as of ${snap.as_of}, the one for ${req.query.as_of})`);
      return {
        ...baseRecord(row), embargo_ibama: null, sobreposicao_ucs: null, ...extra,
        consultado_em, fonte: fonte(uf, snap.as_of), as_of: snap.as_of, ...(notes.length ? { avisos: notes } : {}),
      };
    });

    app.get('/car/by-document/:documento', { schema: ByDocumentSchema, preValidation: async (req) => joinRepeatedInclude(req) }, async (req) => {
      const pool = deps.dataPool(req);
      const doc = parseDocument(req.params.documento);
      if (!doc) throw new AgroError('invalid_request', 'documento: not a valid CPF (11 digits) or CNPJ (14 characters): wrong length or check digits');
      const q = req.query;
      const uf = q.uf?.toUpperCase() ?? null;
      if (uf && !(UFS as readonly string[]).includes(uf)) throw new AgroError('invalid_request', `uf: "${uf}" is not a Brazilian state`);
      const include = parseInclude(q.include);
      const hmac = documentHmac(doc.documento, deps.cfg.hmacKey);
      const fingerprint = Cursors.fingerprint(['by-document', hmac, uf, q.situacao ?? null, include, q.geometry, q.as_of ?? null]);
      const cursor = q.cursor !== undefined ? deps.cursors.decode(q.cursor, fingerprint) : null;
      // Every snapshot of the answer in one statement, then read by id (a publish meanwhile changes nothing).
      const ctx = await resolveContext(pool, { asOf: q.as_of ?? null, pinned: cursor?.s ?? null, receita: doc.tipo === 'cnpj' });
      if (ctx.sicar.size === 0) {
        if (ctx.mode === 'as_of') noSnapshotAsOf(ctx, null, q.as_of!);
        throw new AgroError('upstream_unavailable', 'no published SICAR snapshot');
      }
      const notes: string[] = [];
      for (const s of ctx.dropped.values()) {
        if (s.dataset === 'sicar') notes.push(`sicar ${s.uf}: ${missingReason(ctx, `sicar:${s.uf}`)}; its properties are not listed`);
        if (s.dataset === 'receita-cnpj') notes.push(`receita-cnpj: ${missingReason(ctx, 'receita-cnpj')}; the holder's name is not Receita's`);
      }
      const titulares = ctx.layers.get('car-titulares') ?? null;
      if (!titulares) notes.push(`car-titulares: no owner extract is loaded for this read${ctx.dropped.has('car-titulares') ? ` (${missingReason(ctx, 'car-titulares')})` : ''}; only links inferred from IBAMA embargoes are shown`);
      const allCarSnaps = [...ctx.sicar.values()].map((s) => s.snapshot_id);
      const carSnaps = uf ? (ctx.sicar.has(uf) ? [ctx.sicar.get(uf)!.snapshot_id] : []) : allCarSnaps;
      const read = await readKept(pool, [...readIds(ctx, allCarSnaps, ['car-titulares', ...layerDatasets(include, true)]), ...(ctx.receita ? [ctx.receita.snapshot_id] : [])], async () => {
        const source = { titularesSnapshotId: titulares?.snapshot_id ?? null, ibamaSnapshotId: ctx.layers.get('ibama-embargos')?.snapshot_id ?? null, carSnapshotIds: allCarSnaps, hmac };
        // The page, its properties' links and the holder's name in one statement: never all of a document's links.
        // (no snapshot of the asked state: no page, the holder's name still)
        const { rows, holder: named } = await documentPage(pool, { ...source, snapshotIds: carSnaps, geometry: q.geometry, after: cursor?.k ?? null, limit: q.limit + 1, situacao: q.situacao ?? null });
        const linkOf = new Map<string, LinkRow>();
        for (const r of rows.slice(0, q.limit)) {
          for (const l of r.links ?? []) {
            const seen = linkOf.get(l.car);
            if (!seen || (seen.origem !== 'declarado' && l.origem === 'declarado')) linkOf.set(l.car, l); // a declared link wins
          }
        }
        const extra = await layerValues(pool, ctx, rows.slice(0, q.limit), include, { withOverlapFields: true, notes });
        // A CNPJ's holder is Receita's legal name when the month has it: the registry of record,
        // where declared extracts and embargo terms carry abbreviations or old names.
        const receita = doc.tipo === 'cnpj' ? await razaoSocialOf(pool, ctx.receita ?? null, doc.documento) : null;
        const holder = receita ? null : named;
        return { linkOf, rows, extra, receita, holder };
      });
      const { linkOf, rows, extra, receita, holder } = read;
      const page = rows.slice(0, q.limit);
      const asOfById = new Map([...ctx.sicar.values()].map((s) => [s.snapshot_id, s.as_of]));
      const results = page.map((r) => {
        const e = extra.get(r.car)!;
        const { sobreposicao_ucs: _ucs, ...layers } = e;
        const link = linkOf.get(r.car)!;
        return {
          car: r.car, uf: r.uf, situacao: r.situacao, tipo: r.tipo, municipio: municipio(r),
          area_total_ha: r.area_total_ha, area_calculada_ha: round(r.area_calculada_ha, 4), data_inscricao: r.data_inscricao,
          embargo_ibama: null, srid: 4326 as const, centroid: r.centroid, bbox: roundBbox(r.bbox),
          ...(r.geometria ? { geometria: r.geometria } : {}),
          vinculo: link.vinculo, origem: link.origem, evidencia: link.evidencia, snapshot_id: r.snapshot_id, fonte: fonte(r.uf, asOfById.get(r.snapshot_id) ?? ''),
          ...layers,
        };
      });
      // The sum of the areas SICAR published: a property without one (NULL: not a number, negative) is unknown, not 0, and said.
      const unknownArea = results.filter((r) => r.area_total_ha === null).length;
      if (unknownArea) notes.push(`area_total_ha sums ${results.length - unknownArea} of the ${results.length} properties returned: ${unknownArea} ${unknownArea === 1 ? 'has' : 'have'} no area published by SICAR (area_total_ha null)`);
      const next = rows.length > q.limit ? deps.cursors.encode({ q: fingerprint, s: pins(ctx), k: page[page.length - 1].car, m: req.apiKey && Cursors.meterTag(req.apiKey.meter) }) : null;
      return {
        documento: displayDocument(doc.documento, doc.tipo),
        tipo_documento: doc.tipo,
        titular: receita?.razao_social ?? holder,
        results,
        count: results.length,
        area_total_ha: round(results.reduce((s, r) => s + (r.area_total_ha ?? 0), 0), 4) ?? 0,
        next_cursor: next,
        consultado_em: isoSeconds(),
        snapshots: { ...pins(ctx), ...(receita ? { 'receita-cnpj': receita.snapshot_id } : {}) },
        ...(notes.length ? { avisos: notes } : {}),
      };
    });

    app.post('/car/by-geometry', {
      schema: ByGeometrySchema,
      // Our own checks first: they say precisely what is wrong (422), before the schema's generic ones.
      preValidation: async (req) => {
        const body = req.body as Record<string, unknown> | null;
        if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new AgroError('invalid_request', 'body: must be a JSON object with a geometry');
        checkGeometry(body.geometry);
      },
    }, async (req) => {
      const pool = deps.dataPool(req);
      const geojson = JSON.stringify(req.body.geometry);
      const area = await checkGeometryInDb(pool, geojson);
      const { hits, published } = await carsByGeometry(pool, geojson, req.body.min_overlap, req.body.limit);
      if (hits.length === 0 && !published) throw new AgroError('upstream_unavailable', 'no published SICAR snapshot');
      const results = hits.map((h) => ({
        car: h.car, uf: h.uf, municipio: municipio(h), situacao: h.situacao,
        overlap_ratio: round(h.overlap_ratio, 6) ?? 0, overlap_ha: round(h.overlap_ha, 4) ?? 0,
        area_ha: h.area_total_ha, area_calculada_ha: round(h.area_calculada_ha, 4), snapshot_id: h.snapshot_id,
      }));
      return { results, count: results.length, area_consulta_ha: round(area, 4) ?? 0, consultado_em: isoSeconds() };
    });
  };
}
