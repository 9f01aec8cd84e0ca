// The one rule that decides how a shapefile's DBF text is decoded, for every pipeline:
//   1. the .cpg sidecar (ESRI's code page file) — one saying UTF-8 over bytes that cannot be
//      UTF-8 is overruled by the bytes (rule 4's single-byte page), one naming a single-byte
//      page over bytes that are valid UTF-8 holding multibyte sequences too (UTF-8), and one
//      naming a Western DOS page over clearly Windows letters (as an LDID is, rule 3),
//   2. the .cst sidecar (GeoServer's SHAPE-ZIP writes its charset there),
//   3. the DBF's language driver id (LDID, header byte 29) when it makes a specific claim,
//      unless the bytes are valid UTF-8 holding multibyte sequences (then UTF-8) or, for a
//      Western DOS page, clearly Windows letters (then rule 4's single-byte page),
//   4. the bytes themselves: valid UTF-8 holding multibyte sequences → UTF-8, else the
//      single-byte page whose reading gives more Portuguese letters, CP850 (DOS) or else
//      ISO-8859-1 — as CP1252 when the DBF holds bytes 0x80–0x9F (singleBytePage; a .cpg
//      saying ISO-8859-1 gets the same reading of those bytes).
// LDID 0x00 (none), 0x03 and 0x57/0x58/0x59 (Windows ANSI) make no reliable claim in
// practice: ESRI writes 0x57 by default and SICAR's older zips carry UTF-8 bytes under it
// (GDAL alone would read them as ISO-8859-1 and publish 'PlÃ¡cido'), so the bytes decide.
// A DBF with ASCII bytes only proves nothing; it is read as ISO-8859-1 ('default').
import fs from 'node:fs';

export type EncodingRule = 'cpg' | 'cst' | 'ldid' | 'bytes' | 'default';

export interface EncodingDecision {
  /** Encoding name GDAL's SHAPE_ENCODING understands ('UTF-8', 'ISO-8859-1', 'CP850', …). */
  encoding: string;
  decidedBy: EncodingRule;
  /** A sidecar or LDID that was present but not usable, for the report. */
  ignored?: string;
  /** The first sidecar present but passed over (not understood, or a UTF-8 label the bytes overruled). */
  passedOver?: 'cpg' | 'cst';
}

/** LDIDs that name one code page (dBase/ESRI table); the ANSI ones are left to the bytes. */
const LDID_CODEPAGES: Record<number, string> = {
  0x01: 'CP437', 0x02: 'CP850', 0x08: 'CP865', 0x09: 'CP437', 0x0a: 'CP850', 0x0b: 'CP437', 0x0d: 'CP437',
  0x0e: 'CP850', 0x0f: 'CP437', 0x10: 'CP850', 0x11: 'CP437', 0x12: 'CP850', 0x13: 'CP932', 0x14: 'CP850',
  0x15: 'CP437', 0x16: 'CP850', 0x17: 'CP865', 0x18: 'CP437', 0x19: 'CP437', 0x1a: 'CP850', 0x1b: 'CP437',
  0x1c: 'CP863', 0x1d: 'CP850', 0x1f: 'CP852', 0x22: 'CP852', 0x23: 'CP852', 0x24: 'CP860', 0x25: 'CP850',
  0x26: 'CP866', 0x37: 'CP850', 0x40: 'CP852', 0x4d: 'CP936', 0x4e: 'CP949', 0x4f: 'CP950', 0x50: 'CP874',
  0x64: 'CP852', 0x65: 'CP866', 0x66: 'CP865', 0x67: 'CP861', 0x6a: 'CP737', 0x6b: 'CP857', 0x6c: 'CP863',
  0x78: 'CP950', 0x79: 'CP949', 0x7a: 'CP936', 0x7b: 'CP932', 0x7c: 'CP874', 0x7d: 'CP1255', 0x7e: 'CP1256',
  0xc8: 'CP1250', 0xc9: 'CP1251', 0xca: 'CP1254', 0xcb: 'CP1253',
};

/**
 * A code page as written in a .cpg or .cst ('UTF-8', 'utf8', '65001', 'ISO-8859-1', '88591',
 * 'ANSI 1252', '1252', 'windows-1252', 'Cp1252', 'latin1') → the name GDAL recodes with;
 * null when it is not recognised.
 */
