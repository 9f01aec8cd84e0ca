// DNIT SNV (SOURCES §8): the federal road network, one national snapshot per SNV version.
// A version is a zip `YYYYMM<letter>.zip` (e.g. 202507A) holding one polyline shapefile,
// possibly inside a sub-folder. The source is a version zip, a folder of them or a
// WebDAV folder (the DNIT Cloud share): the lexicographic maximum is the newest version.
// The CRS is unverified, so a layer without .prj fails the run instead of being guessed.
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { AgroError } from '../../src/errors.ts';
import type { QualityFacts } from '../../src/etl/quality.ts';
import { defineRelation } from '../../src/etl/relation.ts';
import { shapedPipeline } from '../../src/etl/shape.ts';
import type { VectorLayer } from '../../src/etl/vector-reader.ts';
import { addCounts } from '../../src/etl/quality.ts';
import { brNotNumbers, classifySegments, geometryCounts, snvReport } from './queries.ts';

/**
 * snap.dnit_snv, with the 10-character DBF names of SOURCES §8.4 and the untruncated WFS
 * property names (lower case; those are unverified). Codes are not deduplicated: every drawn
 * stretch of road counts for distance-to-road.
 */
export const DNIT_SNV = defineRelation({
  name: 'dnit_snv',
  columns: [
    { name: 'codigo', type: 'text', from: ['vl_codigo'], required: true, sql: 'c.codigo' },
    // BR numbers come unpadded (40, '40', 40.0, 'BR-040'): zero-padded to 3 (SOURCES §8.7); else the code's first
    // 3 digits (joins: b), and a text that is not a BR number is kept in extra (counted, facts).
    {
      name: 'br', type: 'text', from: ['vl_br'], sql: 'coalesce(b.br, b.br_of_code)', counted: true,
      keepRaw: "CASE WHEN b.br IS NULL AND btrim(s.br) <> '' THEN s.br END",
    },
    { name: 'uf', type: 'text', from: ['sg_uf'], convert: 'upper', counted: true },
    { name: 'km_inicial', type: 'double precision', from: ['vl_km_inic', 'vl_km_inicial'] },
    { name: 'km_final', type: 'double precision', from: ['vl_km_fina', 'vl_km_final'] },
    { name: 'extensao_km', type: 'double precision', from: ['vl_extensa', 'vl_extensao'], counted: true },
    { name: 'extensao_calculada_km', type: 'double precision', sql: 'ST_Length(c.g::geography) / 1000' },
    // Distance-to-road keeps only main alignments: a source without the type would silently empty it.
    { name: 'tipo_trecho', type: 'text', from: ['sg_tipo_tr', 'sg_tipo_trecho'], required: true, convert: 'upper', counted: true },
    { name: 'nome_tipo_trecho', type: 'text', from: ['nm_tipo_tr', 'nm_tipo_trecho'] },
    { name: 'superficie', type: 'text', from: ['ds_superfi', 'ds_superficie'], counted: true },
    { name: 'legenda', type: 'text', from: ['ds_legenda'] },
    { name: 'jurisdicao', type: 'text', from: ['ds_jurisdi', 'ds_jurisdicao'], counted: true },
    { name: 'unidade_local', type: 'text', from: ['ul', 'sg_ul'] },
    { name: 'versao', type: 'text', sql: 'v.versao' },
    { name: 'extra', type: 'jsonb', role: 'extra' },
    { name: 'geom', type: 'geometry(MultiLineString,4326)', sql: 'c.g' },
    { name: 'snapshot_id', type: 'bigint', role: 'snapshot_id' },
  ],
  // Kept in `extra` under these names.
  fields: [
    { name: 'ds_codigo', from: ['ds_codigo'], keep: 'extra' },
    { name: 'ds_coinc', from: ['ds_coinc'], keep: 'extra' },
    { name: 'ds_tipo_pln', from: ['ds_tipo_pln', 'ds_tipo_pl'], keep: 'extra' },
  ],
  joins: `CROSS JOIN LATERAL (
  SELECT CASE WHEN x ~ '^\\d{1,3}$' THEN lpad(x, 3, '0') END AS br,
         CASE WHEN c.codigo ~ '^\\d{3}' THEN left(c.codigo, 3) END AS br_of_code
  FROM (SELECT regexp_replace(regexp_replace(btrim(s.br), '\\.0*$', ''), '^BR[-\\s]*', '', 'i') AS x) p
) b`,
  indexes: { gist: ['geom'], btree: ['codigo', { name: 'br', columns: ['br', 'uf'] }] },
  orderBy: 'c.src_seq',
});

