// The `include` layers of a CAR answer (contract §3) and, for snapshot reads, the overlap
// fields embargo_ibama and sobreposicao_ucs, all from the precomputed overlap rows of the
// chosen (CAR snapshot, layer snapshot) pair and the layer snapshot's own attributes.
import type { FastifyRequest } from 'fastify';
import type pg from 'pg';
import { AgroError } from '../../errors.ts';
import { round } from '../schemas.ts';
import { zarcCultura } from '../zarc.ts';
import { missingReason, overlapLayer, type LayerDataset, type ReadContext } from './context.ts';
import { overlapsOf, snapshotRows, type OverlapRow } from './sql.ts';

export const INCLUDE_LAYERS = ['embargos', 'ucs', 'tis', 'quilombos', 'zarc', 'embargos_icmbio'] as const;
export type IncludeLayer = (typeof INCLUDE_LAYERS)[number];

/**
 * `include=ucs,tis` → ['ucs', 'tis']; an empty element (`ucs,`, `ucs,,tis`) is no layer, as an
 * empty `include=` is; an unknown name is a 400 naming it.
 */
export function parseInclude(raw: string | undefined): IncludeLayer[] {
  if (raw === undefined) return [];
  const out: IncludeLayer[] = [];
  for (const part of raw.split(',')) {
    const name = part.trim();
    if (name === '') continue;
    if (!(INCLUDE_LAYERS as readonly string[]).includes(name)) {
      throw new AgroError('invalid_request', `include: unknown layer "${name.slice(0, 40)}" (known: ${INCLUDE_LAYERS.join(', ')})`);
    }
    if (!out.includes(name as IncludeLayer)) out.push(name as IncludeLayer);
  }
  return out;
}

/**
 * preValidation of the routes that take `include`: the list sent as a repeated parameter
 * (`include=ucs&include=tis`, as Python's requests and many clients write a list) is the
 * comma-separated one; it was a 400 "must be string".
 */
export function joinRepeatedInclude(req: FastifyRequest): void {
  const q = req.query as Record<string, unknown> | undefined;
  if (Array.isArray(q?.include) && q.include.every((x) => typeof x === 'string')) q.include = q.include.join(',');
}

interface OverlapLayerSpec {
  dataset: LayerDataset;
  relation: string;
  key: string;
  shape: (o: OverlapRow, a: Record<string, unknown>) => Record<string, unknown>;
}

const overlapFields = (o: OverlapRow) => ({ area_sobreposta_ha: round(o.area_sobreposta_ha, 4), percentual: round(o.percentual, 6) });

const SPECS: Record<Exclude<IncludeLayer, 'zarc'>, OverlapLayerSpec> = {
  embargos: {
    dataset: 'ibama-embargos', relation: 'ibama_embargos', key: 'numero_tad',
    shape: (o, a) => ({
      numero_tad: o.feicao_id, data_embargo: a.data_embargo ?? null, situacao: a.situacao ?? null,
      area_embargada_ha: a.area_embargada_ha ?? null, ...overlapFields(o), ativo: o.ativo ?? null,
    }),
  },
  ucs: {
    dataset: 'cnuc-ucs', relation: 'cnuc_ucs', key: 'codigo',
    shape: (o, a) => ({ cnuc: o.feicao_id, nome: a.nome ?? null, categoria: a.categoria ?? null, grupo: a.grupo ?? null, esfera: a.esfera ?? null, ...overlapFields(o) }),
  },
  tis: {
    dataset: 'funai-tis', relation: 'funai_tis', key: 'codigo',
    shape: (o, a) => ({ codigo: o.feicao_id, nome: a.nome ?? null, etnias: a.etnias ?? null, fase: a.fase ?? null, modalidade: a.modalidade ?? null, ...overlapFields(o) }),
  },
  // ICMBio's embargoes inside federal conservation units: the layer says nothing about lifting,
  // so no `ativo`; the document and the name of the person embargoed are not served.
  embargos_icmbio: {
    dataset: 'icmbio-embargos', relation: 'icmbio_embargos', key: 'id_embargo',
    shape: (o, a) => ({
      id_embargo: o.feicao_id, numero_embargo: a.numero_embargo ?? null, serie_embargo: a.serie_embargo ?? null,
      data_embargo: a.data_embargo ?? null, nome_uc: a.nome_uc ?? null, cnuc: a.cnuc ?? null, tipo_infracao: a.tipo_infracao ?? null,
      julgamento: a.julgamento ?? null, area_embargada_ha: round(a.area_calculada_ha as number | null, 4), ...overlapFields(o),
    }),
  },
  quilombos: {
    dataset: 'incra-quilombos', relation: 'incra_quilombos', key: 'codigo',
    shape: (o, a) => ({ codigo: o.feicao_id, comunidade: a.comunidade ?? null, fase: a.fase ?? null, esfera: a.esfera ?? null, ...overlapFields(o) }),
  },
};

export interface PropertyRef {
  car: string;
  snapshot_id: number;
  cod_municipio_ibge: string | null;
}

export type LayerValues = Map<string, Record<string, unknown>>;