export function codePageName(text: string): string | null {
  const t = text.replace(/^\uFEFF/, '').trim().toUpperCase().replace(/[\s_]+/g, ' ');
  if (!t) return null;
  if (/^(UTF-?8|65001)$/.test(t)) return 'UTF-8';
  if (/^(ISO[- ]?8859[- ]?1|8859[- ]?1|88591|28591|LATIN-?1|L1|ISO LATIN 1)$/.test(t)) return 'ISO-8859-1';
  const win = /^(?:ANSI |WINDOWS-?|CP-?|MS)?(125[0-8])$/.exec(t);
  if (win) return `CP${win[1]}`;
  const iso = /^(?:ISO[- ]?)?8859[- ]?(\d{1,2})$/.exec(t);
  if (iso) return `ISO-8859-${iso[1]}`;
  const oem = /^(?:OEM |IBM|CP-?)?(437|850|852|860|861|863|865|866)$/.exec(t);
  if (oem) return `CP${oem[1]}`;
  return null;
}

const CHUNK = 1 << 20;
/** The byte scans that decide a page look at the first 16 MiB of records. */
const PAGE_SCAN_BYTES = 16 << 20;

/**
 * Hands a DBF's record bytes (header skipped) to `each` in 1 MiB chunks (one buffer, reused),
 * up to `limit` bytes or until `each` returns false. Null when the file is too short for a DBF
 * header; else whether the scan reached the records' end.
 */