/** The staging fields (canonical name ← every spelling), as the read stage maps them. */
export const SNV_FIELDS = DNIT_SNV.staging;

/** Relative gap between geodesic and declared length above which a segment is reported. */
export const LENGTH_GAP_LIMIT = 0.1;
/** At most this many divergent segments are listed in the report (all are counted). */
const LIST_LIMIT = 200;

/** Version zip names as the DNIT folder lists them (SOURCES §8.1). */
export const VERSION_FILE = /^(\d{6})(\w+)\.zip$/i;

/** '202507A' for '202507A.zip'; null when the name is not a version. */
export function snvVersion(fileName: string): string | null {
  const m = VERSION_FILE.exec(fileName);
  return m ? `${m[1]}${m[2]}`.toUpperCase() : null;
}

/** First day of the version's month; null when YYYYMM is not a month. */
export function versionDate(versao: string): string | null {
  const m = /^(\d{4})(\d{2})/.exec(versao);
  if (!m || Number(m[2]) < 1 || Number(m[2]) > 12) return null;
  return `${m[1]}-${m[2]}-01`;
}

/** The newest version among file names: the lexicographic maximum (letters are revisions). */
export function newestVersion(names: string[]): string | null {
  const versions = names.filter((n) => VERSION_FILE.test(n)).sort((a, b) => {
    const x = a.toUpperCase();
    const y = b.toUpperCase();
    return x < y ? -1 : x > y ? 1 : 0;
  });
  return versions.at(-1) ?? null;
}

const redact = (u: URL) => {
  const c = new URL(u.href);
  if (c.username || c.password) c.username = c.password = '';
  return c.href;
};

const decodeXml = (s: string) =>
  s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&apos;/g, "'").replace(/&amp;/g, '&');

/**
 * Names in a WebDAV folder (PROPFIND, Depth 1). Credentials come from the URL's user
 * info (DNIT Cloud: the public share token as user, empty password). 401/403/404 mean
 * the share or folder moved (SOURCES §8.7), not a transient error.
 */
export function listWebdavFolder(folderUrl: string, userAgent: string, timeoutMs = 60_000): Promise<string[]> {
  const u = new URL(folderUrl.endsWith('/') ? folderUrl : `${folderUrl}/`);
  const get = u.protocol === 'https:' ? https.request : http.request;
  const body = '<?xml version="1.0" encoding="utf-8"?><d:propfind xmlns:d="DAV:"><d:prop><d:resourcetype/><d:getlastmodified/></d:prop></d:propfind>';
  return new Promise((resolve, reject) => {
    const req = get(u, { method: 'PROPFIND', headers: { depth: '1', 'content-type': 'application/xml; charset=utf-8', 'user-agent': userAgent } }, (res) => {
      const status = res.statusCode ?? 0;
      if (status === 401 || status === 403 || status === 404) {
        res.resume();
        reject(new AgroError('source_not_found', `${redact(u)}: HTTP ${status} on PROPFIND: the share token or folder has moved (update the dnit-snv source)`));
        return;
      }
      if (status !== 207 && status !== 200) {
        res.resume();
        reject(new AgroError('download_failed', `${redact(u)}: HTTP ${status} on PROPFIND`));
        return;
      }
      let xml = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (xml += c));
      res.on('error', (e) => reject(new AgroError('download_failed', `${redact(u)}: ${e.message}`)));
      res.on('end', () => {
        const names: string[] = [];
        for (const m of xml.matchAll(/<(?:[\w-]+:)?href>([^<]*)<\/(?:[\w-]+:)?href>/gi)) {
          const last = decodeXml(m[1]).replace(/\/+$/, '').split('/').pop() ?? '';
          try {
            names.push(decodeURIComponent(last));
          } catch {
            names.push(last);
          }
        }
        resolve(names);
      });
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`PROPFIND stalled for ${timeoutMs} ms`)));
    req.on('error', (e) => reject(new AgroError('download_failed', `${redact(u)}: ${e.message}`)));
    req.end(body);
  });
}

/** Pipeline-specific facts, stored with the quality report beside the common ones. */
export interface SnvFacts extends QualityFacts {
  snv: {
    versao: string | null;
    /** Observed `superficie` values of this version and their segment counts. */
    superficies: { superficie: string | null; trechos: number }[];
    extensao_divergente: {
      limite: number;
      total: number;
      sem_extensao_declarada: number;
      trechos: { codigo: string; extensao_km: number; extensao_calculada_km: number; diferenca: number }[];
    };
    codigos_repetidos: { codigo: string; trechos: number }[];
  };
}

