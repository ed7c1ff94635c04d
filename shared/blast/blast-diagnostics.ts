/**
 * BLAST+ failures as users should read them. BLAST's own messages carry NCBI C++ Toolkit
 * internals (build paths of source files, line numbers, exception class names, `ncbidiag.hpp`)
 * that help nobody who submitted a search; the raw text goes to the log, this goes to the job.
 */

/** `T0 "/build/.../ncbistr.cpp", line 5212: ` — the toolkit's diagnostic location prefix. */
const LOCATION_PREFIX = /\bT\d+\s+"[^"]*",\s*line\s+\d+:\s*/g;
/** A source file path, with an optional line: `/src/corelib/ncbistr.cpp(123)`, `ncbidiag.hpp:42`. */
const SOURCE_PATH = /(?:[A-Za-z]:)?(?:[\w.+-]*[\\/])*[\w.+-]+\.(?:cpp|hpp|cc|hh|cxx|c|h|inl)\b(?:\(\d+\)|:\d+)?/g;
/** `(CStringException::eConvert)` and the like. */
const EXCEPTION_CLASS = /\(?\b\w*Exception::e\w+\)?:?\s*/g;
/** `ncbi::CUtf8::x_GetValidSymbolCount() - ` — toolkit function names. */
const TOOLKIT_FUNCTION = /\bncbi::[\w:~]+\(\)\s*(?:-\s*)?/g;
const TOOLKIT_BANNER = /NCBI C\+\+ Exception:\s*/g;
/** Absolute paths of this machine (work folders, databases): not the user's business either. */
const HOST_PATH = /(?:^|(?<=[\s"'(=:]))\/(?:[\w.+-]+\/)+[\w.+-]*/g;

/**
 * `message` without toolkit internals and host paths, whitespace collapsed; a fallback when
 * nothing readable is left. A message that is plain already comes back unchanged.
 */
export function userFacingBlastError(message: string): string {
  let text = message
    .replace(LOCATION_PREFIX, "")
    .replace(TOOLKIT_BANNER, "")
    .replace(SOURCE_PATH, "")
    .replace(EXCEPTION_CLASS, "")
    .replace(TOOLKIT_FUNCTION, "")
    .replace(HOST_PATH, "<path>")
    .replace(/\s+/g, " ")
    .replace(/(?:\b(Error|Warning):\s*)+(?=\b(?:Error|Warning):)/g, "")
    .replace(/:\s*:/g, ":")
    .replace(/\(\s*\)/g, "")
    .trim();
  if (/UTF-?8/i.test(message) && /convert/i.test(message)) {
    text = `${text.replace(/:?\s*$/, "")} (BLAST+ could not process a non-ASCII character in the query)`;
  }
  return text.replace(/[\s:]+$/, "") || "BLAST failed; see the service log for details";
}
