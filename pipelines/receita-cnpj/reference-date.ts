// The month's bound for plausible dates (contract §3: a date after the source's release is
// implausible). Receita's member names carry the extraction's reference date
// (`K3241.K03200Y0.D40810.EMPRECSV`: D + the year's last digit + MM + DD → 2024-08-10,
// SOURCES §10.2), about 20 days before the folder month's last day: no record of the month can
// be later. A code is taken when it is a calendar date in the folder's month or the month
// before (an extraction published in a later folder; a folder never holds a later one); codes
// that disagree give the latest; none readable, or none plausible, leaves the month's last
// day, and the report says which bound was used (`cnpj.limite_datas`).
import type { FetchedFile } from '../../src/etl/download.ts';
import { checkZipDirectory, type ZipLimits } from '../../src/etl/archive.ts';

/** Which bound the month's dates were checked against (report `cnpj.limite_datas`). */
export interface DatesBound {
  /** The last plausible date (yyyy-mm-dd). */
  data: string;
  origem: 'data_de_referencia' | 'fim_do_mes';
  /** The plausible reference dates the member names gave (distinct, sorted). */
  referencias: string[];
  /** Codes read that are no plausible date for the month (e.g. `D51011` in folder 2026-10). */
  recusadas: string[];
}

const CODE = /^D(\d)(\d{2})(\d{2})$/i;
const iso = (t: number) => new Date(t).toISOString().slice(0, 10);

export const lastDayOfMonth = (date: string): string => {
  const [y, m] = date.split('-').map(Number);
  return iso(Date.UTC(y, m, 0));
};

/** The reference date a code names for folder `month` (yyyy-mm), or null when it is no plausible one. */
export function referenceDate(code: string, month: string): string | null {
  const c = CODE.exec(code);
  if (!c) return null;
  const [fy, fm] = month.split('-').map(Number);
  const year = fy - ((fy - Number(c[1])) % 10 + 10) % 10; // the latest year up to the folder's ending in that digit
  const [m, d] = [Number(c[2]), Number(c[3])];
  const t = Date.UTC(year, m - 1, d);
  if (new Date(t).getUTCMonth() !== m - 1 || new Date(t).getUTCDate() !== d) return null; // no calendar date
  return t >= Date.UTC(fy, fm - 2, 1) && t <= Date.UTC(fy, fm, 0) ? iso(t) : null;
}

/** The bound from the members' names of folder `month`, never later than the last day of the as-of's month (a forced earlier --as-of). */
export function datesBound(members: string[], month: string, asOf: string): DatesBound {
  const referencias = new Set<string>();
  const recusadas = new Set<string>();
  for (const name of members) {
    for (const part of name.split(/[./\\]/)) {
      if (!CODE.test(part)) continue;
      const date = referenceDate(part, month);
      if (date) referencias.add(date);
      else recusadas.add(part.toUpperCase());
    }
  }
  const refs = [...referencias].sort();
  const monthEnd = lastDayOfMonth(asOf);
  const latest = refs.at(-1);
  const fromReference = latest !== undefined && latest <= monthEnd;
  return { data: fromReference ? latest : monthEnd, origem: fromReference ? 'data_de_referencia' : 'fim_do_mes', referencias: refs, recusadas: [...recusadas].sort() };
}

/**
 * The month's bound from its zips' member names (central directories only). A zip that cannot
 * be listed is left out here: its read fails the load with the archive's own error.
 */
export async function monthDatesBound(files: FetchedFile[], month: string, asOf: string, limits?: ZipLimits): Promise<DatesBound> {
  const members: string[] = [];
  for (const f of files) {
    const listed = await checkZipDirectory(f.path, limits).catch(() => null);
    if (listed) members.push(...listed.entries);
  }
  return datesBound(members, month, asOf);
}

/** `D61011` for 2026-10-11: how the bound is named in the notes. */
export const referenceCode = (date: string): string => `D${date.slice(3, 4)}${date.slice(5, 7)}${date.slice(8, 10)}`;
