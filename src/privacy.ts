// Personal data rules (contract §3): CPFs are masked in output and never logged in clear.

const onlyDigits = (s: string) => s.replace(/\D/g, '');

/** `12345678901` or `123.456.789-01` → `***.456.789-**`. */
export function maskCpf(cpf: string): string {
  const d = onlyDigits(cpf);
  if (d.length !== 11) return '***';
  return `***.${d.slice(3, 6)}.${d.slice(6, 9)}-**`;
}

/** A CNPJ (14 characters, alphanumeric root allowed) formatted as `12.345.678/0001-90`. */
export function formatCnpj(cnpj: string): string {
  const c = cnpj.replace(/[.\/-]/g, '').toUpperCase();
  if (c.length !== 14) return c;
  return `${c.slice(0, 2)}.${c.slice(2, 5)}.${c.slice(5, 8)}/${c.slice(8, 12)}-${c.slice(12)}`;
}

// A CPF written with or without punctuation, not part of a longer digit run
// (so 14-digit CNPJs and 43-character CAR numbers are left alone).
const CPF_IN_TEXT = /(?<![\dA-Za-z])(\d{3})\.?(\d{3})\.?(\d{3})-?(\d{2})(?![\dA-Za-z])/g;

/** Masks every CPF-looking number inside free text (log lines, error messages). */
export function maskCpfsInText(text: string): string {
  return text.replace(CPF_IN_TEXT, (_m, _a, b, c) => `***.${b}.${c}-**`);
}

/**
 * Masks CPFs in every string of a value, object keys included (a source's column names
 * are text it wrote: a header line that lost its line break carries row values).
 */
export function maskCpfsDeep<T>(value: T, depth = 0): T {
  if (typeof value === 'string') return maskCpfsInText(value) as T;
  if (depth > 32 || value === null || typeof value !== 'object') return value;
  if (value instanceof Error) {
    return { type: value.name, message: maskCpfsInText(value.message), stack: value.stack && maskCpfsInText(value.stack) } as T;
  }
  if (value instanceof Date) return value;
  if (Array.isArray(value)) return value.map((v) => maskCpfsDeep(v, depth + 1)) as T;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[maskCpfsInText(k)] = maskCpfsDeep(v, depth + 1);
  return out as T;
}