function scanRecords(dbf: string, limit: number, each: (chunk: Buffer) => boolean | void): { complete: boolean } | null {
  const fd = fs.openSync(dbf, 'r');
  try {
    const head = Buffer.alloc(32);
    if (fs.readSync(fd, head, 0, 32, 0) < 12) return null;
    const headerLen = head.readUInt16LE(8);
    const recordsEnd = headerLen + head.readUInt32LE(4) * head.readUInt16LE(10);
    const end = Math.min(recordsEnd, headerLen + limit);
    const buf = Buffer.alloc(CHUNK);
    for (let pos = headerLen; pos < end; ) {
      const n = fs.readSync(fd, buf, 0, Math.min(CHUNK, end - pos), pos);
      if (n === 0) break;
      pos += n;
      if (each(buf.subarray(0, n)) === false) return { complete: pos >= recordsEnd };
    }
    return { complete: end === recordsEnd };
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Scans a DBF's records (header skipped) in 1 MiB chunks: 'utf8' when every byte sequence
 * is valid UTF-8 and at least one is multibyte, 'latin1' when some sequence is not UTF-8
 * (stops there), 'ascii' when there is no byte above 0x7F.
 */
export function scanDbfBytes(dbf: string): 'utf8' | 'latin1' | 'ascii' {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  // A multibyte sequence decodes to fewer UTF-16 units than it has bytes.
  let bytes = 0;
  let units = 0;
  let utf8 = true;
  const decode = (chunk?: Buffer) => {
    try {
      units += (chunk ? decoder.decode(chunk, { stream: true }) : decoder.decode()).length;
    } catch {
      utf8 = false;
    }
  };
  const scanned = scanRecords(dbf, Infinity, (chunk) => {
    decode(chunk);
    bytes += chunk.length;
    return utf8; // decided at the first sequence that is not UTF-8
  });
  if (!scanned) return 'ascii';
  if (utf8) decode();
  if (!utf8) return 'latin1';
  return units < bytes ? 'utf8' : 'ascii';
}

/**
 * Byte sequences in a DBF's first 16 MiB of records: `multibyte`, valid multibyte UTF-8
 * sequences; `invalid`, sequences UTF-8 cannot decode; `midWord`, the invalid ones whose lead
 * byte sits inside a word (followed at once by an ASCII letter or digit, or by another byte
 * from 0xC0: 'São' in latin1 is S 0xE3 'o', 'ção' 0xE7 0xE3 'o'). A UTF-8 value cut inside
 * its last character by the field's width ends in a lead byte followed by the padding: not
 * inside a word, so a UTF-8 file whose only damage is such cuts is never taken for latin1.
 */
export function utf8Sequences(dbf: string): { multibyte: number; invalid: number; midWord: number } {
  let multibyte = 0;
  let invalid = 0;
  let midWord = 0;
  // continuation bytes still expected by the sequence in progress (it may straddle chunks),
  // and a byte that can never start one (0xC0, 0xC1, 0xF5–0xFF) waiting for its next byte
  let need = 0;
  let lonePending = false;
  const inWord = (b: number) => (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || b >= 0xc0;
  const scanned = scanRecords(dbf, PAGE_SCAN_BYTES, (chunk) => {
    for (const b of chunk) {
      if (lonePending && inWord(b)) midWord++;
      lonePending = false;
      if (need > 0) {
        if ((b & 0xc0) === 0x80) {
          if (--need === 0) multibyte++;
          continue;
        }
        // the sequence broke at this byte: inside a word when this byte is a letter
        invalid++;
        if (inWord(b)) midWord++;
        need = 0;
      }
      if (b < 0x80) continue;
      if (b >= 0xc2 && b <= 0xdf) need = 1;
      else if (b >= 0xe0 && b <= 0xef) need = 2;
      else if (b >= 0xf0 && b <= 0xf4) need = 3;
      else {
        // a stray continuation byte (a symbol in latin1: º, ª, °) is no word evidence
        invalid++;
        lonePending = b >= 0xc0;
      }
    }
  });
  // a sequence still open where the records end is cut; where the scan stops, unknown
  if (need > 0 && scanned?.complete) invalid++;
  return { multibyte, invalid, midWord };
}

// Portuguese letters as each single-byte code page writes them: 0xC0–0xFF in Windows-1252 /
// ISO-8859-1; mostly 0x80–0xA5 in DOS CP850 ('ç' 0x87, 'ã' 0xC6, 'é' 0x82, 'á' 0xA0).
const PT_LETTERS = 'àáâãçéêíóôõúüÀÁÂÃÇÉÊÍÓÔÕÚÜ';
const CP850_HIGH =
  'ÇüéâäàåçêëèïîìÄÅÉæÆôöòûùÿÖÜø£Ø×ƒáíóúñÑªº¿®¬½¼¡«»░▒▓│┤ÁÂÀ©╣║╗╝¢¥┐└┴┬├─┼ãÃ╚╔╩╦╠═╬¤ðÐÊËÈıÍÎÏ┘┌█▄¦Ì▀ÓßÔÒõÕµþÞÚÛÙýÝ¯´\u00ad±‗¾¶§÷¸°¨·¹³²■\u00a0';
const isPtLetter = (c: string) => PT_LETTERS.includes(c);
// Bytes that CP850 reads as a letter but that Windows-1252 text uses for common punctuation
// (NBSP, €, …, “, ·): they vote for neither page, or one NBSP or curly quote in a Windows file
// would turn 'José' into 'JosÚ'.
const WINDOWS_PUNCTUATION = new Set([0xa0, 0x80, 0x85, 0x93, 0x94, 0xb7]);
/** Per byte 0x80–0xFF: +1 when only Windows-1252 reads it as a Portuguese letter, -1 when only CP850 does. */
const PAGE_VOTE: number[] = Array.from({ length: 128 }, (_, i) => {
  if (WINDOWS_PUNCTUATION.has(0x80 + i)) return 0;
  const win = isPtLetter(String.fromCharCode(0x80 + i));
  const dos = isPtLetter(CP850_HIGH[i]);
  return win === dos ? 0 : win ? 1 : -1;
});
// CP850's 'Ç' (0x80) as upper-case Portuguese writes it: after a capital, before A, O, U, 'Ã'
// (0xC7) or 'Õ' (0xE5): PRAÇA, POÇO, AÇU, CONCEIÇÃO, AÇÕES.
const isCapital = (b: number) => b >= 0x41 && b <= 0x5a;
const AFTER_CEDILLA = new Set([0x41, 0x4f, 0x55, 0xc7, 0xe5]);
/** CP850 needs at least this many letters only it reads, and twice as many as Windows-1252's. */
const CP850_MIN_LETTERS = 3;

/**
 * Which single-byte code page a DBF that is not UTF-8 is written in, from its first 16 MiB
 * of records: CP850 when clearly more of its high bytes are Portuguese letters in CP850 than
 * in Windows-1252 (a DOS export: 'Conceição' would read 'Concei‡Æo'), never when the LDID says
 * Windows ANSI (`windowsLdid`); else CP1252 when it holds bytes 0x80–0x9F (C1 controls in
 * ISO-8859-1, never text; CP1252's ’ – “ ” …: 'Olho d’Água' read as ISO-8859-1 published an
 * invisible U+0092); else ISO-8859-1.
 */
export function singleBytePage(dbf: string, windowsLdid = false): 'ISO-8859-1' | 'CP1252' | 'CP850' {
  const v = pageVotes(dbf);
  if (!v) return 'ISO-8859-1';
  if (!windowsLdid && v.dos >= CP850_MIN_LETTERS && v.dos >= 2 * v.win) return 'CP850';
  return v.c1 ? 'CP1252' : 'ISO-8859-1';
}

/**
 * The votes singleBytePage decides by, from the first 16 MiB of records: high bytes (and
 * upper-case cedillas) that are Portuguese letters only in CP850 (`dos`) or only in
 * Windows-1252 (`win`), and whether a byte 0x80–0x9F occurs (`c1`); null for a file too short.
 */
function pageVotes(dbf: string): { dos: number; win: number; c1: boolean } | null {
  let dos = 0;
  let win = 0;
  let c1 = false;
  // 0x80 inside an upper-case word (AFTER_CEDILLA): CP850's 'Ç' of 'CONCEIÇÃO' (0x80 0xC7),
  // never Windows' '€', which sits by digits and spaces. Upper-case DOS text votes through it
  // alone: its 'Ç', 'Ã', 'Ó', 'Ú' and 'Ô' are letters in Windows-1252 too ('CONCEI€ÇO' was
  // published for 'CONCEIÇÃO').
  let prevCapital = false;
  let cedilla = false;
  const scanned = scanRecords(dbf, PAGE_SCAN_BYTES, (chunk) => {
    for (const b of chunk) {
      if (cedilla && AFTER_CEDILLA.has(b)) dos++;
      cedilla = b === 0x80 && prevCapital;
      prevCapital = isCapital(b);
      if (b < 0x80) continue;
      const vote = PAGE_VOTE[b - 0x80];
      if (vote < 0) dos++;
      else if (vote > 0) win++;
      if (b < 0xa0) c1 = true;
    }
  });
  return scanned ? { dos, win, c1 } : null;
}

/** The DOS code pages of Western Europe, whose letters singleBytePage's vote tells from Windows-1252's. */
const WESTERN_DOS = new Set(['CP437', 'CP850', 'CP860', 'CP861', 'CP863', 'CP865']);

/**
 * The Windows page a DBF's bytes are when a Western DOS page is claimed for them (an LDID or a
 * sidecar) and they clearly are Windows letters (as many as it takes the other way round):
 * writers that put a DOS claim over Windows text exist, and read as CP850 'Conceição' was
 * published 'ConceiþÒo' (no U+FFFD, nothing counted). Null when the claim stands.
 */
function windowsOverDos(dbf: string, claimed: string): { encoding: 'CP1252' | 'ISO-8859-1'; why: string } | null {
  if (!WESTERN_DOS.has(claimed)) return null;
  const v = pageVotes(dbf);
  if (!v || v.win < CP850_MIN_LETTERS || v.win < 2 * v.dos) return null;
  return { encoding: v.c1 ? 'CP1252' : 'ISO-8859-1', why: `the bytes are Windows text (${v.win} letters only Windows-1252 reads, ${v.dos} only ${claimed})` };
}

/** The DBF's language driver id (byte 29), or null when the file is too short. */
export function dbfLdid(dbf: string): number | null {
  const fd = fs.openSync(dbf, 'r');
  try {
    const b = Buffer.alloc(1);
    return fs.readSync(fd, b, 0, 1, 29) === 1 ? b[0] : null;
  } finally {
    fs.closeSync(fd);
  }
}

/** LDIDs 0x57–0x59 say Windows ANSI: the bytes are never DOS CP850 then. */
const isWindowsLdid = (ldid: number | null): boolean => ldid !== null && ldid >= 0x57 && ldid <= 0x59;

/** Applies the rule to one layer: its sidecars (paths or null) and its DBF. */
export function decideEncoding(parts: { cpg: string | null; cst: string | null; dbf: string }): EncodingDecision {
  const ignored: string[] = [];
  let passedOver: 'cpg' | 'cst' | undefined;
  let seen: ReturnType<typeof utf8Sequences> | undefined;
  let bytes: ReturnType<typeof scanDbfBytes> | undefined;
  for (const [rule, file] of [['cpg', parts.cpg], ['cst', parts.cst]] as const) {
    if (!file) continue;
    const text = fs.readFileSync(file, 'latin1');
    const name = codePageName(text);
    if (name && name !== 'UTF-8' && (bytes ??= scanDbfBytes(parts.dbf)) === 'utf8') {
      // A single-byte label over bytes that are valid UTF-8 with multibyte sequences is wrong,
      // as an LDID's is (below): accented text in a single-byte page is almost never valid
      // UTF-8. Honoured, a DOS label published 'Concei├º├úo' with nothing counted (no U+FFFD,
      // no 'Ã' for the double-encoding check) and a Windows one blocked a file whose bytes were
      // right. The bytes overrule it (UTF-8), said in the report.
      ignored.push(`.${rule} says ${name} but the DBF's bytes are valid UTF-8: read as UTF-8`);
      return { encoding: 'UTF-8', decidedBy: 'bytes', ignored: ignored.join('; '), passedOver: passedOver ?? rule };
    }
    const win = name && bytes === 'latin1' ? windowsOverDos(parts.dbf, name) : null;
    if (win) {
      ignored.push(`.${rule} says ${name} but ${win.why}`);
      return { encoding: win.encoding, decidedBy: 'bytes', ignored: ignored.join('; '), passedOver: passedOver ?? rule };
    }
    if (name === 'ISO-8859-1' && singleBytePage(parts.dbf) === 'CP1252') {
      // Bytes 0x80–0x9F under an ISO-8859-1 label are Windows-1252 punctuation (as the WHATWG standard reads the label).
      ignored.push(`.${rule} says ISO-8859-1 and the DBF holds bytes 0x80–0x9F: read as CP1252`);
      return { encoding: 'CP1252', decidedBy: rule, ignored: ignored.join('; ') };
    }
    if (name === 'UTF-8') {
      // A label is a claim about the bytes, and some files carry the wrong one (a latin1 export
      // with UTF-8 written beside it blocked every load on U+FFFD). The bytes overrule it only
      // when they cannot be UTF-8: more undecodable sequences inside words than valid multibyte
      // ones. A UTF-8 file with a few damaged bytes, or values cut inside their last character,
      // stays UTF-8 (its U+FFFD are counted and block the load). Overruled, the label is passed
      // over like an unreadable one: the LDID and the bytes decide (a DOS file's LDID still counts).
      seen ??= utf8Sequences(parts.dbf);
      if (seen.midWord > seen.multibyte) {
        ignored.push(`.${rule} says UTF-8 but the DBF's bytes are not UTF-8 (${seen.invalid} byte sequences undecodable, ${seen.midWord} of them inside words; ${seen.multibyte} multibyte)`);
        passedOver ??= rule;
        continue;
      }
    }
    if (name) return { encoding: name, decidedBy: rule, ...(ignored.length ? { ignored: ignored.join('; ') } : {}), ...(passedOver ? { passedOver } : {}) };
    ignored.push(`.${rule} "${text.trim().slice(0, 40)}" not recognised`);
    passedOver ??= rule;
  }
  const ldid = dbfLdid(parts.dbf);
  const claimed = ldid === null ? undefined : LDID_CODEPAGES[ldid];
  bytes ??= scanDbfBytes(parts.dbf);
  // Bytes that are valid UTF-8 with multibyte sequences are UTF-8 whatever the LDID says:
  // accented text in a DOS or Windows code page is almost never valid UTF-8, while writers
  // that keep a default LDID over UTF-8 text exist (read as CP850 it published 'Concei├º├úo').
  if (claimed && bytes === 'utf8') ignored.push(`LDID 0x${ldid!.toString(16).padStart(2, '0')} (${claimed}) ignored: the bytes are valid UTF-8`);
  const extra = { ...(ignored.length ? { ignored: ignored.join('; ') } : {}), ...(passedOver ? { passedOver } : {}) };
  if (claimed && bytes === 'latin1') {
    const win = windowsOverDos(parts.dbf, claimed);
    if (win) {
      ignored.push(`LDID 0x${ldid!.toString(16).padStart(2, '0')} (${claimed}) ignored: ${win.why}`);
      return { encoding: win.encoding, decidedBy: 'bytes', ignored: ignored.join('; '), ...(passedOver ? { passedOver } : {}) };
    }
  }
  if (claimed && bytes !== 'utf8') return { encoding: claimed, decidedBy: 'ldid', ...extra };
  if (bytes === 'ascii') return { encoding: 'ISO-8859-1', decidedBy: 'default', ...extra };
  return { encoding: bytes === 'utf8' ? 'UTF-8' : singleBytePage(parts.dbf, isWindowsLdid(ldid)), decidedBy: 'bytes', ...extra };
}
