// Personal data rules (contract §3): CPFs are masked in output and never logged in clear.
import { isValidCpf } from './documents.ts';

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

// A CPF written with or without punctuation, not part of a longer digit run (so 14-digit
// CNPJs and 43-character CAR numbers are left alone). Any one of the separators the document
// parser strips may stand between the groups: '529.982.247.25' and '529 982 247 25' are
// CPFs to the API (src/documents.ts), so they are CPFs to the mask too; '529_982_247_25' is
// refused by the API (400) but is a CPF's digits all the same, and the history keeps the path.
const SEP = '[ ._\\/\\-\\u00a0]?';
const CPF_IN_TEXT = new RegExp(`(?<![\\dA-Za-z])(\\d{3})${SEP}(\\d{3})${SEP}(\\d{3})${SEP}(\\d{2})(?![\\dA-Za-z])`, 'g');

// A URL's password (`https://mirror:pw@host/`, `postgres://agro:pw@db/`): a source or a
// webhook URL written with its credentials reaches error messages, the run ledger and logs.
const URL_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:@\/?#]*):[^\s@\/?#]+@/gi;

/**
 * Masks every CPF-looking number inside free text (log lines, error messages), and the
 * password of any URL in it (every text that reaches stdout, stderr or the ledger comes here).
 */
export function maskCpfsInText(text: string): string {
  return text.replace(CPF_IN_TEXT, (_m, _a, b, c) => `***.${b}.${c}-**`).replace(URL_PASSWORD, '$1:***@');
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

/**
 * A whole number that is a CPF's digits, masked: 11 of them as the text mask reads them, or 9 or
 * 10 whose check digits hold once the leading zeros a number cannot keep are put back (an N(11)
 * cell '01234567890' is the number 1234567890: about one CPF in ten starts with 0).
 */
function maskCpfNumber(n: number): string | number {
  if (!Number.isSafeInteger(n) || n <= 0) return n;
  const t = String(n);
  const masked = maskCpfsInText(t);
  if (masked !== t) return masked;
  const padded = t.padStart(11, '0');
  return t.length >= 9 && t.length < 11 && isValidCpf(padded) ? maskCpfsInText(padded) : n;
}

/**
 * Source values (a report's example rows): as maskCpfsDeep, and a whole number that is a CPF's
 * digits too (maskCpfNumber). A column the pipeline does not know is kept as read, and a DBF
 * number field holding CPFs comes back from jsonb as a JSON number (52998224725), which a text
 * mask never sees.
 */
export function maskCpfsInSourceValues<T>(value: T, depth = 0): T {
  if (typeof value === 'number') return maskCpfNumber(value) as T;
  if (depth > 32 || value === null || typeof value !== 'object' || value instanceof Date) return maskCpfsDeep(value);
  if (Array.isArray(value)) return value.map((v) => maskCpfsInSourceValues(v, depth + 1)) as T;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [maskCpfsInText(k), maskCpfsInSourceValues(v, depth + 1)])) as T;
}

// What normalizeDocument strips (src/documents.ts): a value that is 11 digits without them is
// a CPF to the API, however it is grouped ('5299.8224-725').
const DOCUMENT_PUNCTUATION = /[ \t\n\r\f\v\u00a0./-]/g;
// 11 digits, or a CPF padded with one or two zeros (12 or 13 digits: never a CNPJ, which has 14).
const CPF_DIGITS = /^0{0,2}([0-9]{11})$/;
const DIGIT_RUN = /(?<![0-9A-Za-z])[0-9][0-9.-]*[0-9](?![0-9A-Za-z])/g;
const API_KEY_IN_TEXT = /ck_(live|test)_[0-9A-Za-z]+/g;
/** A signed or plain decimal whose fraction is not two digits ('-15.793889012', '47.123'): a number, not '529982247.25'. */
const isDecimal = (s: string): boolean => {
  const m = /^\s*-?\d+\.(\d+)\s*$/.exec(s);
  return !!m && m[1].length !== 2;
};

/** Percent-escapes decoded where they form valid UTF-8; anything else is kept as written. */
function decodePercent(text: string): string {
  return text.replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => {
    try {
      return decodeURIComponent(run);
    } catch {
      return run;
    }
  });
}

/**
 * A request URL as the request log and the query history keep it: percent-escapes decoded (so
 * that '%2052998224725' is seen for what it is), every path segment or query value that the
 * API would read as a CPF masked, CPFs inside other text masked, API keys redacted (a key sent
 * in the query string), control characters escaped again (PostgreSQL text cannot hold NUL),
 * at most `max` characters.
 */
export function maskRequestUrl(url: string, max: number): string {
  const parts = decodePercent(url).split(/([/?&=])/);
  let inQuery = false;
  const masked = parts
    .map((p) => {
      if (p === '?') inQuery = true;
      // A decimal number in a query value ('lat=-15.793889012') is not a CPF; a path segment
      // is one when the document routes would read it as one, however it is grouped.
      if (inQuery && isDecimal(p)) return p;
      const whole = CPF_DIGITS.exec(p.replace(DOCUMENT_PUNCTUATION, ''));
      if (whole) return maskCpf(whole[1]);
      // Inside other text (a search term): a run of digits, dots and dashes holding a CPF's digits.
      return p.replace(DIGIT_RUN, (run, at: number) => {
        if (isDecimal(run) || p[at - 1] === '-') return run;
        const inRun = CPF_DIGITS.exec(run.replace(/\D/g, ''));
        return inRun ? maskCpf(inRun[1]) : run;
      });
    })
    .join('');
  return maskCpfsInText(masked)
    .replace(API_KEY_IN_TEXT, 'ck_$1_[redacted]')
    .replace(/[\u0000-\u001f\u007f]/g, (c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0').toUpperCase()}`)
    .slice(0, max);
}
