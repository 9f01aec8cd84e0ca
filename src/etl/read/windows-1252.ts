// Single-byte text that is not UTF-8 (Receita's files, a CSV whose bytes are not UTF-8; a DBF
// gets CP1252 from layer-encoding.ts when it holds these bytes) is read as Windows-1252, as
// the WHATWG Encoding Standard reads every 'iso-8859-1'/'latin1' label: the two agree on every
// byte but 0x80–0x9F, which are C1 control characters in ISO-8859-1 (never text) and the
// typographic punctuation Windows writes in CP1252 (’ – “ ” …, e.g. "Olho d’Água"). Read as
// ISO-8859-1 they published invisible controls in place of the apostrophe and the dash, and
// no check counted them. The five bytes CP1252 leaves undefined (0x81, 0x8D, 0x8F, 0x90, 0x9D)
// stay C1 controls, which the text check counts (text-checks.ts).

/** The characters of bytes 0x80–0x9F in Windows-1252 (undefined bytes as their C1 control). */
export const CP1252_HIGH = '€\u0081‚ƒ„…†‡ˆ‰Š‹Œ\u008dŽ\u008f\u0090‘’“”•–—˜™š›œ\u009džŸ';

const C1 = /[\u0080-\u009f]/;
const C1_ALL = /[\u0080-\u009f]/g;

/** Text decoded byte for byte as ISO-8859-1 → the same text read as Windows-1252. */
export function c1ToWindows1252(text: string): string {
  return C1.test(text) ? text.replace(C1_ALL, (c) => CP1252_HIGH[c.charCodeAt(0) - 0x80]) : text;
}

/** Bytes [start, end) of `b` read as Windows-1252. */
export function decodeWindows1252(b: Buffer, start = 0, end = b.length): string {
  return c1ToWindows1252(b.toString('latin1', start, end));
}
