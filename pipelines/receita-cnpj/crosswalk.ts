// Municipalities: Receita's TOM code → IBGE, by normalised name + the UF the establishments
// give each code, against serving.ibge_municipios (SOURCES §10.7). Written after the families
// (the engine's deferred relation): the UFs come from the establishments' records.
import type pg from 'pg';
import { copyLine } from '../../src/etl/copy.ts';
import type { CnpjFacts } from './facts.ts';
import { ibgeMunicipalities, normalisedNames } from './queries.ts';

export interface Crosswalk {
  /** COPY lines of cnpj_municipios (codigo, descricao, uf, codigo_ibge, extra, snapshot_id). */
  rows: string[];
  facts: CnpjFacts['municipios'];
}

/** The UFs the establishments give each TOM code, counted as their records stream by. */
export class PlaceCounts {
  readonly byCode = new Map<string, Map<string, number>>();
  add = (uf: string, mun: string): void => {
    let m = this.byCode.get(mun);
    if (!m) this.byCode.set(mun, (m = new Map()));
    m.set(uf, (m.get(uf) ?? 0) + 1);
  };
}

/** TOM → IBGE: the UF most establishments give a TOM code, then normalised name + UF against the IBGE list. */
export async function buildCrosswalk(client: pg.ClientBase, lookup: [string, string][], places: PlaceCounts, snapshotId: number): Promise<Crosswalk> {
  const ibge = new Map<string, string>();
  for (const x of await ibgeMunicipalities(client)) ibge.set(`${x.nome}|${x.uf}`, x.geocodigo);
  const loaded = ibge.size > 0;
  const norm = await normalisedNames(client, lookup.map(([, d]) => d));
  const facts: CnpjFacts['municipios'] = { ibge_carregado: loaded, codigos: lookup.length, casados: 0, sem_par: 0, sem_uf: 0, exemplos_sem_par: [] };
  const rows = lookup.map(([codigo, descricao], i) => {
    const ufs = places.byCode.get(codigo);
    const uf = ufs ? [...ufs.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0][0] || null : null;
    let geocodigo: string | null = null;
    if (!uf) facts.sem_uf++;
    else if (loaded) {
      geocodigo = ibge.get(`${norm[i]}|${uf}`) ?? null;
      if (geocodigo) facts.casados++;
      else {
        facts.sem_par++;
        if (facts.exemplos_sem_par.length < 20) facts.exemplos_sem_par.push(`${codigo} ${descricao}/${uf}`);
      }
    }
    return copyLine([codigo, descricao, uf, geocodigo, null, snapshotId]);
  });
  return { rows, facts };
}
