// How a source's column names (a CSV header, a layer's fields) are matched to the spellings a
// declaration lists (FieldSpec.aliases): exactly first, then by a key without accents and
// punctuation, so that a re-spelled header ('NÚMERO CAR', 'CPF/CNPJ', 'Município') still maps.
/** A header cell as alias maps spell it: BOM stripped, trimmed, lower case. */
export const normaliseHeader = (h: string) => h.replace(/^\uFEFF/, '').trim().toLowerCase();

/**
 * A header cell or an alias as they are matched when no alias is spelled exactly like the cell:
 * without accents, every run of other characters than letters and digits one '_' ('NÚMERO
 * CAR' → 'numero_car', 'CPF/CNPJ' → 'cpf_cnpj'): agencies and spreadsheets re-spell headers.
 */
export const headerKey = (h: string) =>
  normaliseHeader(h).normalize('NFD').replace(/[\u0300-\u036f]/g, '').replace(/[^a-z0-9]+/g, '_').replace(/^_+|_+$/g, '');

/**
 * For each spec, the index of its column in `names` (normaliseHeader'd): an exact alias first,
 * else an alias by headerKey on a column no spec took. Among several columns spelling one spec
 * (a header in transition holding the legacy and the current spelling), the spec's first alias
 * the header holds wins, not the first column: declarations list the current spelling first,
 * and the legacy column left empty beside it published every value NULL.
 */
export function matchHeader(names: string[], specs: { aliases: string[] }[]): (number | null)[] {
  const first = (aliases: string[], at: (alias: string) => number) => {
    for (const a of aliases) {
      const i = at(a);
      if (i >= 0) return i;
    }
    return -1;
  };
  const exact = specs.map((s) => first(s.aliases, (a) => names.indexOf(a)));
  const taken = new Set(exact.filter((i) => i >= 0));
  const keys = names.map(headerKey);
  return specs.map((s, k) => {
    if (exact[k] >= 0) return exact[k];
    const i = first(s.aliases.map(headerKey), (w) => (w === '' ? -1 : keys.findIndex((key, j) => !taken.has(j) && key === w)));
    if (i < 0) return null;
    taken.add(i);
    return i;
  });
}