/** Overlap elements per car for one layer (null per car when the pair is not available). */
async function overlapLayerValues(db: pg.Pool, ctx: ReadContext, props: PropertyRef[], spec: OverlapLayerSpec, notes: string[]): Promise<Map<string, Record<string, unknown>[] | null>> {
  const carSnaps = [...new Set(props.map((p) => p.snapshot_id))];
  const layer = await overlapLayer(db, ctx, carSnaps, spec.dataset, notes);
  const out = new Map<string, Record<string, unknown>[] | null>(props.map((p) => [p.car, layer ? [] : null]));
  if (!layer) return out;
  const rows = await overlapsOf(db, carSnaps, layer.snapshot_id, props.map((p) => p.car));
  // Terms sharing a numero_tad: the attributes of one whose status is the overlap row's
  // (`ativo` there is whether an active term of that number is over the property): a lifted
  // term over the land was shown with the dates and status of an active twin elsewhere.
  const attrs = new Map<string, Record<string, unknown>>();
  const attrKey = (k: string, ativo: unknown) => `${k}\u0000${ativo === true}`;
  if (rows.length) {
    for (const a of await snapshotRows(db, layer.snapshot_id, spec.relation, spec.key, [...new Set(rows.map((r) => r.feicao_id))])) {
      const k = attrKey(String(a[spec.key]), a.ativo);
      if (!attrs.has(k)) attrs.set(k, a);
    }
  }
  const attrsOf = (r: OverlapRow) => attrs.get(attrKey(r.feicao_id, r.ativo)) ?? attrs.get(attrKey(r.feicao_id, r.ativo !== true)) ?? {};
  for (const r of rows) out.get(r.car)?.push(spec.shape(r, attrsOf(r)));
  return out;
}

/** The ZARC risk table of each property's municipality: per crop, cycle, soil and management, the ten-day periods at 20, 30 and 40 % risk. */
async function zarcValues(db: pg.Pool, ctx: ReadContext, props: PropertyRef[], notes: string[]): Promise<Map<string, Record<string, unknown> | null>> {
  const layer = ctx.layers.get('zarc');
  if (!layer) {
    if (ctx.mode === 'current') throw new AgroError('upstream_unavailable', 'no published zarc snapshot');
    notes.push(`zarc: ${missingReason(ctx, 'zarc')}; zarc is null`);
    return new Map(props.map((p) => [p.car, null]));
  }
  const codes = [...new Set(props.map((p) => p.cod_municipio_ibge).filter((c): c is string => !!c))];
  const rows = codes.length ? await snapshotRows(db, layer.snapshot_id, 'zarc_risco', 'geocodigo', codes) : [];
  const byMun = new Map<string, ReturnType<typeof zarcCultura>[]>();
  const key = (r: Record<string, unknown>) => [r.cultura, r.safra, r.ciclo, r.solo, r.manejo, r.cod_clima, r.portaria].map((x) => String(x ?? '')).join('\u0000');
  for (const r of rows.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0))) {
    const list = byMun.get(String(r.geocodigo)) ?? [];
    list.push(zarcCultura(r, (n) => r[`dec${n}`]));
    byMun.set(String(r.geocodigo), list);
  }
  return new Map(props.map((p) => [p.car, p.cod_municipio_ibge
    ? { geocodigo: p.cod_municipio_ibge, snapshot_id: layer.snapshot_id, as_of: layer.as_of, culturas: byMun.get(p.cod_municipio_ibge) ?? [] }
    : null]));
}

const wantedLayers = (include: IncludeLayer[], withOverlapFields: boolean) =>
  new Set<IncludeLayer>([...include, ...(withOverlapFields ? (['embargos', 'ucs'] as const) : [])]);

/** The layer datasets layerValues reads for these options. */
export function layerDatasets(include: IncludeLayer[], withOverlapFields: boolean): LayerDataset[] {
  return [...wantedLayers(include, withOverlapFields)].map((l) => (l === 'zarc' ? 'zarc' : SPECS[l].dataset));
}

/** include layers per car, plus (withOverlapFields) embargo_ibama and sobreposicao_ucs. */
export async function layerValues(
  db: pg.Pool,
  ctx: ReadContext,
  props: PropertyRef[],
  include: IncludeLayer[],
  opts: { withOverlapFields: boolean; notes: string[] },
): Promise<LayerValues> {
  const out: LayerValues = new Map(props.map((p) => [p.car, {}]));
  if (props.length === 0) return out;
  for (const layer of wantedLayers(include, opts.withOverlapFields)) {
    const values = layer === 'zarc' ? await zarcValues(db, ctx, props, opts.notes) : await overlapLayerValues(db, ctx, props, SPECS[layer], opts.notes);
    for (const [car, v] of values) {
      const rec = out.get(car)!;
      if (include.includes(layer)) rec[layer] = v;
      if (opts.withOverlapFields && layer === 'embargos') {
        rec.embargo_ibama = v === null ? null : (v as Record<string, unknown>[]).some((e) => e.ativo === true);
      }
      if (opts.withOverlapFields && layer === 'ucs') rec.sobreposicao_ucs = v;
    }
  }
  return out;
}
