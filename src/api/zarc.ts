// ZARC risk rows as the API shows them: per crop, season, cycle, soil, management and climate
// variant, the ten-day periods (1..36) indicated at 20, 30 and 40 % risk (a NULL period is not
// indicated). The climate variant is part of ZARC's key: without it two rows of one
// municipality would read as two contradicting tables of the same crop.

export interface ZarcCultura {
  cultura: unknown;
  safra: unknown;
  ciclo: unknown;
  solo: unknown;
  manejo: unknown;
  portaria: unknown;
  cod_clima: unknown;
  clima: unknown;
  risco_20: number[];
  risco_30: number[];
  risco_40: number[];
}

const PERIODS = Array.from({ length: 36 }, (_, i) => i + 1);

/** One risk row; `risk(n)` is the level of period n (dec<n>). */
export function zarcCultura(r: Record<string, unknown>, risk: (n: number) => unknown): ZarcCultura {
  const at = (level: number) => PERIODS.filter((n) => risk(n) === level);
  return {
    cultura: r.cultura, safra: r.safra, ciclo: r.ciclo, solo: r.solo, manejo: r.manejo ?? null, portaria: r.portaria ?? null,
    cod_clima: r.cod_clima ?? null, clima: r.clima ?? null,
    risco_20: at(20), risco_30: at(30), risco_40: at(40),
  };
}