const round = (n: number, d: number) => Math.round(n * 10 ** d) / 10 ** d;

/** SOURCES §8.3: the SNV CRS is unverified; the reader would assume 4674 without a .prj. */
function refuseBlind(layers: VectorLayer[], file: { name: string }): void {
  const blind = layers.filter((l) => l.sridAssumed);
  if (blind.length) {
    throw new AgroError(
      'missing_layer_part',
      `${blind.map((l) => path.basename(l.file)).join(', ')} in ${file.name} has no .prj: the SNV coordinate system is not guessed (SOURCES §8.3)`,
      { part: '.prj', layers: blind.map((l) => l.name) },
    );
  }
}

export const dnitSnv = shapedPipeline({
  name: 'dnit-snv',
  relation: DNIT_SNV,
  source: {
    pattern: VERSION_FILE, ext: /\.zip$/i, what: 'SNV version zip (YYYYMM<letter>.zip)',
    newest: (names) => newestVersion(names)!,
    listRemote: (url, ctx) => listWebdavFolder(url, ctx.cfg.userAgent, ctx.cfg.download.stallTimeoutMs),
    releaseDate: (name) => {
      const v = snvVersion(name);
      return v ? versionDate(v) : null;
    },
  },
  read: { srid: 4674, refuse: refuseBlind },
  classify: classifySegments,
  values: (file) => ({ versao: snvVersion(file.name) }),
  // The distance is to main alignments (SOURCES §8.7: variants and coincident stretches are
  // loaded, not measured to; the API's serving.dnit_snv_principal reads the same), and planned
  // segments (etl.snv_planejada, migration 0103) are published but are no road to measure to:
  // etl.snv_principal, the view's rule too (migration 0131).
  overlay: { camada: 'rodovia', kind: 'distance', filter: 'etl.snv_principal(l.tipo_trecho, l.superficie, l.legenda)' },
  async facts({ client, t, target, file, facts }): Promise<Pick<SnvFacts, 'snv'>> {
    const versao = snvVersion(file.name);
    const g = await geometryCounts(client, t.classified);
    facts.geometry.invalid = g.invalid;
    facts.geometry.repaired = g.repaired;
    facts.geometry.rejected = g.emptyAfterRepair;
    addCounts(facts, 'unparsed', { br: await brNotNumbers(client, target) });

    const rep = await snvReport(client, { target, limit: LENGTH_GAP_LIMIT });
    const superficies = rep.filter((r) => r.kind === 'superficie').map((r) => ({ superficie: r.codigo, trechos: r.n! }));
    const divergent = rep
      .filter((r) => r.kind === 'extensao_divergente')
      .map((r) => ({
        codigo: r.codigo!,
        extensao_km: r.extensao_km!,
        extensao_calculada_km: round(r.calculada_km!, 3),
        diferenca: round((r.calculada_km! - r.extensao_km!) / r.extensao_km!, 4),
      }));
    const semExtensao = rep.find((r) => r.kind === 'sem_extensao_declarada')?.n ?? 0;
    const repetidos = rep.filter((r) => r.kind === 'codigo_repetido').map((r) => ({ codigo: r.codigo!, trechos: r.n! }));

    const label = versao ?? file.name;
    facts.notes.push(`superficie values in ${label}: ${superficies.map((s) => `${s.superficie ?? '(empty)'} (${s.trechos})`).join(', ')}`);
    if (divergent.length) {
      facts.notes.push(
        `${divergent.length} segments differ from their declared vl_extensa by more than ${LENGTH_GAP_LIMIT * 100} % (kept as published): ` +
          divergent.slice(0, 20).map((d) => `${d.codigo} ${d.extensao_km} km declared, ${d.extensao_calculada_km} km drawn`).join('; ') +
          (divergent.length > 20 ? '; …' : ''),
      );
    }
    if (semExtensao) facts.notes.push(`${semExtensao} segments declare no vl_extensa`);
    if (repetidos.length) facts.notes.push(`${repetidos.length} codes are carried by several segments (all kept): ${repetidos.slice(0, 20).map((r) => r.codigo).join(', ')}`);
    if (!versao) facts.notes.push(`${file.name} is not named YYYYMM<letter>.zip: versao is NULL`);
    return {
      snv: {
        versao,
        superficies,
        extensao_divergente: { limite: LENGTH_GAP_LIMIT, total: divergent.length, sem_extensao_declarada: semExtensao, trechos: divergent.slice(0, LIST_LIMIT) },
        codigos_repetidos: repetidos.slice(0, LIST_LIMIT),
      },
    };
  },
});
